// The multicast rule's decision (fabric/multicast_policy): NCCL communicators
// of TIDE are refused unless multicast is off in NCCL's environment or the
// user opted in; the refusal says what to set.
#include <gtest/gtest.h>

#include "fabric/multicast_policy.hpp"

namespace tide::fabric {
namespace {

TEST(MulticastPolicy, AllowsOnlyNvlsOffOrTheOptIn) {
  EXPECT_EQ(multicastRefusal(nullptr, "0"), "");
  EXPECT_EQ(multicastRefusal("0", "0"), "");
  EXPECT_EQ(multicastRefusal("1", nullptr), "");
  EXPECT_EQ(multicastRefusal("1", "2"), "");
}

TEST(MulticastPolicy, RefusesUnsetOrEnabledNvlsAndSaysWhatToSet) {
  const std::string unset = multicastRefusal(nullptr, nullptr);
  EXPECT_NE(unset.find("unset"), std::string::npos) << unset;
  EXPECT_NE(unset.find("NCCL_NVLS_ENABLE=0"), std::string::npos) << unset;
  EXPECT_NE(unset.find("TIDE_ENABLE_MULTICAST=1"), std::string::npos) << unset;
  for (const char* nvls : {"1", "2", "", "00", " 0"}) {
    const std::string why = multicastRefusal(nullptr, nvls);
    EXPECT_NE(why.find(std::string("NCCL_NVLS_ENABLE is '") + nvls + "'"), std::string::npos) << why;
  }
  for (const char* optIn : {"0", "true", "yes", ""})  // only "1" opts in
    EXPECT_NE(multicastRefusal(optIn, "1"), "") << "TIDE_ENABLE_MULTICAST='" << optIn << "'";
}

TEST(MulticastPolicy, RefusesAMulticastCapableCommunicatorUnlessOptedIn) {
  EXPECT_EQ(multicastRefusalForComm(false, nullptr), "");
  EXPECT_EQ(multicastRefusalForComm(true, "1"), "");
  for (const char* optIn : {static_cast<const char*>(nullptr), "0", "true", ""}) {
    const std::string why = multicastRefusalForComm(true, optIn);
    EXPECT_NE(why.find("NCCL read the variable before it was set"), std::string::npos) << why;
    EXPECT_NE(why.find("TIDE_ENABLE_MULTICAST=1"), std::string::npos) << why;
  }
}

TEST(MulticastPolicy, ReadsThisProcesssEnvironment) {
  unsetenv("TIDE_ENABLE_MULTICAST");
  setenv("NCCL_NVLS_ENABLE", "1", 1);
  EXPECT_NE(multicastRefusalFromEnv(), "");
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  EXPECT_EQ(multicastRefusalFromEnv(), "");
  unsetenv("NCCL_NVLS_ENABLE");
  EXPECT_NE(multicastRefusalFromEnv(), "");
}

}  // namespace
}  // namespace tide::fabric
