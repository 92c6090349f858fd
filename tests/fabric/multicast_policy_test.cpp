// The multicast rule's decision (fabric/multicast_policy): NCCL communicators
// of TIDE are refused unless multicast is off in NCCL's environment or the
// user opted in; the refusal says what to set.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

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

TEST(MulticastPolicy, ReadsValuesFromAnEnvironmentBlock) {
  const std::string block("A=1\0NCCL_NVLS_ENABLE=0\0NCCL_NVLS_ENABLEX=7\0EMPTY=\0LAST=z", 56);
  ASSERT_EQ(block.size(), 56u);
  EXPECT_STREQ(environValue(block, "NCCL_NVLS_ENABLE"), "0");
  EXPECT_STREQ(environValue(block, "NCCL_NVLS_ENABLEX"), "7");
  EXPECT_STREQ(environValue(block, "EMPTY"), "");
  EXPECT_STREQ(environValue(block, "LAST"), "z");  // the block's last entry, without a trailing NUL
  EXPECT_EQ(environValue(block, "NCCL_NVLS"), nullptr);  // a prefix of a name is not the name
  EXPECT_EQ(environValue(block, "B"), nullptr);
  EXPECT_EQ(environValue(std::string(), "A"), nullptr);
}

// 0 set during the process is refused unless it was 0 at the start too (NCCL may have read the
// variable before it was set), or the user opted in; an unreadable start environment leaves the
// current value alone to decide.
TEST(MulticastPolicy, ZeroSetDuringTheProcessIsRefusedUnlessItWasZeroAtTheStart) {
  EXPECT_EQ(multicastRefusal(nullptr, "0", "0", true), "");
  EXPECT_EQ(multicastRefusal(nullptr, "0", nullptr, false), "");
  EXPECT_EQ(multicastRefusal("1", "0", nullptr, true), "");
  EXPECT_EQ(multicastRefusal("1", nullptr, nullptr, true), "");
  for (const char* start : {static_cast<const char*>(nullptr), "1", ""}) {
    const std::string why = multicastRefusal(nullptr, "0", start, true);
    EXPECT_NE(why.find("when the process started"), std::string::npos) << why;
    EXPECT_NE(why.find(start == nullptr ? std::string("was unset") : std::string("was '") + start + "'"),
              std::string::npos)
        << why;
    EXPECT_NE(why.find("Export NCCL_NVLS_ENABLE=0 before starting the process"), std::string::npos) << why;
  }
  // Not 0 now: the current value's refusal, whatever the start.
  EXPECT_NE(multicastRefusal(nullptr, "1", "0", true).find("NCCL_NVLS_ENABLE is '1'"), std::string::npos);
}

// This process: its start environment read here independently (/proc/self/environ); setting the
// variable to 0 now passes only where it was 0 at the start.
TEST(MulticastPolicy, ReadsThisProcesssEnvironmentNowAndAtItsStart) {
  std::ifstream in("/proc/self/environ", std::ios::binary);
  if (!in) GTEST_SKIP() << "no /proc/self/environ";
  const std::string block((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const bool zeroAtStart = block.find(std::string("\0NCCL_NVLS_ENABLE=0\0", 20)) != std::string::npos ||
                           block.rfind("NCCL_NVLS_ENABLE=0\0", 0) == 0;
  unsetenv("TIDE_ENABLE_MULTICAST");
  setenv("NCCL_NVLS_ENABLE", "1", 1);
  EXPECT_NE(multicastRefusalFromEnv(), "");
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  EXPECT_EQ(multicastRefusalFromEnv() == "", zeroAtStart) << multicastRefusalFromEnv();
  setenv("TIDE_ENABLE_MULTICAST", "1", 1);
  EXPECT_EQ(multicastRefusalFromEnv(), "");
  unsetenv("TIDE_ENABLE_MULTICAST");
  unsetenv("NCCL_NVLS_ENABLE");
  EXPECT_NE(multicastRefusalFromEnv(), "");
}

}  // namespace
}  // namespace tide::fabric
