// TIDE-RS plan structure (paper Sec. 4.2, 5.3, Eqs. 6-9): Latin-square
// indices, waves, buffer generations, rounds, outbox depth and sizes.
#include "test_util.hpp"

namespace tide_test {
namespace {

TEST(RsLatinSquare, IndicesMatchEquations6To8) {
  for (int M = 1; M <= 40; ++M)
    for (int L = 1; L <= 8; ++L) {
      SCOPED_TRACE("M=" + std::to_string(M) + " L=" + std::to_string(L));
      for (int m = 0; m < M; ++m)
        for (int n = 0; n < M; ++n) {
          const int c = contributorIndex(m, n, M);
          ASSERT_EQ(c, n == m ? M : posMod(m - n, M)) << "c(" << m << "," << n << ")";
          ASSERT_GE(c, 1);
          ASSERT_LE(c, M);
          // Sender n in step c targets t = (n + c) mod M.
          ASSERT_EQ((n + c) % M, m);
        }
      for (int c = 1; c <= M; ++c)
        for (int j = 0; j < L; ++j) {
          const int s = subSlice(j, c, M, L);
          ASSERT_EQ(s, (j + c % M) % L) << "Eq. 7 at j=" << j << " c=" << c;
          // Eq. 8 inverts Eq. 7: sub-slice s of contributor c lands on GPU j.
          ASSERT_EQ(landingGpu(s, c, M, L), j) << "Eq. 8 at s=" << s << " c=" << c;
          ASSERT_EQ(landingGpu(j, c, M, L), posMod(j - c % M, L));
        }
    }
}

struct Config {
  int M, L, W, q, k;
  Mode mode;
  DType grad;
  int stagingSlots;
  std::string str() const {
    return "M=" + std::to_string(M) + " L=" + std::to_string(L) + " W=" + std::to_string(W) +
           " passes=" + std::to_string(q) + " k=" + std::to_string(k) + " mode=" + modeName(mode) +
           " grad=" + dtypeName(grad) + " n_stg=" + std::to_string(stagingSlots);
  }
};

// Everything Sec. 4.2 and 5.3 say about a plan's waves and rounds, checked
// against an independent construction.
void checkPlan(const GroupLayout& g, const RsPlan& plan, const Config& cfg) {
  const int M = cfg.M, L = cfg.L;
  const int W = cfg.W == 0 ? L : cfg.W;
  EXPECT_EQ(plan.mode, cfg.mode);
  EXPECT_EQ(plan.passes, cfg.q);
  EXPECT_EQ(plan.waveWidth, W);
  EXPECT_EQ(plan.stagingSlots, cfg.stagingSlots);
  // Sub-slice geometry and block sizes (plan.hpp).
  EXPECT_GE(plan.subElems, ceilDiv(g.outElems, int64_t{L} * cfg.q));
  EXPECT_EQ(plan.stagingSpan, int64_t{L} * cfg.q * plan.subElems);
  EXPECT_EQ(plan.blockBytes, int64_t{L} * plan.subElems * 4);
  if (M == 1) {
    EXPECT_TRUE(plan.waves.empty());
    EXPECT_EQ(plan.networkRounds, 0);
    return;
  }
  EXPECT_EQ(plan.stagingSlotBytes, int64_t{L - 1} * L * plan.subElems * refItemSize(cfg.grad));

  // Round width: the requested k, never above M-1; the solver's otherwise.
  const int k = plan.roundWidth;
  ASSERT_GE(k, 1);
  EXPECT_LE(k, M - 1);
  if (cfg.k > 0) {
    EXPECT_EQ(k, std::min(cfg.k, M - 1));
  } else {
    EXPECT_LE(k, Calibration{}.maxRoundWidth);
  }

  // Waves: contributors 1..M in increasing order, chunks of W per pass.
  const int wavesPerPass = static_cast<int>(ceilDiv(M, W));
  EXPECT_EQ(plan.wavesPerPass, wavesPerPass);
  ASSERT_EQ(static_cast<int>(plan.waves.size()), wavesPerPass * cfg.q);
  const int total = wavesPerPass * cfg.q;
  EXPECT_EQ(plan.bufferGenerations, total == 1 ? 1 : 2);
  std::vector<int> roundSizes;  // k_i over the whole call, in order
  int myRounds = 0;
  for (int idx = 0; idx < total; ++idx) {
    const RsWave& w = plan.waves[static_cast<size_t>(idx)];
    SCOPED_TRACE("wave " + std::to_string(idx));
    const int pass = idx / wavesPerPass, inPass = idx % wavesPerPass;
    EXPECT_EQ(w.index, idx);
    EXPECT_EQ(w.pass, pass);
    EXPECT_EQ(w.generation, idx % plan.bufferGenerations);
    std::vector<int> want;
    for (int c = inPass * W + 1; c <= std::min((inPass + 1) * W, M); ++c) want.push_back(c);
    EXPECT_EQ(w.contributors, want);
    EXPECT_LE(static_cast<int>(w.contributors.size()), W);
    const bool lastOfPass = inPass == wavesPerPass - 1;
    EXPECT_EQ(w.hasOwnNode, lastOfPass);
    for (size_t i = 0; i < w.contributors.size(); ++i)
      if (w.contributors[i] == M) {
        EXPECT_TRUE(lastOfPass && i + 1 == w.contributors.size());
      }
    // Rounds: the wave's remote contributors in order, at most k each,
    // never crossing into another wave, as few as the width allows.
    std::vector<int> remote, inRounds;
    for (int c : want)
      if (c < M) remote.push_back(c);
    for (const RsRound& r : w.rounds) {
      EXPECT_GE(r.contributors.size(), 1u);
      EXPECT_LE(static_cast<int>(r.contributors.size()), k);
      roundSizes.push_back(static_cast<int>(r.contributors.size()));
      inRounds.insert(inRounds.end(), r.contributors.begin(), r.contributors.end());
    }
    EXPECT_EQ(inRounds, remote) << "rounds must carry exactly the wave's remote contributors, in order";
    EXPECT_EQ(static_cast<int>(w.rounds.size()), static_cast<int>(ceilDiv(static_cast<int64_t>(remote.size()), k)));
    myRounds += static_cast<int>(ceilDiv(static_cast<int64_t>(remote.size()), k));
  }
  EXPECT_EQ(plan.networkRounds, static_cast<int>(roundSizes.size()));
  EXPECT_EQ(plan.networkRounds, myRounds);
  EXPECT_EQ(countNetworkRounds(M, W, k) * cfg.q, myRounds);

  // Outbox depth (Sec. 5.3): In-Place keeps a full outbox, Slot-Reuse
  // covers two consecutive rounds (Eq. 9), never more than In-Place's.
  if (cfg.mode == Mode::kInPlace) {
    EXPECT_EQ(plan.outboxBlocks, M - 1);
  } else {
    int depth = 0;
    for (size_t i = 0; i < roundSizes.size(); ++i)
      depth = std::max(depth, roundSizes[i] + (i > 0 ? roundSizes[i - 1] : 0));
    EXPECT_EQ(plan.outboxBlocks, std::min(depth, M - 1));
    EXPECT_LE(plan.outboxBlocks, 2 * k);
    // Every round's blocks fit the outbox at once.
    for (const int size : roundSizes) EXPECT_LE(size, plan.outboxBlocks);
  }

  // Area_RS (Eq. 10 in bytes): staging slots, inbox generations of L blocks,
  // two outbox banks, and per bank one own-node spare, two when there are
  // several passes (they rotate), however many passes there are.
  const int64_t fixed = int64_t{cfg.stagingSlots} * plan.stagingSlotBytes +
                        int64_t{plan.bufferGenerations} * L * plan.blockBytes +
                        2 * int64_t{plan.outboxBlocks} * plan.blockBytes;
  const int spares = M == 1 ? 0 : (cfg.q == 1 ? 1 : 2);
  EXPECT_EQ(plan.spareBlocks, spares);
  EXPECT_EQ(plan.stagingBytes, fixed + 2 * int64_t{spares} * plan.blockBytes)
      << "stagingBytes " << plan.stagingBytes << ", without spares " << fixed;
}

TEST(RsPlanStructure, RandomConfigurations) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 400; ++trial) {
    Config cfg;
    cfg.M = rng.coin(0.7) ? rng.irange(1, 40) : rng.irange(41, 700);
    cfg.L = rng.irange(1, 8);
    cfg.W = rng.coin(0.2) ? 0 : rng.irange(1, cfg.L);
    cfg.q = rng.irange(1, 4);
    cfg.k = rng.coin(0.3) ? 0 : rng.irange(1, 9);
    cfg.mode = rng.coin() ? Mode::kInPlace : Mode::kSlotReuse;
    cfg.grad = rng.coin() ? DType::kBF16 : DType::kFP32;
    cfg.stagingSlots = rng.irange(1, 4);
    const int N = cfg.M * cfg.L;
    auto specs = randomSpecs(rng, rng.irange(1, 6), N, 3, 16, 3, DType::kBF16);
    SCOPED_TRACE("trial " + std::to_string(trial) + " " + cfg.str() + " shapes " + shapesToString(specs));
    const GroupLayout g = makeGroupLayout(Topology::make(cfg.M, cfg.L), specs, cfg.grad);
    RsOptions opt;
    opt.mode = cfg.mode;
    opt.waveWidth = cfg.W;
    opt.roundWidth = cfg.k;
    opt.passes = cfg.q;
    opt.stagingSlots = cfg.stagingSlots;
    opt.validate = false;
    if (rng.coin(0.3)) {
      opt.sumCtas = rng.irange(1, 32);
      opt.landingCtas = rng.irange(1, 8);
    }
    const RsPlan plan = makeRsPlan(g, opt);
    checkPlan(g, plan, cfg);
    if (opt.sumCtas > 0) {
      EXPECT_EQ(plan.sumCtas, opt.sumCtas);
      if (cfg.M > 1) {
        EXPECT_EQ(plan.landingCtas, opt.landingCtas);
      }
    } else {
      EXPECT_GE(plan.sumCtas, 1);
      if (cfg.M > 1) {
        EXPECT_GE(plan.landingCtas, 1);
      }
    }
    if (HasFatalFailure()) return;
  }
}

