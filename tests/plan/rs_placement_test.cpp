// Exhaustive placement check (paper Prop. 4.1 and App. D): for every M in
// 2..1024 and every wave width, each plan the validator accepts is
// collision-free and stale-block-free, and each plan it rejects really
// collides. Collisions and stale blocks are simulated here from scratch:
// inbox occupancy per wave (GPU j = (s - (c mod M)) mod L for every
// contributor c and sub-slice s), and per buffer generation the blocks still
// holding the data of the previous wave that used it.
#include <regex>

#include "test_util.hpp"

namespace tide_test {
namespace {

struct SimResult {
  bool collides = false;
  std::vector<int> collidingWaves;                 // wave indices with a collision
  std::vector<std::pair<int, int>> collidingPairs;  // (c1, c2) of the first collision per wave
  std::string staleError;                           // empty when the zero lists are exact
  std::string structureError;
};

// Block (j, s) of an L x L inbox as bit j * L + s (L <= 8: 64 bits).
inline uint64_t bit(int j, int s, int L) { return uint64_t{1} << (j * L + s); }

SimResult simulate(const RsPlan& plan, int M, int L, int W, int passes) {
  SimResult res;
  const int wavesPerPass = (M + W - 1) / W;
  if (static_cast<int>(plan.waves.size()) != wavesPerPass * passes) {
    res.structureError = "plan has " + std::to_string(plan.waves.size()) + " waves, want " +
                         std::to_string(wavesPerPass * passes);
    return res;
  }
  const int gens = plan.bufferGenerations;
  if (gens != (wavesPerPass * passes == 1 ? 1 : 2)) {
    res.structureError = "bufferGenerations " + std::to_string(gens);
    return res;
  }
  uint64_t held[2] = {0, 0};  // blocks holding data, per generation; a call starts from zero
  int occupant[64];
  for (int idx = 0; idx < static_cast<int>(plan.waves.size()); ++idx) {
    const RsWave& w = plan.waves[static_cast<size_t>(idx)];
    // The waves must be the paper's partition, or the check below proves
    // nothing: contributors [iW+1, min((i+1)W, M)] of every pass.
    const int i = idx % wavesPerPass;
    const int first = i * W + 1, last = std::min((i + 1) * W, M);
    bool ok = static_cast<int>(w.contributors.size()) == last - first + 1 && w.index == idx &&
              w.generation == idx % gens;
    for (int c = first; ok && c <= last; ++c) ok = w.contributors[static_cast<size_t>(c - first)] == c;
    if (!ok) {
      res.structureError = "wave " + std::to_string(idx) + " is not contributors [" +
                           std::to_string(first) + ", " + std::to_string(last) + "]";
      return res;
    }
    // Inbox occupancy of this wave.
    std::fill(occupant, occupant + L * L, 0);
    uint64_t written = 0;
    bool waveCollides = false;
    for (int c : w.contributors) {
      const int cbar = c % M;
      for (int s = 0; s < L; ++s) {
        const int j = posMod(s - cbar, L);
        int& o = occupant[j * L + s];
        if (o != 0 && !waveCollides) {
          waveCollides = true;
          res.collidingWaves.push_back(idx);
          res.collidingPairs.push_back({o, c});
        }
        o = c;
        written |= bit(j, s, L);
      }
    }
    res.collides |= waveCollides;
    // The plan's own record of what the wave writes must match.
    uint64_t planWrites = 0;
    for (const InboxBlock& b : w.writes) planWrites |= bit(b.gpu, b.block, L);
    if (planWrites != written && res.staleError.empty())
      res.staleError = "wave " + std::to_string(idx) + ": writes list differs from the simulated blocks";
    // Stale blocks: held from the previous wave on this generation and not
    // overwritten now. They, and nothing else, must be zeroed.
    const int gen = w.generation;
    const uint64_t stale = held[gen] & ~written;
    uint64_t zero = 0;
    for (const InboxBlock& b : w.zero) {
      if (b.gpu < 0 || b.gpu >= L || b.block < 0 || b.block >= L) {
        if (res.staleError.empty()) res.staleError = "wave " + std::to_string(idx) + ": zero block out of range";
        continue;
      }
      if ((zero & bit(b.gpu, b.block, L)) && res.staleError.empty())
        res.staleError = "wave " + std::to_string(idx) + ": block zeroed twice";
      zero |= bit(b.gpu, b.block, L);
    }
    if (zero != stale && res.staleError.empty()) {
      const uint64_t missing = stale & ~zero, extra = zero & ~stale;
      res.staleError = "wave " + std::to_string(idx) + ": " + std::to_string(__builtin_popcountll(missing)) +
                       " stale blocks not zeroed, " + std::to_string(__builtin_popcountll(extra)) +
                       " non-stale blocks zeroed";
    }
    held[gen] = w.clearAfterLanding ? 0 : written;
  }
  // Whatever is left would be stale data for the next call on this inbox.
  for (int gen = 0; gen < gens; ++gen)
    if (held[gen] != 0 && res.staleError.empty())
      res.staleError = "generation " + std::to_string(gen) + " still holds data at the end of the call";
  return res;
}

struct Tally {
  int64_t plans = 0, accepted = 0, rejected = 0;
  int64_t collidingMW = 0;  // (M, W) pairs that collide, counted on pass count 1 data
};

// Checks every W in 1..L and M in [minM, maxM] for one pass count.
Tally checkAll(int L, int passes, int minM, int maxM, bool checkThrow) {
  Tally t;
  for (int M = minM; M <= maxM; ++M) {
    // One element per rank keeps plan construction cheap; placement does
    // not depend on the shapes.
    const GroupLayout g = makeGroupLayout(Topology::make(M, L), {ParamSpec{{1}, DType::kBF16}}, DType::kBF16);
    for (int W = 1; W <= L; ++W) {
      SCOPED_TRACE("M=" + std::to_string(M) + " L=" + std::to_string(L) + " W=" + std::to_string(W) +
                   " passes=" + std::to_string(passes));
      RsOptions opt;
      opt.waveWidth = W;
      opt.passes = passes;
      opt.validate = false;
      const RsPlan plan = makeRsPlan(g, opt);
      const std::vector<ValidationIssue> issues = validateRsPlan(g.topo, plan);
      const SimResult sim = simulate(plan, M, L, W, passes);
      ++t.plans;
      if (!sim.structureError.empty()) {
        ADD_FAILURE() << "plan structure: " << sim.structureError;
        return t;
      }
      if (sim.collides) ++t.collidingMW;
      if (L % W == 0 && sim.collides) {
        ADD_FAILURE() << "Proposition 4.1 violated by the simulated placement (W divides L)";
        return t;
      }
      if (issues.empty()) {
        ++t.accepted;
        if (sim.collides || !sim.staleError.empty()) {
          ADD_FAILURE() << "validator accepted an unsound plan: "
                        << (sim.collides ? "wave " + std::to_string(sim.collidingWaves.front()) +
                                               " collides (contributors " +
                                               std::to_string(sim.collidingPairs.front().first) + ", " +
                                               std::to_string(sim.collidingPairs.front().second) + ")"
                                         : sim.staleError);
          return t;
        }
      } else {
        ++t.rejected;
        if (!sim.collides) {
          ADD_FAILURE() << "validator rejected a collision-free plan: " << issues.front().message
                        << (sim.staleError.empty() ? "" : " (simulation: " + sim.staleError + ")");
          return t;
        }
        // Every collision issue names a colliding wave and two contributors
        // that really land on its (GPU, block).
        bool namesCollision = false;
        for (const ValidationIssue& v : issues) {
          if (v.contributors.size() < 2) continue;
          const bool waveCollides = std::find(sim.collidingWaves.begin(), sim.collidingWaves.end(), v.wave) !=
                                    sim.collidingWaves.end();
          bool same = v.destGpu >= 0 && v.block >= 0;
          for (int c : v.contributors) same = same && posMod(v.block - c % M, L) == v.destGpu;
          if (!waveCollides || !same) {
            ADD_FAILURE() << "issue names no real collision: " << v.message;
            return t;
          }
          namesCollision = true;
        }
        if (!namesCollision) {
          ADD_FAILURE() << "rejection does not name the colliding contributors: " << issues.front().message;
          return t;
        }
      }
      // No collision => the zero lists must be exact whatever the validator says.
      if (!sim.collides && !sim.staleError.empty()) {
        ADD_FAILURE() << "stale-block bookkeeping wrong: " << sim.staleError;
        return t;
      }
      if (checkThrow && sim.collides) {
        opt.validate = true;
        if (!throwsReason([&] { makeRsPlan(g, opt); }, Reason::kPlanCollision)) {
          ADD_FAILURE() << "colliding plan not rejected with kPlanCollision when validate=true";
          return t;
        }
      }
    }
  }
  return t;
}

// Shards of the L = 8 sweep, so that ctest -j spreads them over cores
// (plan construction and validation dominate the cost, which grows with M
// and with the pass count).
struct Shard {
  int passes, minM, maxM;
};

class ExhaustiveL8 : public ::testing::TestWithParam<Shard> {};

TEST_P(ExhaustiveL8, EveryMAndWaveWidth) {
  const Shard sh = GetParam();
  const Tally t = checkAll(8, sh.passes, sh.minM, sh.maxM, /*checkThrow=*/sh.passes == 1);
  EXPECT_EQ(t.plans, int64_t{sh.maxM - sh.minM + 1} * 8);
  EXPECT_EQ(t.rejected, t.collidingMW);
  EXPECT_EQ(t.accepted + t.rejected, t.plans);
  if (sh.minM == 2 && sh.maxM == 1024) {
    // App. D: 65,472 colliding base plans over (M, W, k, me) = 1023
    // colliding (M, W) pairs x 64; the collision set does not depend on the
    // pass count.
    EXPECT_EQ(t.collidingMW, 1023);
    EXPECT_EQ(t.rejected, 1023);
    EXPECT_EQ(t.accepted, 1023 * 8 - 1023);
  }
}

INSTANTIATE_TEST_SUITE_P(Sweep, ExhaustiveL8,
                         ::testing::Values(Shard{1, 2, 1024}, Shard{2, 2, 1024}, Shard{3, 2, 724},
                                           Shard{3, 725, 1024}, Shard{4, 2, 724}, Shard{4, 725, 1024}),
                         [](const ::testing::TestParamInfo<Shard>& i) {
                           return "passes" + std::to_string(i.param.passes) + "_M" + std::to_string(i.param.minM) +
                                  "to" + std::to_string(i.param.maxM);
                         });

class ExhaustiveSmallL : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(ExhaustiveSmallL, EveryMAndWaveWidth) {
  const auto [L, passes] = GetParam();
  const Tally t = checkAll(L, passes, 2, 1024, /*checkThrow=*/passes == 1);
  EXPECT_EQ(t.plans, 1023 * L);
  EXPECT_EQ(t.rejected, t.collidingMW);
  EXPECT_EQ(t.accepted + t.rejected, t.plans);
}

INSTANTIATE_TEST_SUITE_P(Sweep, ExhaustiveSmallL,
                         ::testing::Values(std::pair{2, 1}, std::pair{2, 2}, std::pair{2, 3}, std::pair{2, 4},
                                           std::pair{4, 1}, std::pair{4, 2}, std::pair{4, 3}, std::pair{4, 4}),
                         [](const ::testing::TestParamInfo<std::pair<int, int>>& i) {
                           return "L" + std::to_string(i.param.first) + "_passes" + std::to_string(i.param.second);
                         });

// The paper's example (App. D): M = 9, L = 8, W = 3; wave 2 holds
// c in {7, 8, 9}, and 8 and 9 both have (c mod 9) mod 8 = 0.
TEST(PlacementValidator, RejectsPaperExampleM9L8W3) {
  const GroupLayout g = makeGroupLayout(Topology::make(9, 8), {ParamSpec{{72, 4}, DType::kBF16}}, DType::kBF16);
  RsOptions opt;
  opt.waveWidth = 3;
  try {
    makeRsPlan(g, opt);
    FAIL() << "M=9 L=8 W=3 accepted";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.reason(), Reason::kPlanCollision) << reasonName(e.reason());
    const std::string msg = e.what();
    EXPECT_TRUE(std::regex_search(msg, std::regex(R"(wave\D{0,3}2\b)"))) << "message must name wave 2: " << msg;
    EXPECT_TRUE(std::regex_search(msg, std::regex(R"(\b8\b)"))) << "message must name contributor 8: " << msg;
    EXPECT_TRUE(std::regex_search(msg, std::regex(R"(\b9\b)"))) << "message must name contributor 9: " << msg;
  }
  opt.validate = false;
  const RsPlan plan = makeRsPlan(g, opt);
  ASSERT_EQ(plan.waves.size(), 3u);
  EXPECT_EQ(plan.waves[2].contributors, (std::vector<int>{7, 8, 9}));
  const auto issues = validateRsPlan(g.topo, plan);
  ASSERT_FALSE(issues.empty());
  bool found = false;
  for (const ValidationIssue& v : issues) {
    EXPECT_EQ(v.wave, 2) << v.message;
    std::vector<int> c = v.contributors;
    std::sort(c.begin(), c.end());
    if (c == std::vector<int>{8, 9}) found = true;
  }
  EXPECT_TRUE(found) << "no issue names contributors 8 and 9";
}

// Default wave width L and divisors of L are always accepted (Prop. 4.1),
// for random M, L and shapes with validation on.
TEST(PlacementValidator, DivisorWidthsAlwaysAccepted) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 300; ++trial) {
    const int M = rng.irange(1, 2000), L = rng.irange(1, 8);
    std::vector<int> divisors;
    for (int w = 1; w <= L; ++w)
      if (L % w == 0) divisors.push_back(w);
    const int W = rng.coin(0.3) ? 0 : divisors[static_cast<size_t>(rng.irange(0, static_cast<int>(divisors.size()) - 1))];
    const int passes = rng.irange(1, 4);
    SCOPED_TRACE("M=" + std::to_string(M) + " L=" + std::to_string(L) + " W=" + std::to_string(W) +
                 " passes=" + std::to_string(passes));
    const GroupLayout g = makeGroupLayout(Topology::make(M, L), {ParamSpec{{rng.range(1, 5000), 3}, DType::kBF16}}, DType::kBF16);
    RsOptions opt;
    opt.waveWidth = W;
    opt.passes = passes;
    opt.mode = rng.coin() ? Mode::kInPlace : Mode::kSlotReuse;
    RsPlan plan;
    ASSERT_NO_THROW(plan = makeRsPlan(g, opt));
    EXPECT_TRUE(validateRsPlan(g.topo, plan).empty());
  }
}

