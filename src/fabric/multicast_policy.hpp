// The multicast rule (DESIGN §2): NCCL may use NVLink multicast (NVLS) in a
// TIDE communicator only when the user opts in with TIDE_ENABLE_MULTICAST=1.
// NCCL reads NCCL_NVLS_ENABLE once per process, at its first communicator,
// which is usually torch's, made before TIDE's: setting the variable from
// inside TIDE cannot be trusted to reach NCCL, so TIDE refuses instead.
#pragma once

#include <string>

namespace tide::fabric {

// Why a TIDE NCCL communicator must not be created with this environment, or
// "" when it may: TIDE_ENABLE_MULTICAST=1, or NCCL_NVLS_ENABLE=0. Arguments
// are the variables' values (null: unset).
std::string multicastRefusal(const char* tideEnableMulticast, const char* ncclNvlsEnable);

// The same for this process's environment.
std::string multicastRefusalFromEnv();

// Why a TIDE NCCL communicator that NCCL reports as multicast capable
// (ncclCommQueryProperties' multimemSupport) must not register TIDE's window,
// or "" when it may: not capable, or TIDE_ENABLE_MULTICAST=1
// (`tideEnableMulticast`, null: unset). Catches what the environment check
// cannot: NCCL_NVLS_ENABLE set to 0 after NCCL had read it.
std::string multicastRefusalForComm(bool multimemSupport, const char* tideEnableMulticast);

}  // namespace tide::fabric
