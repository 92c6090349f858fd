// The C API's handles that were handed out and not destroyed yet, so that a
// call with a destroyed, doubly destroyed or made-up handle is refused
// (tideInvalidArgument) instead of touching freed memory or another object.
// A handle is an opaque number, never the object's address, and never handed
// out twice in a process: a stale copy of a destroyed handle stays refused
// even after a new object took the old one's memory (with addresses as
// handles, it named the new object: a second destroy freed it).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace tide::capi {

// The next handle value, shared by every kind of handle (a communicator's is
// never a group's or a plan's): multiples of 16 from 0x10000 on, so that a
// handle never reads as a small integer or NULL.
inline uintptr_t nextHandleValue() {
  static std::atomic<uintptr_t> next{0x10000};
  return next.fetch_add(16, std::memory_order_relaxed);
}

// Handles whose objects live as long as anyone uses them: a call takes a
// reference (acquire) for its duration, so that destroy, which only drops the
// registry's, never frees an object another thread is inside or waiting on.
// The handle type is T* (the C API's typedefs) but is never dereferenced:
// a call resolves it with acquire and uses the object it gets.
template <class T>
class SharedHandles {
 public:
  // Registers `object` and returns its new handle.
  T* add(std::shared_ptr<T> object) {
    const uintptr_t value = nextHandleValue();
    std::lock_guard<std::mutex> lock(mu_);
    live_.emplace(value, std::move(object));
    return reinterpret_cast<T*>(value);
  }
  // Null if `h` is not live.
  std::shared_ptr<T> acquire(const T* h) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(h));
    return it == live_.end() ? nullptr : it->second;
  }
  // The registry's reference (null if `h` was not live); `h` is no longer live.
  std::shared_ptr<T> remove(const T* h) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(h));
    if (it == live_.end()) return nullptr;
    std::shared_ptr<T> out = std::move(it->second);
    live_.erase(it);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<uintptr_t, std::shared_ptr<T>> live_;
};

}  // namespace tide::capi
