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

// The variable's value in a NUL-separated environment block ("NAME=value\0..."),
// as /proc/self/environ holds the environment the process started with, or
// null when the block does not set it.
const char* environValue(const std::string& block, const char* name);

// The refusal with the value the process started with as well
// (`ncclNvlsEnableAtStart`, null: not set then; `startKnown` false: the start
// environment could not be read, and only the current value counts). A value
// of 0 set during the process may come after NCCL read the variable for an
// earlier communicator (torch's), whose setting NCCL then keeps for TIDE's:
// with multicast allowed, NCCL would create a multicast object in TIDE's
// communicator's initialization, before any check after it could refuse, and
// before NCCL 2.29 nothing can ask NCCL afterwards. So 0 must be there from
// the start (or the user opts in).
std::string multicastRefusal(const char* tideEnableMulticast, const char* ncclNvlsEnable,
                             const char* ncclNvlsEnableAtStart, bool startKnown);

// The same for this process's environment, now and at its start (/proc/self/environ).
std::string multicastRefusalFromEnv();

// Why a TIDE NCCL communicator that NCCL reports as multicast capable
// (ncclCommQueryProperties' multimemSupport) must not register TIDE's window,
// or "" when it may: not capable, or TIDE_ENABLE_MULTICAST=1
// (`tideEnableMulticast`, null: unset). Catches what the environment check
// cannot: NCCL_NVLS_ENABLE set to 0 after NCCL had read it.
std::string multicastRefusalForComm(bool multimemSupport, const char* tideEnableMulticast);

}  // namespace tide::fabric