// The cases the paper names: one wave -> one generation; 8 nodes of 8 with
// k = 4 -> rounds {1..4}, {5..7}; Slot-Reuse depth 4 + 3 = 7 <= 2k.
TEST(RsPlanStructure, PaperExamples) {
  {
    const GroupLayout g = makeGroupLayout(Topology::make(8, 8), {ParamSpec{{4096, 64}, DType::kBF16}}, DType::kBF16);
    RsOptions opt;
    opt.mode = Mode::kSlotReuse;
    opt.roundWidth = 4;
    const RsPlan plan = makeRsPlan(g, opt);
    ASSERT_EQ(plan.waves.size(), 1u);
    EXPECT_EQ(plan.bufferGenerations, 1);
    ASSERT_EQ(plan.waves[0].rounds.size(), 2u);
    EXPECT_EQ(plan.waves[0].rounds[0].contributors, (std::vector<int>{1, 2, 3, 4}));
    EXPECT_EQ(plan.waves[0].rounds[1].contributors, (std::vector<int>{5, 6, 7}));
    EXPECT_EQ(plan.outboxBlocks, 7);
    opt.mode = Mode::kInPlace;
    EXPECT_EQ(makeRsPlan(g, opt).outboxBlocks, 7);
  }
  {
    const GroupLayout g = makeGroupLayout(Topology::make(8, 8), {ParamSpec{{4096, 64}, DType::kBF16}}, DType::kBF16);
    RsOptions opt;
    opt.passes = 2;
    const RsPlan plan = makeRsPlan(g, opt);
    EXPECT_EQ(plan.waves.size(), 2u);
    EXPECT_EQ(plan.bufferGenerations, 2) << "two waves in total (two passes) need two generations";
  }
  {
    const GroupLayout g = makeGroupLayout(Topology::make(64, 8), {ParamSpec{{4096, 64}, DType::kBF16}}, DType::kBF16);
    RsOptions opt;
    opt.mode = Mode::kSlotReuse;
    opt.roundWidth = 4;
    const RsPlan plan = makeRsPlan(g, opt);
    EXPECT_EQ(plan.wavesPerPass, 8);
    EXPECT_EQ(plan.bufferGenerations, 2);
    EXPECT_EQ(plan.outboxBlocks, 8) << "rounds of 4,4 within every full wave";
  }
}

