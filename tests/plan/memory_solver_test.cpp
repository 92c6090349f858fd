// Memory model (paper Sec. 5.4, Eqs. 10-12) and sizing solver (App. G,
// Eqs. 13-14 and the k-doubling rule), against the paper's numbers and an
// independent transcription of its equations.
#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>
#include <utility>

#include "test_util.hpp"

namespace tide_test {
namespace {

// ---------------------------------------------------------------- memory

TEST(MemoryModel, ReproducesPaperNumbersAtM64) {
  const MemoryModel in = memoryModel(64, 8, /*generations*/ 2, /*k*/ 4, /*stagingSlots*/ 2, Mode::kInPlace);
  const MemoryModel sr = memoryModel(64, 8, 2, 4, 2, Mode::kSlotReuse);
  for (const MemoryModel* mm : {&in, &sr}) {
    EXPECT_NEAR(mm->rsAreaInPlace, 0.594, 5e-4);    // Eq. 11: 0.594 NS
    EXPECT_NEAR(mm->rsAreaSlotReuse, 0.164, 5e-4);  // Eq. 12: 0.164 NS
    EXPECT_NEAR(mm->tideLiveInPlace, 3.72, 5e-3);   // Sec. 5.4: 3.72 NS
    EXPECT_NEAR(mm->tideLiveSlotReuse, 2.29, 5e-3); // Sec. 5.4: 2.29 NS
    EXPECT_EQ(mm->fsdp2Live, 4.0);                  // FSDP2: 4 NS
  }
  // Exact values of the closed forms.
  EXPECT_NEAR(in.rsAreaInPlace, 0.5 + 6.0 / 64, 1e-12);
  EXPECT_NEAR(in.rsAreaSlotReuse, 21.0 / 128, 1e-12);
  EXPECT_NEAR(in.rsAreaBound, in.rsAreaInPlace, 1e-12);
  EXPECT_NEAR(sr.rsAreaBound, sr.rsAreaSlotReuse, 1e-12);
  EXPECT_NEAR(in.tideLive, in.tideLiveInPlace, 1e-12);
  EXPECT_NEAR(sr.tideLive, sr.tideLiveSlotReuse, 1e-12);
  EXPECT_LT(in.tideLive, in.fsdp2Live);
  EXPECT_LT(sr.tideLive, in.tideLive);
}

TEST(MemoryModel, InPlaceTendsToHalfNS) {
  const MemoryModel big = memoryModel(1 << 20, 8, 2, 4, 2, Mode::kInPlace);
  EXPECT_NEAR(big.rsAreaInPlace, 0.5, 1e-3);
  EXPECT_GE(big.rsAreaInPlace, 0.5);
  EXPECT_NEAR(big.rsAreaSlotReuse, 0.0, 1e-3);  // Slot-Reuse decays as O(k/M)
  double prev = 1e9;
  for (int M = 2; M <= 4096; M *= 2) {
    const double a = memoryModel(M, 8, 2, 4, 2, Mode::kInPlace).rsAreaInPlace;
    EXPECT_LT(a, prev) << "In-Place bound must fall with M, M=" << M;
    EXPECT_GT(a, 0.5);
    prev = a;
  }
}

// Eq. 10 in NS units at L = 8 (S_fp32 = 2S, NS = 8 M S): Area <=
// (4 n_stg + 8 n_par + 2 n_out + 2) S_fp32 with n_out = M-1 (In-Place) or
// 2k (Slot-Reuse); live bytes: ring slots and stage (2 + 1/L) NS + Area,
// plus NS of bf16 gradients for In-Place.
TEST(MemoryModel, MatchesEquation10ForRandomInputs) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 500; ++trial) {
    const int M = rng.irange(2, 5000), npar = rng.irange(1, 2), k = rng.irange(1, 8), nstg = rng.irange(1, 4);
    SCOPED_TRACE("M=" + std::to_string(M) + " n_par=" + std::to_string(npar) + " k=" + std::to_string(k) +
                 " n_stg=" + std::to_string(nstg));
    const double sfp32 = 2.0 / (8.0 * M);
    const double in = (4.0 * nstg + 8.0 * npar + 2.0 * (M - 1) + 2.0) * sfp32;
    // Slot-Reuse's outbox: two rounds of k blocks, never more than In-Place's M - 1.
    const double sr = (4.0 * nstg + 8.0 * npar + 2.0 * std::min(2 * k, M - 1) + 2.0) * sfp32;
    for (Mode mode : {Mode::kInPlace, Mode::kSlotReuse}) {
      const MemoryModel mm = memoryModel(M, 8, npar, k, nstg, mode);
      EXPECT_NEAR(mm.rsAreaInPlace, in, 1e-9);
      EXPECT_NEAR(mm.rsAreaSlotReuse, sr, 1e-9);
      EXPECT_NEAR(mm.tideLiveInPlace, 2.125 + in + 1.0, 1e-9);
      EXPECT_NEAR(mm.tideLiveSlotReuse, 2.125 + sr, 1e-9);
      EXPECT_NEAR(mm.rsAreaBound, mode == Mode::kInPlace ? in : sr, 1e-9);
      EXPECT_NEAR(mm.tideLive, mode == Mode::kInPlace ? 3.125 + in : 2.125 + sr, 1e-9);
      EXPECT_EQ(mm.fsdp2Live, 4.0);
      if (nstg == 2 && 2 * k <= M - 1) {
        // Eqs. 11 and 12 in closed form (Eq. 12 as the paper has it, for an outbox of 2k blocks).
        EXPECT_NEAR(mm.rsAreaInPlace, 0.5 + (2.0 * npar + 2.0) / M, 1e-9);
        EXPECT_NEAR(mm.rsAreaSlotReuse, (2.0 * k + 4.0 * npar + 5.0) / (2.0 * M), 1e-9);
      }
    }
  }
}

