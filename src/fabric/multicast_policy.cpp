#include "fabric/multicast_policy.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

namespace tide::fabric {

namespace {

// TIDE_ENABLE_MULTICAST=1, exactly.
bool optedIn(const char* tideEnableMulticast) {
  return tideEnableMulticast != nullptr && std::strcmp(tideEnableMulticast, "1") == 0;
}

}  // namespace

std::string multicastRefusal(const char* tideEnableMulticast, const char* ncclNvlsEnable) {
  if (optedIn(tideEnableMulticast)) return "";
  if (ncclNvlsEnable != nullptr && std::strcmp(ncclNvlsEnable, "0") == 0) return "";
  std::string now = "unset";
  if (ncclNvlsEnable != nullptr) {  // appended: GCC 12 misreads "'" + std::string(...) as an overlapping copy
    now = "'";
    now.append(ncclNvlsEnable).append("'");
  }
  return "NCCL_NVLS_ENABLE is " + now +
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
    if (block.compare(at, key.size(), key) == 0 && end - at >= key.size()) return block.c_str() + at + key.size();
    at = end + 1;
  }
  return nullptr;
}

std::string multicastRefusal(const char* tideEnableMulticast, const char* ncclNvlsEnable,
                             const char* ncclNvlsEnableAtStart, bool startKnown) {
  if (std::string why = multicastRefusal(tideEnableMulticast, ncclNvlsEnable); !why.empty()) return why;
  if (optedIn(tideEnableMulticast) || !startKnown) return "";
  if (ncclNvlsEnableAtStart != nullptr && std::strcmp(ncclNvlsEnableAtStart, "0") == 0) return "";
  std::string then = "unset";
  if (ncclNvlsEnableAtStart != nullptr) {
    then = "'";
    then.append(ncclNvlsEnableAtStart).append("'");
  }
  return "NCCL_NVLS_ENABLE is 0 now but was " + then +
         " when the process started: NCCL reads it once per process, at its first NCCL communicator (torch's, "
         "say), which may have come before it was set, and would then let TIDE's communicator use NVLink "
         "multicast. Export NCCL_NVLS_ENABLE=0 before starting the process (or set TIDE_ENABLE_MULTICAST=1 to "
         "allow multicast)";
}

std::string multicastRefusalFromEnv() {
  // (std::string's stream reads the whole block, NULs included; /proc files report size 0.)
  std::ifstream in("/proc/self/environ", std::ios::binary);
  std::string block;
  const bool startKnown = static_cast<bool>(in);
  if (startKnown) block.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return multicastRefusal(std::getenv("TIDE_ENABLE_MULTICAST"), std::getenv("NCCL_NVLS_ENABLE"),
                          environValue(block, "NCCL_NVLS_ENABLE"), startKnown);
}

}  // namespace tide::fabric