TEST(RsPlanStructure, RejectsBadOptions) {
  const GroupLayout g = makeGroupLayout(Topology::make(4, 4), {ParamSpec{{64, 8}, DType::kBF16}}, DType::kBF16);
  auto with = [&](auto edit) {
    RsOptions o;
    edit(o);
    return [&g, o] { makeRsPlan(g, o); };
  };
  EXPECT_TRUE(throwsReason(with([](RsOptions& o) { o.passes = 0; }), Reason::kBadOption));
  EXPECT_TRUE(throwsReason(with([](RsOptions& o) { o.waveWidth = -1; }), Reason::kBadOption));
  EXPECT_TRUE(throwsReason(with([](RsOptions& o) { o.roundWidth = -2; }), Reason::kBadOption));
  EXPECT_TRUE(throwsReason(with([](RsOptions& o) { o.stagingSlots = 0; }), Reason::kBadOption));
  // More contributors per wave than GPUs must collide: never a silent plan.
  try {
    RsOptions o;
    o.waveWidth = 5;
    makeRsPlan(g, o);
    ADD_FAILURE() << "wave width 5 > L = 4 accepted";
  } catch (const PlanError& e) {
    EXPECT_TRUE(e.reason() == Reason::kBadOption || e.reason() == Reason::kPlanCollision) << reasonName(e.reason());
  }
}

