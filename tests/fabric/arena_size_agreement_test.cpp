// The arena-size comparison's verdicts and the shared "which ranks reported
// what" listing (fabric/rank_kinds.hpp), without ranks.
#include "fabric/arena_size_agreement.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fabric/rank_kinds.hpp"

namespace tide::fabric {
namespace {

TEST(ArenaSizeAgreement, EqualSizesAgree) {
  EXPECT_EQ(arenaSizeDisagreement("r", {1 << 22, 1 << 22, 1 << 22}), "");
  EXPECT_EQ(arenaSizeDisagreement("r", {7}), "");
}

TEST(ArenaSizeAgreement, DifferentSizesNameTheRanksOfEachSize) {
  const std::string msg = arenaSizeDisagreement("cuda fabric: rank 2", {4096, 8192, 4096, 8192, 1});
  EXPECT_EQ(msg.rfind("cuda fabric: rank 2: the ranks asked for different arena sizes", 0), 0u) << msg;
  EXPECT_NE(msg.find(" ranks 0,2: 4096 bytes; ranks 1,3: 8192 bytes; rank 4: 1 bytes;"), std::string::npos) << msg;
}

TEST(RankKinds, KindsInOrderOfTheirLowestRank) {
  const std::vector<int> perRank = {5, 3, 5, 5, 9, 3};
  const std::string listed = describeRankKinds(perRank, [](int k) {
    std::string s = "k";  // (appended: GCC 12's -Wrestrict misfires on "k" + std::string)
    s += std::to_string(k);
    return s;
  });
  EXPECT_EQ(listed, " ranks 0,2,3: k5; ranks 1,5: k3; rank 4: k9;");
  EXPECT_EQ(describeRankKinds(std::vector<int>{}, [](int) { return std::string("x"); }), "");
}

}  // namespace
}  // namespace tide::fabric
