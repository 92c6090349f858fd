#include "fabric/multicast_policy.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "fabric/small_file.hpp"

namespace tide::fabric {

namespace {

// TIDE_ENABLE_MULTICAST=1, exactly.
bool optedIn(const char* tideEnableMulticast) {
  return tideEnableMulticast != nullptr && std::strcmp(tideEnableMulticast, "1") == 0;
}

// A variable's value as the refusals print it: 'value', or unset.
std::string quotedOrUnset(const char* value) {
  if (value == nullptr) return "unset";
  std::string quoted = "'";  // appended: GCC 12 misreads "'" + std::string(...) as an overlapping copy
  quoted.append(value).append("'");
  return quoted;
}

}  // namespace

std::string multicastRefusal(const char* tideEnableMulticast, const char* ncclNvlsEnable) {
  if (optedIn(tideEnableMulticast)) return "";
  if (ncclNvlsEnable != nullptr && std::strcmp(ncclNvlsEnable, "0") == 0) return "";
  return "NCCL_NVLS_ENABLE is " + quotedOrUnset(ncclNvlsEnable) +
         ": TIDE lets NCCL use NVLink multicast only with TIDE_ENABLE_MULTICAST=1. Set NCCL_NVLS_ENABLE=0 "
         "before the process creates its first NCCL communicator (NCCL reads it once per process, so setting "
         "it later does not reach a communicator torch already made)";
}

std::string multicastRefusalForComm(bool multimemSupport, const char* tideEnableMulticast) {
  if (!multimemSupport || optedIn(tideEnableMulticast)) return "";
  return "NCCL reports NVLink multicast available on TIDE's communicator although NCCL_NVLS_ENABLE is 0 now: "
         "NCCL read the variable before it was set (at the process's first NCCL communicator, torch's, say). "
         "TIDE lets NCCL use multicast only with TIDE_ENABLE_MULTICAST=1; set NCCL_NVLS_ENABLE=0 before the "
         "process makes its first NCCL communicator";
}

const char* environValue(const std::string& block, const char* name) {
  const std::string key = std::string(name) + "=";
  for (size_t at = 0; at < block.size();) {
    const size_t end = std::min(block.find('\0', at), block.size());
    if (block.compare(at, key.size(), key) == 0) return block.c_str() + at + key.size();  // (key has no NUL)
    at = end + 1;
  }
  return nullptr;
}

std::string multicastRefusal(const char* tideEnableMulticast, const char* ncclNvlsEnable,
                             const char* ncclNvlsEnableAtStart, bool startKnown) {
  if (std::string why = multicastRefusal(tideEnableMulticast, ncclNvlsEnable); !why.empty()) return why;
  if (optedIn(tideEnableMulticast) || !startKnown) return "";
  if (ncclNvlsEnableAtStart != nullptr && std::strcmp(ncclNvlsEnableAtStart, "0") == 0) return "";
  return "NCCL_NVLS_ENABLE is 0 now but was " + quotedOrUnset(ncclNvlsEnableAtStart) +
         " when the process started: NCCL reads it once per process, at its first NCCL communicator (torch's, "
         "say), which may have come before it was set, and would then let TIDE's communicator use NVLink "
         "multicast. Export NCCL_NVLS_ENABLE=0 before starting the process (or set TIDE_ENABLE_MULTICAST=1 to "
         "allow multicast)";
}

std::string multicastRefusalFromEnv() {
  // Read without iostreams (small_file.hpp: they crashed inside processes carrying PyTorch's libstdc++);
  // a block cut at 1 MiB that misses the variable refuses, the safe side.
  const std::optional<std::string> block = readSmallFile("/proc/self/environ", 1 << 20);
  return multicastRefusal(std::getenv("TIDE_ENABLE_MULTICAST"), std::getenv("NCCL_NVLS_ENABLE"),
                          block ? environValue(*block, "NCCL_NVLS_ENABLE") : nullptr, block.has_value());
}

}  // namespace tide::fabric