// One rank's output stays below 2^40 elements, yet an In-Place outbox holds
// M-1 blocks of it: at L = 1 and 2^20 nodes, 2 (M-1) x 4 TiB passes 2^63.
// That is refused as too_large, not wrapped into a negative staging size;
// half the nodes still fit.
TEST(RsPlanStructure, RefusesStagingPastInt64) {
  const std::vector<ParamSpec> specs{ParamSpec{{1, int64_t{1} << 40}, DType::kBF16}};
  RsOptions opt;
  opt.validate = false;  // the sizes are the point, not the 2^20 waves
  const GroupLayout huge = makeGroupLayout(Topology::make(1 << 20, 1), specs, DType::kBF16);
  EXPECT_TRUE(throwsReason([&] { makeRsPlan(huge, opt); }, Reason::kTooLarge));
  const GroupLayout half = makeGroupLayout(Topology::make(1 << 19, 1), specs, DType::kBF16);
  const RsPlan plan = makeRsPlan(half, opt);
  EXPECT_EQ(plan.blockBytes, int64_t{4} << 40);
  EXPECT_EQ(plan.stagingBytes, (2 * int64_t{(1 << 19) - 1} + 2 + 2) * plan.blockBytes);
}

// 2^17 nodes at 64 passes would be 2^23 waves, some 2 GiB of plan built
// before anything refused it (2^20 nodes: 16 GiB). Refused as too_large up
// front, with what to change; at 2 passes (2^18 waves) the plan is built.
TEST(RsPlanStructure, RefusesMoreWavesThanAPlanHolds) {
  const GroupLayout g = makeGroupLayout(Topology::make(1 << 17, 2), {ParamSpec{{4}, DType::kBF16}}, DType::kBF16);
  RsOptions opt;
  opt.validate = false;
  opt.passes = 64;
  opt.waveWidth = 1;
  try {
    makeRsPlan(g, opt);
    ADD_FAILURE() << "2^23 waves accepted";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.reason(), Reason::kTooLarge);
    EXPECT_NE(std::string(e.what()).find("8388608 reduce-scatter waves"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fewer passes or a wider wave (at most L = 2)"), std::string::npos)
        << e.what();
  }
  opt.passes = 2;  // 2^18 waves: built
  EXPECT_EQ(makeRsPlan(g, opt).waves.size(), size_t{1} << 18);
}

// The refusal suggests only what would help: at the widest wave (W = L), fewer passes alone.
// (Ranks are at most 2^20, so one pass never reaches 2^22 waves.)
TEST(RsPlanStructure, TooManyWavesSuggestsOnlyWhatHelps) {
  const GroupLayout g = makeGroupLayout(Topology::make(1 << 19, 2), {ParamSpec{{4}, DType::kBF16}}, DType::kBF16);
  RsOptions opt;
  opt.validate = false;
  opt.passes = 64;  // 2^18 waves per pass at W = L = 2
  try {
    makeRsPlan(g, opt);
    ADD_FAILURE() << "2^24 waves accepted";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.reason(), Reason::kTooLarge);
    const std::string what = e.what();
    EXPECT_NE(what.find(": fewer passes"), std::string::npos) << what;
    EXPECT_EQ(what.find("wider wave"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tide_test
