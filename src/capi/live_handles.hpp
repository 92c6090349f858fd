// The C API's handles that were handed out and not destroyed yet, so that a
// call with a destroyed, doubly destroyed or made-up handle is refused
// (tideInvalidArgument) instead of touching freed memory. A new handle may
// reuse a destroyed one's address; a stale copy then names the new object, as
// with any allocator-backed handle.
#pragma once

#include <mutex>
#include <unordered_set>

namespace tide::capi {

class LiveHandles {
 public:
  void add(const void* h) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(h);
  }
  // False if `h` was not live (destroyed already, or never handed out).
  bool remove(const void* h) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.erase(h) == 1;
  }
  bool contains(const void* h) const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(h) == 1;
  }

 private:
  mutable std::mutex mu_;
  std::unordered_set<const void*> live_;
};

inline LiveHandles& liveComms() {
  static LiveHandles handles;
  return handles;
}

inline LiveHandles& liveGroups() {
  static LiveHandles handles;
  return handles;
}

inline LiveHandles& livePlans() {
  static LiveHandles handles;
  return handles;
}

}  // namespace tide::capi
