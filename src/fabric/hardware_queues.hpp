// How many hardware queues (CUDA_DEVICE_MAX_CONNECTIONS) a process's streams
// map onto, and whether TIDE's streams fit. The driver gives each new stream
// the next of those queues in turn; past their count, streams share one FIFO,
// where a stream blocked on a TIDE wait (cuStreamWaitValue) holds up every
// stream behind it. When one of those is the work that would meet the wait (a
// caller's stream that TIDE's "landing free" signal follows, a copy a peer
// waits for), the wait never ends and its deadline stops the process. The
// paper's App. E raises the count to 32 for the same reason.
#pragma once

#include <string>

namespace tide::fabric {

// The driver's count when CUDA_DEVICE_MAX_CONNECTIONS is unset or not a number in [1, 32].
inline constexpr int kDriverDefaultHardwareQueues = 8;
// Streams a caller brings beside TIDE's: PyTorch's default stream, FSDP2's
// all-gather copy-in, all-gather, reduce-scatter and post-forward streams, and
// NCCL's own, with room to spare.
inline constexpr int kCallerStreamAllowance = 8;

// The hardware queues that `maxConnections` (the variable's value, null:
// unset) gives a process's streams.
int hardwareQueuesOf(const char* maxConnections);

// Why `tideStreams` TIDE streams in a process whose CUDA_DEVICE_MAX_CONNECTIONS
// is `maxConnections` (null: unset) risk waits that never end, or "" when they
// and the caller's streams fit in the hardware queues.
std::string hardwareQueueWarning(const char* maxConnections, int tideStreams);

// The same for this process's environment. The driver reads the variable once,
// when the process's CUDA context is made, so a change after that is not seen.
std::string hardwareQueueWarningFromEnv(int tideStreams);

}  // namespace tide::fabric
