// The C API's handles that were handed out and not destroyed yet, so that a
// call with a destroyed, doubly destroyed or made-up handle is refused
// (tideInvalidArgument) instead of touching freed memory. A new handle may
// reuse a destroyed one's address; a stale copy then names the new object, as
// with any allocator-backed handle.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

namespace tide::capi {

// Handles whose objects live as long as anyone uses them: a call takes a
// reference (acquire) for its duration, so that destroy, which only drops the
// registry's, never frees an object another thread is inside or waiting on.
template <class T>
class SharedHandles {
 public:
  void add(std::shared_ptr<T> h) {
    std::lock_guard<std::mutex> lock(mu_);
    const T* key = h.get();
    live_.emplace(key, std::move(h));
  }
  // Null if `h` is not live.
  std::shared_ptr<T> acquire(const T* h) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(h);
    return it == live_.end() ? nullptr : it->second;
  }
  // The registry's reference (null if `h` was not live); `h` is no longer live.
  std::shared_ptr<T> remove(const T* h) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(h);
    if (it == live_.end()) return nullptr;
    std::shared_ptr<T> out = std::move(it->second);
    live_.erase(it);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_map<const T*, std::shared_ptr<T>> live_;
};

}  // namespace tide::capi