// An fp32 group's NS is twice a bf16 group's: its S_fp32 is S, so every
// fp32 term (staging area, FSDP2's reduce-scatter input) halves in NS units,
// while the ring slots, which hold the group itself, stay 2 NS. The model once
// counted an fp32 group's terms as a bf16 group's (its bound twice too high).
TEST(MemoryModel, Fp32GroupsCountInTheirOwnNS) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 200; ++trial) {
    const int M = rng.irange(1, 200), L = rng.irange(1, 8), npar = rng.irange(1, 2), k = rng.irange(1, 8);
    const int nstg = rng.irange(1, 4), grad = rng.coin() ? 2 : 4;
    const Mode mode = rng.coin() ? Mode::kInPlace : Mode::kSlotReuse;
    const Landing landing = rng.coin() ? Landing::kPush : Landing::kPull;
    SCOPED_TRACE("M=" + std::to_string(M) + " L=" + std::to_string(L) + " grad=" + std::to_string(grad));
    const MemoryModel bf = memoryModel(M, L, npar, k, nstg, mode, grad, landing, 2);
    const MemoryModel fp = memoryModel(M, L, npar, k, nstg, mode, grad, landing, 4);
    const double ring = 2.0 + (M > 1 ? 1.0 / L : 0.0);
    EXPECT_NEAR(fp.rsAreaInPlace, bf.rsAreaInPlace / 2.0, 1e-12);
    EXPECT_NEAR(fp.rsAreaSlotReuse, bf.rsAreaSlotReuse / 2.0, 1e-12);
    EXPECT_NEAR(fp.rsAreaBound, bf.rsAreaBound / 2.0, 1e-12);
    EXPECT_NEAR(fp.tideLiveSlotReuse, ring + fp.rsAreaSlotReuse, 1e-12);
    EXPECT_NEAR(fp.tideLiveInPlace, ring + fp.rsAreaInPlace + grad / 4.0, 1e-12);
    EXPECT_NEAR(bf.tideLiveInPlace, ring + bf.rsAreaInPlace + grad / 2.0, 1e-12);
    EXPECT_EQ(bf.fsdp2Live, 4.0);
    EXPECT_EQ(fp.fsdp2Live, 3.0);
  }
}

// ---------------------------------------------------------------- solver

int refRounds(int M, int W, int k) {
  int rounds = 0;
  for (int first = 1; first <= M; first += W) {
    int remote = 0;
    for (int c = first; c < first + W && c <= M; ++c) remote += c < M;
    rounds += (remote + k - 1) / k;
  }
  return rounds;
}

