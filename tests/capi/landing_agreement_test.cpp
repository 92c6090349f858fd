// The landing comparison's words and verdicts, without ranks (the ranks' side:
// tests/python/test_comm_landing_agreement.py).
#include "capi/landing_agreement.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "rank_words.hpp"

namespace tide::capi {
namespace {

TEST(LandingAgreement, RanksPassingTheSameOffsetAgree) {
  const auto w = landingWords(3, 1 << 20);
  EXPECT_EQ(landingDisagreement(3, 1 << 20, 1, concat({w, w, w})), "");
}

TEST(LandingAgreement, ADifferentOffsetOrGroupNamesTheRanksOfEachKind) {
  const std::string offsets =
      landingDisagreement(0, 4096, 2, concat({landingWords(0, 8192), landingWords(0, 4096), landingWords(0, 4096)}));
  EXPECT_NE(offsets.find("rank 0: group 0 at offset 8192;"), std::string::npos) << offsets;
  EXPECT_NE(offsets.find("ranks 1,2: group 0 at offset 4096;"), std::string::npos) << offsets;
  EXPECT_NE(offsets.find("this rank (2) passed offset 4096 to group 0"), std::string::npos) << offsets;

  const std::string groups = landingDisagreement(1, 0, 0, concat({landingWords(1, 0), landingWords(2, 0)}));
  EXPECT_NE(groups.find("rank 1: group 2 at offset 0;"), std::string::npos) << groups;
}

TEST(LandingAgreement, ARankInTheGroupsComparisonIsNamedOutOfStep) {
  // The groups' comparison contributes {group count, digest}: also two words.
  const std::vector<uint64_t> groupsWords = {2, 0x1234abcdULL};
  const std::string msg = landingDisagreement(0, 0, 0, concat({landingWords(0, 0), groupsWords}));
  EXPECT_NE(msg.find("rank 1: in another exchange"), std::string::npos) << msg;
  // And the groups' side tells a landing comparison from a group count.
  EXPECT_TRUE(isLandingComparison(landingWords(5, 4096)[0]));
  EXPECT_FALSE(isLandingComparison(groupsWords[0]));
  EXPECT_FALSE(isLandingComparison(0));
}

TEST(LandingAgreement, NegativeAndLargeOffsetsRoundTrip) {
  const int64_t big = (int64_t{1} << 50) + 4096;
  EXPECT_EQ(landingDisagreement(7, big, 0, concat({landingWords(7, big), landingWords(7, big)})), "");
  const std::string msg = landingDisagreement(7, big, 0, concat({landingWords(7, big), landingWords(7, -4096)}));
  EXPECT_NE(msg.find("rank 1: group 7 at offset -4096;"), std::string::npos) << msg;
}

TEST(AgreedLandings, CountsEachOffsetOnceAndSaysWhenThereAreMany) {
  AgreedLandings landings;
  EXPECT_FALSE(landings.contains(0));
  for (size_t i = 0; i + 1 < AgreedLandings::kManyLandings; ++i) {
    EXPECT_FALSE(landings.add(static_cast<int64_t>(i) * 4096));
    EXPECT_FALSE(landings.add(static_cast<int64_t>(i) * 4096));  // again: no change
  }
  EXPECT_EQ(landings.size(), AgreedLandings::kManyLandings - 1);
  EXPECT_TRUE(landings.add(-1));  // the kManyLandings-th
  EXPECT_FALSE(landings.add(-2));
  EXPECT_TRUE(landings.contains(0) && landings.contains(-1) && !landings.contains(4096 * 1000));
}

}  // namespace
}  // namespace tide::capi
