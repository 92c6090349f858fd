// The per-call comparison's words and verdicts (TIDE_CHECK_CALLS), and the
// groups' comparison telling ranks that set it differently, without ranks
// (the ranks' side: tests/python/test_comm_call_agreement.py).
#include "capi/call_agreement.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "capi/group_agreement.hpp"
#include "capi/landing_agreement.hpp"
#include "rank_words.hpp"

namespace tide::capi {
namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CallAgreement, RanksIssuingTheSameCallAgree) {
  const auto ag = callWords(CallKind::kAllGather, 4, 17, 1 << 20);
  EXPECT_EQ(callDisagreement(ag, 1, concat({ag, ag, ag})), "");
  const auto rs = callWords(CallKind::kReduceScatter, 4, 18, 0);
  EXPECT_EQ(callDisagreement(rs, 0, concat({rs, rs})), "");
  EXPECT_EQ(rs.size(), 2u);  // as the groups' and landings' comparisons: ranks out of step meet alike
}

TEST(CallAgreement, EachDifferenceIsCaughtAndNamed) {
  const auto mine = callWords(CallKind::kAllGather, 3, 9, 4096);
  const std::vector<std::vector<uint64_t>> others = {
      callWords(CallKind::kAllGather, 4, 9, 4096),      // another group
      callWords(CallKind::kReduceScatter, 3, 9, 4096),  // another kind
      callWords(CallKind::kAllGather, 3, 10, 4096),     // another call number
      callWords(CallKind::kAllGather, 3, 9, 8192),      // another landing
  };
  for (const auto& other : others) {
    const std::string msg = callDisagreement(mine, 0, concat({mine, other}));
    ASSERT_FALSE(msg.empty());
    EXPECT_TRUE(has(msg, "rank 0: call 9, all-gather of group 3 (landing digest ")) << msg;
    EXPECT_TRUE(has(msg, "this rank (0) issued call 9, all-gather of group 3")) << msg;
    EXPECT_TRUE(has(msg, "unusable")) << msg;
  }
  EXPECT_TRUE(has(callDisagreement(mine, 0, concat({mine, others[0]})), "rank 1: call 9, all-gather of group 4"));
  EXPECT_TRUE(has(callDisagreement(mine, 0, concat({mine, others[1]})), "rank 1: call 9, reduce-scatter of group 3;"));
  EXPECT_TRUE(has(callDisagreement(mine, 0, concat({mine, others[2]})), "rank 1: call 10, all-gather of group 3"));
}

TEST(CallAgreement, RanksOfOneKindAreListedTogether) {
  const auto a = callWords(CallKind::kReduceScatter, 1, 2, 0);
  const auto b = callWords(CallKind::kReduceScatter, 2, 2, 0);
  const std::string msg = callDisagreement(b, 3, concat({a, a, a, b}));
  EXPECT_TRUE(has(msg, "ranks 0,1,2: call 2, reduce-scatter of group 1;")) << msg;
  EXPECT_TRUE(has(msg, "rank 3: call 2, reduce-scatter of group 2;")) << msg;
}

TEST(CallAgreement, RanksInOtherExchangesAreNamedOutOfStep) {
  const auto mine = callWords(CallKind::kAllGather, 0, 0, 0);
  const std::string landing = callDisagreement(mine, 0, concat({mine, landingWords(0, 0)}));
  EXPECT_TRUE(has(landing, "rank 1: in another exchange (comparing a landing offset")) << landing;
  const std::string groups = callDisagreement(mine, 0, concat({mine, std::vector<uint64_t>{2, 0xabcdef}}));
  EXPECT_TRUE(has(groups, "rank 1: in another exchange (comparing the registered groups")) << groups;
  EXPECT_TRUE(isCallComparison(mine[0]));
  EXPECT_FALSE(isCallComparison(landingWords(0, 0)[0]));
  EXPECT_FALSE(isCallComparison(2));
  EXPECT_FALSE(isLandingComparison(mine[0]));
}

TEST(CallAgreement, CallNumbersAreComparedByTheirLow32Bits) {
  const uint64_t n = (uint64_t{1} << 32) + 5;
  const auto mine = callWords(CallKind::kAllGather, 0, n, 64);
  EXPECT_EQ(callDisagreement(mine, 0, concat({mine, callWords(CallKind::kAllGather, 0, n, 64)})), "");
  EXPECT_FALSE(callDisagreement(mine, 0, concat({mine, callWords(CallKind::kAllGather, 0, n + 1, 64)})).empty());
  // Ranks 2^32 calls apart read alike: the word keeps the low 32 bits (ranks that far apart have long timed out).
  EXPECT_EQ(callDisagreement(mine, 0, concat({mine, callWords(CallKind::kAllGather, 0, 5, 64)})), "");
}

TEST(CallAgreement, GroupIndexBeyondItsBitsIsRefused) {
  EXPECT_THROW(callWords(CallKind::kAllGather, size_t{1} << 31, 0, 0), std::invalid_argument);
}

TEST(CallAgreement, TheEnvironmentSwitch) {
  ::unsetenv("TIDE_CHECK_CALLS");
  EXPECT_FALSE(callChecksFromEnv());
  ::setenv("TIDE_CHECK_CALLS", "0", 1);
  EXPECT_FALSE(callChecksFromEnv());
  ::setenv("TIDE_CHECK_CALLS", "1", 1);
  EXPECT_TRUE(callChecksFromEnv());
  ::setenv("TIDE_CHECK_CALLS", "yes", 1);
  EXPECT_THROW(callChecksFromEnv(), std::invalid_argument);
  ::unsetenv("TIDE_CHECK_CALLS");
}

TEST(GroupAgreement, RanksThatSetCallChecksDifferentlyAreToldSo) {
  // No groups needed: the flag rides on the groups' count word.
  const std::vector<GroupDigest> none;
  const auto on = groupsDigest(none, true);
  const auto off = groupsDigest(none, false);
  EXPECT_EQ(groupsDisagreement(none, true, 0, concat({on, on})), "");
  const std::string msg = groupsDisagreement(none, true, 0, concat({on, off, on}));
  EXPECT_TRUE(has(msg, "set TIDE_CHECK_CALLS differently")) << msg;
  EXPECT_TRUE(has(msg, "ranks 0,2: 0 group(s), digest")) << msg;
  EXPECT_TRUE(has(msg, "comparing every call;")) << msg;
  EXPECT_FALSE(has(msg, "registered different groups")) << msg;
  const std::string crossed = groupsDisagreement(none, false, 1, concat({callWords(CallKind::kAllGather, 0, 0, 0), off}));
  EXPECT_TRUE(has(crossed, "rank 0: in another exchange (comparing a call")) << crossed;
}

}  // namespace
}  // namespace tide::capi