TEST(Solver, PaperCalibrationPicksK4And4Plus4Ctas) {
  const Calibration cal;  // the paper's calibration is the default
  EXPECT_DOUBLE_EQ(cal.nicBw, 47.5e9);
  EXPECT_DOUBLE_EQ(cal.sumBwPerCta, 99e9);
  EXPECT_DOUBLE_EQ(cal.landBwPerCta, 21e9);
  EXPECT_DOUBLE_EQ(cal.landCap, 90e9);
  EXPECT_DOUBLE_EQ(cal.roundWait, 1.3e-3);
  const SolverResult r = solveSizing(Topology::make(8, 8), 2, int64_t{32} << 20, 8, 1, cal);
  EXPECT_EQ(r.roundWidth, 4);
  EXPECT_EQ(r.sumCtas, 4);
  EXPECT_EQ(r.landingCtas, 4);
  EXPECT_NEAR(r.nicSeconds, 7.0 * (32 << 20) / 47.5e9, 1e-12);
  // And through the whole plan (makeRsPlan takes the solver's choices).
  // D K / N = 8 Mi fp32 elements = 32 MiB of output per rank.
  std::vector<ParamSpec> specs{ParamSpec{{int64_t{128} * 1024 * 1024, 4}, DType::kBF16}};
  const GroupLayout g = makeGroupLayout(Topology::make(8, 8), specs, DType::kBF16);
  ASSERT_EQ(g.outBytes(), int64_t{32} << 20);
  const RsPlan plan = makeRsPlan(g);
  EXPECT_EQ(plan.roundWidth, 4);
  EXPECT_EQ(plan.sumCtas, 4);
  EXPECT_EQ(plan.landingCtas, 4);
}

// Eq. 13, Eq. 14 and the k rule written out again for random calibrations:
// C_sum = ceil(skew (L b / 4 + 1) NIC / sum);
// C_mc = min(floor(cap / land), ceil((S_fp32 / n_part) / (tail t_NIC land)));
// k from min(2, M-1), doubling to k_max = 4 while N_rounds t_rnd > 0.1 t_NIC
// and doubling lowers N_rounds.
TEST(Solver, MatchesEquations13And14) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 2000; ++trial) {
    Calibration cal;
    cal.nicBw = rng.real(5e9, 100e9);
    cal.sumBwPerCta = rng.real(10e9, 200e9);
    cal.landBwPerCta = rng.real(5e9, 40e9);
    cal.landCap = rng.real(cal.landBwPerCta * 1.01, 200e9);
    cal.roundWait = rng.real(1e-5, 3e-3);
    cal.skew = rng.real(1.0, 2.0);
    cal.tail = rng.real(0.01, 0.2);
    const int M = rng.irange(5, 200), L = rng.irange(1, 8), W = rng.irange(1, L);
    const int b = rng.coin() ? 2 : 4;
    const int passes = rng.irange(1, 4);
    const int64_t out = rng.range(1 << 12, int64_t{1} << 30);
    SCOPED_TRACE("M=" + std::to_string(M) + " L=" + std::to_string(L) + " W=" + std::to_string(W) + " b=" +
                 std::to_string(b) + " passes=" + std::to_string(passes) + " out=" + std::to_string(out));
    const SolverResult r = solveSizing(Topology::make(M, L), b, out, W, passes, cal);
    const double tNic = (M - 1) * static_cast<double>(out) / cal.nicBw;
    const double sum = cal.skew * (L * b / 4.0 + 1.0) * cal.nicBw / cal.sumBwPerCta;
    const double tail = (static_cast<double>(out) / passes) / (cal.tail * tNic * cal.landBwPerCta);
    // Skip draws within rounding distance of an integer boundary.
    if (std::abs(sum - std::round(sum)) < 1e-6 || std::abs(tail - std::round(tail)) < 1e-6) continue;
    EXPECT_NEAR(r.nicSeconds, tNic, 1e-9 * tNic);
    EXPECT_EQ(r.sumCtas, std::max(1, static_cast<int>(std::ceil(sum))));
    const int cap = static_cast<int>(std::floor(cal.landCap / cal.landBwPerCta));
    EXPECT_EQ(r.landingCtas, std::min(cap, static_cast<int>(std::ceil(tail))));
    EXPECT_GE(r.roundWidth, 1);
    EXPECT_LE(r.roundWidth, cal.maxRoundWidth);
    EXPECT_LE(r.roundWidth, M - 1);
    if (passes == 1) {
      int k = 2;
      while (k < 4) {
        const int now = refRounds(M, W, k), next = refRounds(M, W, 2 * k);
        if (now * cal.roundWait > 0.10 * tNic && next < now) k *= 2;
        else break;
      }
      EXPECT_EQ(r.roundWidth, k);
    }
    EXPECT_EQ(countNetworkRounds(M, W, r.roundWidth), refRounds(M, W, r.roundWidth));
  }
}

