// Whether TIDE's streams and a caller's fit in the process's hardware queues
// (fabric/hardware_queues): the count the driver takes from
// CUDA_DEVICE_MAX_CONNECTIONS, and the warning that says what to set.
#include <gtest/gtest.h>

#include "fabric/hardware_queues.hpp"

namespace tide::fabric {
namespace {

TEST(HardwareQueues, TakesTheDriversCountOrItsDefault) {
  EXPECT_EQ(hardwareQueuesOf("32"), 32);
  EXPECT_EQ(hardwareQueuesOf("1"), 1);
  EXPECT_EQ(hardwareQueuesOf("17"), 17);
  for (const char* odd : {static_cast<const char*>(nullptr), "", "0", "33", "-4", "x", "16x", "99999999999999999999"})
    EXPECT_EQ(hardwareQueuesOf(odd), kDriverDefaultHardwareQueues) << (odd == nullptr ? "unset" : odd);
}

TEST(HardwareQueues, QuietWhenTideAndTheCallerFit) {
  // One communicator: seven queues, a control stream and NCCL's.
  EXPECT_EQ(hardwareQueueWarning("32", 9), "");
  EXPECT_EQ(hardwareQueueWarning("32", 32 - kCallerStreamAllowance), "");
  EXPECT_EQ(hardwareQueueWarning("16", 16 - kCallerStreamAllowance), "");
}

TEST(HardwareQueues, WarnsWhenStreamsMustShareQueuesAndSaysWhatToSet) {
  const std::string unset = hardwareQueueWarning(nullptr, 9);
  EXPECT_NE(unset.find("unset, the driver's default: 8 hardware queues"), std::string::npos) << unset;
  EXPECT_NE(unset.find("use 9 of their own"), std::string::npos) << unset;
  EXPECT_NE(unset.find("CUDA_DEVICE_MAX_CONNECTIONS=32"), std::string::npos) << unset;
  // Megatron-style setups ask for a single queue.
  const std::string one = hardwareQueueWarning("1", 9);
  EXPECT_NE(one.find("is '1': 1 hardware queues"), std::string::npos) << one;
}

TEST(HardwareQueues, PastTheDriversMostAsksForFewerCommunicatorsNotForWhatIsSet) {
  // Four co-resident ranks of seven queues each overflow even 32: raising the
  // count further is not possible, so the warning must not ask for it.
  const std::string at_most = hardwareQueueWarning("32", 28);
  EXPECT_NE(at_most.find("is '32': 32 hardware queues"), std::string::npos) << at_most;
  EXPECT_NE(at_most.find("fewer TIDE communicators"), std::string::npos) << at_most;
  EXPECT_EQ(at_most.find("set CUDA_DEVICE_MAX_CONNECTIONS=32"), std::string::npos) << at_most;
  EXPECT_EQ(at_most.find("Set CUDA_DEVICE_MAX_CONNECTIONS=32"), std::string::npos) << at_most;
  const std::string just_past = hardwareQueueWarning("32", 32 - kCallerStreamAllowance + 1);
  EXPECT_NE(just_past.find("fewer TIDE communicators"), std::string::npos) << just_past;
  // Below the most, both the setting and fewer communicators are named.
  const std::string low = hardwareQueueWarning("16", 28);
  EXPECT_NE(low.find("fewer TIDE communicators"), std::string::npos) << low;
  EXPECT_NE(low.find("set CUDA_DEVICE_MAX_CONNECTIONS=32"), std::string::npos) << low;
  // Where 32 would hold them, only the setting is named.
  EXPECT_EQ(hardwareQueueWarning(nullptr, 9).find("fewer TIDE communicators"), std::string::npos);
}

}  // namespace
}  // namespace tide::fabric
