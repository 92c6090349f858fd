#include "fabric/hardware_queues.hpp"

#include <cerrno>
#include <cstdlib>

namespace tide::fabric {

namespace {
constexpr int kDriverMaxHardwareQueues = 32;
}

int hardwareQueuesOf(const char* maxConnections) {
  if (maxConnections == nullptr || *maxConnections == '\0') return kDriverDefaultHardwareQueues;
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(maxConnections, &end, 10);
  if (errno != 0 || end == maxConnections || *end != '\0' || n < 1 || n > kDriverMaxHardwareQueues)
    return kDriverDefaultHardwareQueues;
  return static_cast<int>(n);
}

std::string hardwareQueueWarning(const char* maxConnections, int tideStreams) {
  const int queues = hardwareQueuesOf(maxConnections);
  if (tideStreams + kCallerStreamAllowance <= queues) return "";
  std::string setting = "unset, the driver's default";
  if (maxConnections != nullptr) {
    setting = "'";
    setting += maxConnections;
    setting += "'";
  }
  std::string warning = "CUDA_DEVICE_MAX_CONNECTIONS is " + setting + ": " + std::to_string(queues) +
                        " hardware queues for this process's streams, and TIDE's communicators use " +
                        std::to_string(tideStreams) +
                        " of their own besides the caller's. Streams then share queues, where a stream blocked on a "
                        "TIDE wait can hold up the work that would end it (the wait's deadline then stops the "
                        "process). ";
  // Raising the count helps only up to the driver's most; past that, what
  // takes queues is the number of communicators this process keeps alive.
  if (tideStreams + kCallerStreamAllowance <= kDriverMaxHardwareQueues)
    return warning + "Set CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts in the process";
  warning += "Even 32, the driver's most, is too few: keep fewer TIDE communicators alive in this process at once "
             "(destroy those no longer used, or run fewer ranks per process)";
  if (queues < kDriverMaxHardwareQueues) warning += ", and set CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts";
  return warning;
}

std::string hardwareQueueWarningFromEnv(int tideStreams) {
  return hardwareQueueWarning(std::getenv("CUDA_DEVICE_MAX_CONNECTIONS"), tideStreams);
}

}  // namespace tide::fabric