// One node: the sum keeps pace with the copy-engine pushes, which carry
// (L-1) gradient items per output element while the sum moves L items in and
// 4 bytes out: C_sum = ceil(skew (L b + 4) / ((L - 1) b) fabric / sum).
TEST(Solver, OneNodeSumKeepsPaceWithThePushes) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 2000; ++trial) {
    Calibration cal;
    cal.fabricBw = rng.real(50e9, 900e9);
    cal.sumBwPerCta = rng.real(10e9, 200e9);
    cal.skew = rng.real(1.0, 2.0);
    const int L = rng.irange(2, 8);
    const int b = rng.coin() ? 2 : 4;
    const double sum = cal.skew * (L * b + 4.0) / ((L - 1.0) * b) * cal.fabricBw / cal.sumBwPerCta;
    if (std::abs(sum - std::round(sum)) < 1e-6) continue;
    const SolverResult r = solveSizing(Topology::make(1, L), b, int64_t{1} << 26, 1, 1, cal);
    EXPECT_EQ(r.sumCtas, std::max(1, static_cast<int>(std::ceil(sum)))) << "L=" << L << " b=" << b;
    EXPECT_EQ(r.landingCtas, 0);
  }
  // The two-H200 calibration (tide.bench.calibration): bf16 pushes at 390 GB/s, 50 GB/s per
  // CTA: 4 bytes of sum traffic per pushed byte, 31.2 CTAs, 47 with the default skew.
  Calibration h200;
  h200.fabricBw = 390e9;
  h200.sumBwPerCta = 50e9;
  EXPECT_EQ(solveSizing(Topology::make(1, 2), 2, int64_t{1} << 26, 1, 4, h200).sumCtas, 47);
}

TEST(Solver, RoundWidthBounds) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 2000; ++trial) {
    Calibration cal;
    cal.maxRoundWidth = rng.irange(1, 8);
    cal.roundWait = rng.real(0, 5e-3);
    cal.nicBw = rng.real(1e9, 100e9);
    const int M = rng.irange(2, 300), L = rng.irange(1, 8), W = rng.irange(1, L);
    const int64_t out = rng.range(64, int64_t{1} << 30);
    SCOPED_TRACE("M=" + std::to_string(M) + " L=" + std::to_string(L) + " W=" + std::to_string(W) +
                 " kmax=" + std::to_string(cal.maxRoundWidth) + " out=" + std::to_string(out));
    const SolverResult r = solveSizing(Topology::make(M, L), 2, out, W, rng.irange(1, 4), cal);
    EXPECT_GE(r.roundWidth, 1);
    EXPECT_LE(r.roundWidth, std::max(1, cal.maxRoundWidth)) << "k exceeds k_max";
    EXPECT_LE(r.roundWidth, M - 1) << "k exceeds M-1";
    EXPECT_GE(r.sumCtas, 1);
    EXPECT_GE(r.landingCtas, 1);
  }
  for (int M = 2; M <= 64; ++M)
    for (int W = 1; W <= 8; ++W)
      for (int k = 1; k <= 8; ++k) ASSERT_EQ(countNetworkRounds(M, W, k), refRounds(M, W, k)) << M << " " << W << " " << k;
}

TEST(Solver, RejectsNonPositiveRates) {
  const Topology t = Topology::make(8, 8);
  std::vector<std::function<void(Calibration&)>> edits{
      [](Calibration& c) { c.nicBw = 0; },        [](Calibration& c) { c.nicBw = -47.5e9; },
      [](Calibration& c) { c.sumBwPerCta = 0; },  [](Calibration& c) { c.sumBwPerCta = -1; },
      [](Calibration& c) { c.landBwPerCta = 0; }, [](Calibration& c) { c.landBwPerCta = -21e9; },
      [](Calibration& c) { c.landCap = 0; },      [](Calibration& c) { c.landCap = -90e9; },
      [](Calibration& c) { c.nicBw = std::nan(""); }};
  for (size_t i = 0; i < edits.size(); ++i) {
    SCOPED_TRACE("edit " + std::to_string(i));
    Calibration cal;
    edits[i](cal);
    EXPECT_TRUE(throwsReason([&] { cal.validate(); }, Reason::kBadCalibration));
    EXPECT_TRUE(throwsReason([&] { solveSizing(t, 2, 32 << 20, 8, 1, cal); }, Reason::kBadCalibration));
    RsOptions opt;
    opt.calibration = cal;
    const GroupLayout g = makeGroupLayout(t, {ParamSpec{{64, 8}, DType::kBF16}}, DType::kBF16);
    EXPECT_TRUE(throwsReason([&] { makeRsPlan(g, opt); }, Reason::kBadCalibration));
  }
  EXPECT_NO_THROW(Calibration{}.validate());
}