// The validator is not a rubber stamp: corrupting a sound plan's zero list
// or its writes gets it rejected.
TEST(PlacementValidator, CatchesCorruptedZeroLists) {
  const GroupLayout g = makeGroupLayout(Topology::make(13, 8), {ParamSpec{{104, 4}, DType::kBF16}}, DType::kBF16);
  RsOptions opt;
  opt.waveWidth = 4;
  opt.validate = false;
  const RsPlan sound = makeRsPlan(g, opt);
  ASSERT_TRUE(validateRsPlan(g.topo, sound).empty());
  bool dropped = false, added = false;
  for (size_t w = 0; w < sound.waves.size(); ++w) {
    if (!sound.waves[w].zero.empty() && !dropped) {
      RsPlan bad = sound;
      bad.waves[w].zero.pop_back();
      EXPECT_FALSE(validateRsPlan(g.topo, bad).empty()) << "missing zero in wave " << w << " accepted";
      dropped = true;
    }
    if (!added && !sound.waves[w].writes.empty()) {
      RsPlan bad = sound;
      bad.waves[w].zero.push_back(sound.waves[w].writes.front());  // zeroes a block it writes
      EXPECT_FALSE(validateRsPlan(g.topo, bad).empty()) << "needless zero in wave " << w << " accepted";
      added = true;
    }
  }
  EXPECT_TRUE(dropped) << "M=13 W=4 should need zeroing somewhere";
  EXPECT_TRUE(added);
}

}  // namespace
}  // namespace tide_test
