#include "fabric/multicast_policy.hpp"

#include <cstdlib>
#include <cstring>

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

std::string multicastRefusalFromEnv() {
  return multicastRefusal(std::getenv("TIDE_ENABLE_MULTICAST"), std::getenv("NCCL_NVLS_ENABLE"));
}

}  // namespace tide::fabric
