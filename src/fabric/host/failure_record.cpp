#include "fabric/host/failure_record.hpp"

#include <chrono>
#include <cstring>
#include <thread>

namespace tide::fabric::host {

namespace {
constexpr int kNone = 0, kClaimed = 1, kPublished = 2;
}

bool recordFirstFailure(std::atomic<int>& state, char* buffer, size_t bufferBytes, const std::string& message) {
  int expected = kNone;
  if (!state.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel)) return false;
  if (buffer != nullptr && bufferBytes > 0) {
    std::strncpy(buffer, message.c_str(), bufferBytes - 1);
    buffer[bufferBytes - 1] = '\0';
  }
  state.store(kPublished, std::memory_order_release);
  return true;
}

std::string firstFailure(const std::atomic<int>& state, const char* buffer) {
  // The writer copies at most a kilobyte; a second is ample even on a loaded host.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (state.load(std::memory_order_acquire) == kClaimed && std::chrono::steady_clock::now() < end)
    std::this_thread::yield();
  if (state.load(std::memory_order_acquire) != kPublished || buffer == nullptr)
    return "(the failing rank had not published its message)";
  return std::string(buffer);
}

}  // namespace tide::fabric::host
