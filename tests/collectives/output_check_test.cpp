// The reduce-scatter output check itself (bench/reference): against a float64
// sum written out here by hand, a correct output passes, every kind of wrong
// element is counted, and the worst error is reported for misses too, so a
// failing run prints how far off it was.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "bench/reference.hpp"
#include "test_seed.hpp"

namespace tide {
namespace {

using plan::DType;

struct TwoRankFp32Group {
  plan::GroupLayout g;
  std::vector<std::vector<float>> grads;  // grads[u]: rank u's unsharded gradient of the one parameter
  std::vector<std::vector<const void*>> ptrs;
  std::vector<float> want;  // rank 0's shard of the sum, in float64 then rounded

  // `integers`: integer-valued gradients, whose fp32 sums are exact.
  TwoRankFp32Group(uint64_t seed, bool integers = false) {
    g = plan::makeGroupLayout(plan::Topology::make(1, 2), {{{6, 3}, DType::kFP32}}, DType::kFP32);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
    grads.assign(2, std::vector<float>(18));
    for (auto& r : grads)
      for (float& v : r) v = integers ? std::round(dist(rng) * 100) : dist(rng);
    for (const auto& r : grads) ptrs.push_back({r.data()});
    want.resize(static_cast<size_t>(g.outElems));
    for (size_t x = 0; x < want.size(); ++x)  // rank 0 owns rows 0..2 of the 6 x 3 parameter
      want[x] = static_cast<float>(double{grads[0][x]} + double{grads[1][x]});
  }
  bench::OutputCheck check(const std::vector<float>& y) const {
    return bench::checkShardOutput(g, ptrs, 0, 1.0f, nullptr, y.data(), false);
  }
};

TEST(OutputCheck, CorrectOutputPasses) {
  TIDE_TRACED_SEED(seed);
  const TwoRankFp32Group t(seed);
  ASSERT_EQ(t.want.size(), 9u);
  const bench::OutputCheck c = t.check(t.want);
  EXPECT_EQ(c.wrong, 0);
  EXPECT_LE(c.maxRelErr, 1e-7);
}

TEST(OutputCheck, MissesAreCountedAndTheirErrorReported) {
  TIDE_TRACED_SEED(seed);
  const TwoRankFp32Group t(seed);
  std::vector<float> y = t.want;
  y[2] += 3.0f;  // off by far more than the tolerance
  y[5] = std::numeric_limits<float>::quiet_NaN();  // an unwritten or poisoned element
  const bench::OutputCheck c = t.check(y);
  EXPECT_EQ(c.wrong, 2);
  EXPECT_TRUE(std::isinf(c.maxRelErr)) << "a NaN where a number belongs is an infinite error";

  std::vector<float> offByThree = t.want;
  offByThree[2] += 3.0f;
  const bench::OutputCheck d = t.check(offByThree);
  EXPECT_EQ(d.wrong, 1);
  EXPECT_GT(d.maxRelErr, 1e-2) << "the miss's error, not only the matched elements'";
}

// Where the reference is NaN any NaN the sum wrote matches, but not the poison the output held
// before the call: an element left unwritten there passed when the poison was a plain NaN.
TEST(OutputCheck, ThePoisonNeverMatchesEvenWhereTheReferenceIsNaN) {
  TIDE_TRACED_SEED(seed);
  TwoRankFp32Group t(seed);
  t.grads[1][4] = std::numeric_limits<float>::quiet_NaN();  // rank 0 owns element 4: its reference is NaN
  std::vector<float> y = t.want;
  y[4] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(t.check(y).wrong, 0) << "a NaN the sum wrote";
  y[4] = bench::outputPoison();
  EXPECT_EQ(t.check(y).wrong, 1) << "the poison, never written";
  y[4] = std::numeric_limits<float>::quiet_NaN();
  y[0] = bench::outputPoison();  // where a number belongs: a miss of infinite error
  const bench::OutputCheck c = t.check(y);
  EXPECT_EQ(c.wrong, 1);
  EXPECT_TRUE(std::isinf(c.maxRelErr));
}

TEST(OutputCheck, ExactCheckRefusesTheLeastDifference) {
  TIDE_TRACED_SEED(seed);
  const TwoRankFp32Group t(seed, /*integers=*/true);
  EXPECT_EQ(bench::checkShardOutput(t.g, t.ptrs, 0, 1.0f, nullptr, t.want.data(), true).wrong, 0);
  std::vector<float> y = t.want;
  y[0] = std::nextafter(y[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(bench::checkShardOutput(t.g, t.ptrs, 0, 1.0f, nullptr, y.data(), true).wrong, 1);
  EXPECT_EQ(t.check(y).wrong, 0) << "within the float tolerance";
}

}  // namespace
}  // namespace tide
