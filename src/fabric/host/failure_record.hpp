// The job's first failure, shared by every rank (threads of one process or
// processes over shared memory): a state word and a message buffer.
//
// The state goes 0 (none) -> 1 (claimed: the first failing rank is writing
// the message) -> 2 (published). Peers stop as soon as the state is non-zero,
// but read the message only once it is published, so they never read it
// while it is being written.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace tide::fabric::host {

// Records `message` if no failure was recorded before; true if this call did.
bool recordFirstFailure(std::atomic<int>& state, char* buffer, size_t bufferBytes, const std::string& message);

// Non-zero once any rank has failed (its message may still be being written).
inline bool jobFailed(const std::atomic<int>* state) {
  return state != nullptr && state->load(std::memory_order_acquire) != 0;
}

// The recorded message; waits briefly for one being written, and says so if
// it is still not published.
std::string firstFailure(const std::atomic<int>& state, const char* buffer);

}  // namespace tide::fabric::host