// Each refusal names the field and its value as the key gives it (one message for every field once said "calibration
// rates must be positive (nic, sum, landing, ceiling)", whichever was wrong, or even fabricBw).
TEST(Solver, ARefusedCalibrationNamesItsField) {
  const std::vector<std::pair<std::function<void(Calibration&)>, std::string>> edits{
      {[](Calibration& c) { c.nicBw = 0; }, "calibration nicBw (nic_gbps) must be positive and finite, got 0"},
      {[](Calibration& c) { c.fabricBw = std::nan(""); }, "calibration fabricBw (fabric_gbps) must be positive"},
      {[](Calibration& c) { c.sumBwPerCta = -1; }, "calibration sumBwPerCta (sum_gbps_per_cta) must be positive"},
      {[](Calibration& c) { c.landBwPerCta = 0; }, "calibration landBwPerCta (land_gbps_per_cta) must be positive"},
      {[](Calibration& c) { c.landCap = HUGE_VAL; }, "calibration landCap (land_cap_gbps) must be positive and finite"},
      {[](Calibration& c) { c.roundWait = -1e-3; }, "calibration roundWait (round_wait_ms) must be finite and >= 0"},
      {[](Calibration& c) { c.maxRoundWidth = 0; }, "calibration maxRoundWidth must be >= 1, got 0"},
      // In the key's unit first, readable however small (std::to_string once printed "-0.000000").
      {[](Calibration& c) { c.nicBw = -5e9; }, "nicBw (nic_gbps) must be positive and finite, got -5 GB/s (-5e+09 B/s)"},
      {[](Calibration& c) { c.roundWait = -1e-9; }, "must be finite and >= 0, got -1e-06 ms (-1e-09 s)"},
      {[](Calibration& c) { c.skew = -0.25; }, "calibration skew must be positive and finite, got -0.25"}};
  for (const auto& [edit, want] : edits) {
    Calibration cal;
    edit(cal);
    try {
      cal.validate();
      ADD_FAILURE() << "accepted: " << want;
    } catch (const PlanError& e) {
      EXPECT_EQ(e.reason(), Reason::kBadCalibration);
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

// CTA budgets: 0 is the solver's, 1..kMaxCtaBudget the caller's; anything else is refused naming the budget.
TEST(Solver, CtaBudgetsOutsideTheirRangeAreRefusedByName) {
  const GroupLayout g = makeGroupLayout(Topology::make(2, 8), {ParamSpec{{64, 8}, DType::kBF16}}, DType::kBF16);
  for (const auto& [sum, land, want] :
       std::vector<std::tuple<int, int, std::string>>{{-1, 0, "sum CTAs must be in 1..1024 (0: the solver's), got -1"},
                                                      {kMaxCtaBudget + 1, 0, "sum CTAs must be in 1..1024"},
                                                      {0, -3, "landing CTAs must be in 1..1024 (0: the solver's), got -3"},
                                                      {4, 1 << 30, "landing CTAs must be in 1..1024"}}) {
    RsOptions opt;
    opt.sumCtas = sum;
    opt.landingCtas = land;
    try {
      makeRsPlan(g, opt);
      ADD_FAILURE() << "accepted: " << want;
    } catch (const PlanError& e) {
      EXPECT_EQ(e.reason(), Reason::kBadOption);
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
  RsOptions most;
  most.sumCtas = most.landingCtas = kMaxCtaBudget;
  const RsPlan plan = makeRsPlan(g, most);
  EXPECT_EQ(plan.sumCtas, kMaxCtaBudget);
  EXPECT_EQ(plan.landingCtas, kMaxCtaBudget);
}

// Rates that are positive and finite but tiny: refused with a message a person can read, never an
// infinite wire time (the plan's JSON can only write it as null) or a CTA count in hundreds of digits.
TEST(Solver, RefusesTinyRatesReadably) {
  const Topology t = Topology::make(1000, 8);
  Calibration nic;
  nic.nicBw = 5e-324;  // a denormal: the wire time of any byte is infinite
  try {
    solveSizing(t, 2, int64_t{1} << 30, 8, 1, nic);
    FAIL() << "a wire time of infinity was planned";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.reason(), Reason::kBadCalibration);
    EXPECT_NE(std::string(e.what()).find("infinite"), std::string::npos) << e.what();
  }
  Calibration sum;
  sum.sumBwPerCta = 1e-3;  // 1 mB/s per CTA: about 3.6e+14 CTAs
  try {
    solveSizing(t, 2, int64_t{1} << 30, 8, 1, sum);
    FAIL() << "a sum CTA count past INT_MAX was planned";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.reason(), Reason::kBadCalibration);
    EXPECT_LT(std::string(e.what()).size(), 200u) << e.what();
    EXPECT_NE(std::string(e.what()).find("e+"), std::string::npos) << e.what();
  }
}

// A solved CTA budget obeys the caller's limit too (kMaxCtaBudget): rates per CTA a thousand times too
// high on the fabric side (B/s where GB/s was meant, say) would ask for hundreds of thousands.
TEST(Solver, SolvedBudgetsPastTheCallersLimitAreRefused) {
  const Topology t = Topology::make(2, 8);
  Calibration sum;
  sum.nicBw *= 1e4;  // the rail's rate, not the sum's, in the wrong unit
  try {
    const SolverResult r = solveSizing(t, 2, int64_t{1} << 20, 8, 1, sum);
    ADD_FAILURE() << "planned " << r.sumCtas << " sum CTAs";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.reason(), Reason::kBadCalibration);
    EXPECT_NE(std::string(e.what()).find("sum CTAs, more than a CTA budget holds (1024)"), std::string::npos)
        << e.what();
  }
  Calibration land;
  land.landCap *= 1e4;
  land.tail = 1e-9;  // a tail bound far below the wire time: as many landing CTAs as the cap allows
  try {
    const SolverResult r = solveSizing(t, 2, int64_t{1} << 20, 8, 1, land);
    ADD_FAILURE() << "planned " << r.landingCtas << " landing CTAs";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.reason(), Reason::kBadCalibration);
    EXPECT_NE(std::string(e.what()).find("landing CTAs"), std::string::npos) << e.what();
  }
  // At the limit itself a budget is still planned.
  const SolverResult ok = solveSizing(t, 2, int64_t{1} << 20, 8, 1, Calibration{});
  EXPECT_LE(ok.sumCtas, kMaxCtaBudget);
  EXPECT_LE(ok.landingCtas, kMaxCtaBudget);
}

// A budget the caller gives is used as given: the calibration's rate for it sizes nothing, so a
// rate that would ask for more than kMaxCtaBudget is not refused there (it once was, though the
// plan never used the count it asked for). The other budget is still the solver's, and refused.
TEST(Solver, AGivenBudgetIsNotRefusedForTheCountItReplaces) {
  TIDE_SEEDED_RNG(rng);
  const Topology t = Topology::make(2, 8);
  Calibration slow;
  slow.nicBw *= 1e4;  // asks for far more sum CTAs than a budget holds
  slow.landCap *= 1e4;
  slow.tail = 1e-9;  // and as many landing CTAs as the cap allows
  const int sum = rng.irange(1, kMaxCtaBudget);
  const int land = rng.irange(1, kMaxCtaBudget);
  const SolverResult r = solveSizing(t, 2, int64_t{1} << 20, 8, 1, slow, GivenCtas{sum, land});
  EXPECT_EQ(r.sumCtas, sum);
  EXPECT_EQ(r.landingCtas, land);
  EXPECT_TRUE(throwsReason([&] { solveSizing(t, 2, int64_t{1} << 20, 8, 1, slow, GivenCtas{sum, 0}); },
                           Reason::kBadCalibration));
  EXPECT_TRUE(throwsReason([&] { solveSizing(t, 2, int64_t{1} << 20, 8, 1, slow, GivenCtas{0, land}); },
                           Reason::kBadCalibration));

  RsOptions opt;
  opt.calibration = slow;
  opt.sumCtas = sum;
  opt.landingCtas = land;
  const GroupLayout g = makeGroupLayout(t, {ParamSpec{{64, 8}, DType::kBF16}}, DType::kBF16);
  const RsPlan plan = makeRsPlan(g, opt);
  EXPECT_EQ(plan.sumCtas, sum);
  EXPECT_EQ(plan.landingCtas, land);
  // A given budget past the limit is refused by the solver itself, as by makeRsPlan.
  EXPECT_TRUE(throwsReason([&] { solveSizing(t, 2, int64_t{1} << 20, 8, 1, Calibration{}, GivenCtas{kMaxCtaBudget + 1, 0}); },
                           Reason::kBadOption));
  EXPECT_TRUE(throwsReason([&] { solveSizing(t, 2, int64_t{1} << 20, 8, 1, Calibration{}, GivenCtas{0, -1}); },
                           Reason::kBadOption));
  // One node lands nothing from the network, whatever the caller gave.
  const GroupLayout one = makeGroupLayout(Topology::make(1, 8), {ParamSpec{{64, 8}, DType::kBF16}}, DType::kBF16);
  EXPECT_EQ(makeRsPlan(one, opt).landingCtas, 0);
}

// The bound covers the plan's own staging bytes (Area_RS in NS units, NS = N
// ranks x E elements of the all-gather's type) for fp32 gradients, fp32
// groups and push landing too, where the paper's bf16 / pull constants alone
// fell short (fp32 gradients: slots twice the size; push: one more inbox).
// For an fp32 group NS is twice a bf16 one's, and the model says so: ring
// slots 2 NS, FSDP2 3 NS. Sizes are multiples of 8 L passes elements, so no
// sub-slice padding blurs the comparison. With P passes every term is one
// pass's sub-chunk: the bound once stayed at the one-pass value (4x the staging
// at the adapter's default of four passes).
TEST(MemoryModel, BoundsThePlansStagingBytes) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 300; ++trial) {
    const int M = rng.irange(1, 70), L = rng.irange(1, 8), N = M * L;
    const int passes = rng.coin() ? rng.irange(1, 4) : rng.irange(5, 16);
    PlanOptions opt;
    opt.rs.mode = rng.coin() ? Mode::kInPlace : Mode::kSlotReuse;
    opt.rs.landing = rng.coin() ? Landing::kPush : Landing::kPull;
    opt.rs.passes = passes;
    opt.rs.stagingSlots = rng.irange(1, 4);
    opt.rs.railLane = rng.coin();  // applies where L = 1 across nodes
    const DType grad = rng.coin() ? DType::kBF16 : DType::kFP32;
    const DType ag = rng.coin() ? DType::kBF16 : DType::kFP32;
    // Half the trials: E a multiple of 8 L passes, where the closed form alone holds the staging;
    // the others any size (tiny ones too), where the sub-chunks' rounding adds stagingRounding.
    const bool even = rng.coin();
    const int64_t rows = even ? int64_t{N} * 8 * L * passes * rng.range(1, 4) : rng.range(1, int64_t{N} * 64 * L);
    const std::vector<ParamSpec> specs{ParamSpec{{rows}, ag}};
    SCOPED_TRACE("M=" + std::to_string(M) + " L=" + std::to_string(L) + " passes=" + std::to_string(passes) +
                 " grad=" + dtypeName(grad) + " ag=" + dtypeName(ag) + " landing=" + landingName(opt.rs.landing) +
                 " mode=" + modeName(opt.rs.mode) + (opt.rs.railLane ? " rail lane" : ""));
    const Plan plan = makePlan(Topology::make(M, L), specs, grad, opt);
    ASSERT_EQ(plan.rs.railLane, opt.rs.railLane && M > 1 && L == 1);
    const double ns = static_cast<double>(N) * refItemSize(ag) * static_cast<double>(plan.group.outElems);
    ASSERT_EQ(ns, static_cast<double>(plan.group.unshardedBytes()));
    EXPECT_LE(static_cast<double>(plan.rs.stagingBytes) / ns, plan.memory.rsAreaBound + 1e-12);
    if (even) {
      EXPECT_LE(plan.memory.stagingRounding, 1e-12);
      // And no looser than Eq. 10's two upper bounds: a bf16 staging slot of L/2 S_fp32 across nodes
      // holds (L - 1)/2 (one per local peer), and Slot-Reuse's outbox of min(2k, M - 1) blocks holds Eq. 9's depth.
      // Everything else is exact, one pass's sub-chunk each.
      const double perPassFp32 = 4.0 / refItemSize(ag) / N / passes;  // one pass's S_fp32 in NS units
      const double slotLoose = M > 1 && L > 1 ? plan.rs.stagingSlots * 0.5 * refItemSize(grad) / 2.0 : 0.0;
      const double outboxLoose = M > 1 && !plan.rs.railLane && opt.rs.mode == Mode::kSlotReuse
                                     ? 2.0 * (std::min(2.0 * plan.rs.roundWidth, M - 1.0) - plan.rs.outboxBlocks)
                                     : 0.0;
      EXPECT_GE(outboxLoose, 0.0);
      EXPECT_NEAR(plan.memory.rsAreaBound,
                  static_cast<double>(plan.rs.stagingBytes) / ns + (slotLoose + outboxLoose) * perPassFp32, 1e-9);
    }
    // What rounding a sub-chunk up can add, at most: under 8 elements (the ceiling of E / (L passes),
    // then up to a multiple of 8) per staging row (gradient dtype) and per row of every fp32 block
    // (inbox, outbox, spares, push area; the rail lane's inbox rows are narrower, in the gradient dtype).
    const int64_t rowsPerSender = M > 1 ? L : 1;
    const int64_t blocks = M > 1 ? int64_t{plan.rs.bufferGenerations} * L * (plan.rs.landing == Landing::kPush ? 2 : 1) +
                                       2 * int64_t{plan.rs.outboxBlocks} + 2 * int64_t{plan.rs.spareBlocks}
                                 : 0;
    const int64_t stagingRows = int64_t{plan.rs.stagingSlots} * (L - 1) * rowsPerSender;
    const double slack = 8.0 * (static_cast<double>(stagingRows * refItemSize(grad)) +
                                4.0 * L * static_cast<double>(blocks));
    EXPECT_LE(plan.memory.stagingRounding * ns, slack + 1e-6);
    const double closedArea = opt.rs.mode == Mode::kInPlace ? plan.memory.rsAreaInPlace : plan.memory.rsAreaSlotReuse;
    const double closedLive = opt.rs.mode == Mode::kInPlace ? plan.memory.tideLiveInPlace : plan.memory.tideLiveSlotReuse;
    EXPECT_NEAR(plan.memory.rsAreaBound, closedArea + plan.memory.stagingRounding, 1e-12);
    EXPECT_NEAR(plan.memory.tideLive, closedLive + plan.memory.stagingRounding, 1e-12);
    // In-Place keeps the previous layer's gradients: N S_grad, in NS units. Slot-Reuse parks them in the
    // vacated slot, except gradients wider than the group, which do not fit and are read in place.
    const double ring = 2.0 + (M > 1 ? 1.0 / L : 0.0);
    const double grads = static_cast<double>(refItemSize(grad)) / refItemSize(ag);
    EXPECT_NEAR(plan.memory.tideLiveInPlace - plan.memory.rsAreaInPlace, ring + grads, 1e-12);
    EXPECT_NEAR(plan.memory.tideLiveSlotReuse - plan.memory.rsAreaSlotReuse, ring + (grads > 1 ? grads : 0.0), 1e-12);
    // FSDP2: unsharded parameters, prefetched output (2 NS), fp32 reduce-scatter input (N S_fp32).
    EXPECT_NEAR(plan.memory.fsdp2Live, 2.0 + 4.0 / refItemSize(ag), 1e-12);
  }
}

// Width 0 means L only in RsOptions: here a wave width of 0 never advanced
// (the loop hung) and a round width of 0 divided by zero. Both are refused.
TEST(Solver, RefusesZeroWidthsAndPasses) {
  const Topology t = Topology::make(8, 8);
  EXPECT_TRUE(throwsReason([] { countNetworkRounds(8, 0, 2); }, Reason::kBadOption));
  EXPECT_TRUE(throwsReason([] { countNetworkRounds(8, 8, 0); }, Reason::kBadOption));
  EXPECT_TRUE(throwsReason([&] { solveSizing(t, 2, 1 << 20, 0, 1, Calibration{}); }, Reason::kBadOption));
  EXPECT_TRUE(throwsReason([&] { solveSizing(t, 2, 1 << 20, 9, 1, Calibration{}); }, Reason::kBadOption));
  EXPECT_TRUE(throwsReason([&] { solveSizing(t, 2, 1 << 20, 8, 0, Calibration{}); }, Reason::kBadOption));
  EXPECT_EQ(countNetworkRounds(1, 0, 0), 0);  // one node: no network at all
}

}  // namespace
}  // namespace tide_test
