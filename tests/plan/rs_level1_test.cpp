// TIDE-RS Level 1 (paper Sec. 4.1): coalesced pushes expand to exactly the
// byte map of the flat ones, and both equal an independently computed
// reference built from Eqs. 6-7 and the staging layout of plan.hpp.
#include "test_util.hpp"

namespace tide_test {
namespace {

// Sub-slices partition the per-rank output axis [0, E): over all passes and
// sub-slices the ranges are disjoint, cover [0, E), and hold <= E_sub each.
void checkSubSlices(const GroupLayout& g, const RsPlan& plan, int L, int passes) {
  const int64_t E = g.outElems;
  EXPECT_GE(plan.subElems, ceilDiv(E, int64_t{L} * passes));
  EXPECT_EQ(plan.stagingSpan, int64_t{L} * passes * plan.subElems);
  EXPECT_GE(plan.stagingSpan, E);
  std::vector<int> cover(static_cast<size_t>(E), 0);
  for (int q = 0; q < passes; ++q)
    for (int s = 0; s < L; ++s) {
      const ElemRange r = subSliceRange(g, plan, q, s);
      ASSERT_LE(r.size(), plan.subElems) << "pass " << q << " sub-slice " << s;
      ASSERT_GE(r.begin, 0);
      for (int64_t e = r.begin; e < r.begin + r.size(); ++e) {
        ASSERT_LT(e, E);
        ++cover[static_cast<size_t>(e)];
      }
    }
  for (int64_t e = 0; e < E; ++e) ASSERT_EQ(cover[static_cast<size_t>(e)], 1) << "output element " << e;
}

// Expected bytes that sender `rank` pushes for `block` in `pass`, derived from
// the paper and the staging layout documented in plan.hpp (destinations are
// offsets into one staging slot of the owner):
//  * M > 1: block = destination node t; owner j != sender handles sub-slice
//    s = (j + cbar) mod L with c = c(t, n) of Eq. 6 (cbar = c mod M), for
//    the L destination ranks t L + i (row i).
//  * M == 1: block = chunk s; owner j handles its own rank's rows (row 0).
//  * Staging row (senderIdx * rows + i) of E_sub elements, senderIdx = the
//    sender's position among the L-1 non-owner local ranks.
//  * Source: the sender's unsharded gradient of parameter p, element
//    (t L + i) R_p K_p + (e - q_p); rows past D_p are not copied.
// Also returns, per owner, the number of (parameter, row) pieces with data,
// which is exactly how many flat copies there must be.
std::vector<ByteMove> referencePushes(const GroupLayout& g, const RsPlan& plan, const RefLayout& ref,
                                      int rank, int pass, int block, int64_t* flatPieces,
                                      int64_t* coalescedBound) {
  const int M = g.topo.nodes, L = g.topo.gpusPerNode;
  const int n = rank / L, me = rank % L;
  const int b = refItemSize(g.gradDtype);
  const int rows = M > 1 ? L : 1;
  std::vector<ByteMove> out;
  *flatPieces = 0;
  *coalescedBound = 0;
  for (int j = 0; j < L; ++j) {
    if (j == me) continue;  // the owner reads its own gradient in place
    int s;
    if (M > 1) {
      const int c = block == n ? M : posMod(block - n, M);
      s = posMod(j + c % M, L);
    } else {
      s = block;
    }
    const ElemRange range = subSliceRange(g, plan, pass, s);
    const int senderIdx = me < j ? me : me - 1;
    for (size_t p = 0; p < ref.p.size(); ++p) {
      const RefParam& rp = ref.p[p];
      bool touches = false;
      for (int i = 0; i < rows; ++i) {
        const int destRank = M > 1 ? block * L + i : j;
        bool any = false;
        for (int64_t e = std::max(range.begin, rp.outOffset);
             e < std::min(range.begin + range.size(), rp.outOffset + rp.outElems); ++e) {
          touches = true;
          const int64_t elem = int64_t{destRank} * rp.R * rp.K + (e - rp.outOffset);
          if (elem >= rp.D * rp.K) continue;  // tail padding: nothing to copy
          any = true;
          const int64_t dstElem = (int64_t{senderIdx} * rows + i) * plan.subElems + (e - range.begin);
          for (int x = 0; x < b; ++x)
            out.push_back({rank, static_cast<int>(Region::kGrad), static_cast<int>(p), elem * b + x,
                           n * L + j, static_cast<int>(Region::kStaging), 0, dstElem * b + x});
        }
        if (any) ++*flatPieces;
      }
      // One strided copy per (owner, parameter) plus at most one short tail.
      if (touches) *coalescedBound += 2;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RsLevel1, CoalescedEqualsFlatEqualsReference) {
  TIDE_SEEDED_RNG(rng);
  int checkedCalls = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int M = rng.irange(1, 5);
    const int L = rng.irange(1, 4);
    const int N = M * L;
    const int passes = rng.irange(1, 3);
    const DType gdt = rng.coin() ? DType::kBF16 : DType::kFP32;
    auto specs = randomSpecs(rng, rng.irange(1, 4), N, 2, 3, 3, rng.coin() ? DType::kBF16 : DType::kFP32);
    SCOPED_TRACE("trial " + std::to_string(trial) + " M=" + std::to_string(M) + " L=" + std::to_string(L) +
                 " passes=" + std::to_string(passes) + " grad " + dtypeName(gdt) + " shapes " +
                 shapesToString(specs));
    const GroupLayout g = makeGroupLayout(Topology::make(M, L), specs, gdt);
    const RefLayout ref = refLayout(M, L, specs);
    PlanOptions opt;
    opt.rs.passes = passes;
    const RsPlan plan = makePlan(Topology::make(M, L), specs, gdt, opt).rs;
    checkSubSlices(g, plan, L, passes);
    if (HasFatalFailure()) return;
    const int rows = M > 1 ? L : 1;
    EXPECT_EQ(plan.stagingSlotBytes, int64_t{L - 1} * rows * plan.subElems * refItemSize(gdt));
    EXPECT_LE(plan.level1Descriptors, plan.level1DescriptorsFlat);

    const int blocks = M > 1 ? M : L;
    int64_t worstFlat = 0, worstBound = 0, worstCo = 0;
    for (int r = 0; r < N; ++r) {
      int64_t rankFlat = 0, rankBound = 0, rankCo = 0;
      for (int q = 0; q < passes; ++q)
        for (int blk = 0; blk < blocks; ++blk) {
          SCOPED_TRACE("sender rank " + std::to_string(r) + " pass " + std::to_string(q) + " block " +
                       std::to_string(blk));
          const auto co = level1Pushes(g, plan, r, q, blk, true);
          const auto fl = level1Pushes(g, plan, r, q, blk, false);
          for (const CopyDesc& d : fl) ASSERT_EQ(d.rows, 1) << "flat descriptor is strided: " << describe(d);
          EXPECT_LE(co.size(), fl.size());
          int64_t flatPieces = 0, coBound = 0;
          const auto want = referencePushes(g, plan, ref, r, q, blk, &flatPieces, &coBound);
          rankFlat += flatPieces;
          rankBound += coBound;
          rankCo += static_cast<int64_t>(co.size());
          EXPECT_EQ(static_cast<int64_t>(fl.size()), flatPieces) << "one flat copy per (owner, parameter, row)";
          EXPECT_LE(static_cast<int64_t>(co.size()), coBound)
              << "one strided copy per (owner, parameter) plus a short tail";
          for (const CopyDesc& d : co) {
            ASSERT_LE(d.dst.offset + (d.rows - 1) * d.dstPitch + d.width, plan.stagingSlotBytes)
                << "writes past one staging slot: " << describe(d);
          }
          auto coBytes = expandBytes(co);
          auto flBytes = expandBytes(fl);
          ASSERT_EQ(coBytes, flBytes) << firstDifference(coBytes, flBytes);
          ASSERT_EQ(expandBytes(flatten(co)), coBytes) << "flatten changes the byte map";
          ASSERT_FALSE(hasDuplicates(coBytes));
          // The staging index is the caller's business; compare without it.
          for (ByteMove& mv : coBytes) mv.dstIndex = 0;
          std::sort(coBytes.begin(), coBytes.end());
          ASSERT_EQ(coBytes, want) << firstDifference(coBytes, want);
          ++checkedCalls;
        }
      worstFlat = std::max(worstFlat, rankFlat);
      worstBound = std::max(worstBound, rankBound);
      worstCo = std::max(worstCo, rankCo);
    }
    // makePlan's per-rank counts per call, maximised over all ranks (nodes
    // differ: the tail padding sits on the last destination node, while the
    // sub-slice follows the contributor index).
    EXPECT_EQ(plan.level1DescriptorsFlat, worstFlat);
    EXPECT_EQ(plan.level1Descriptors, worstCo);
    EXPECT_LE(worstCo, worstBound);
  }
  EXPECT_GT(checkedCalls, 0);
}

// makePlan counts per rank without listing descriptors (plan.cpp folds the
// destination nodes that look alike). Against the descriptors themselves,
// summed per sender rank and maximised, on topologies large enough for the
// sub-slice rotation to wrap (M > L, M not a multiple of L) and for several
// nodes' rows to hold tail padding or nothing at all.
TEST(RsLevel1, CountsEqualTheDescriptorsListedPerRank) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 24; ++trial) {
    const int M = rng.irange(2, 19);
    const int L = rng.irange(2, 8);
    const int N = M * L;
    const int passes = rng.irange(1, 4);
    auto specs = randomSpecs(rng, rng.irange(1, 5), N, 2, 3, 2, DType::kBF16);
    SCOPED_TRACE("trial " + std::to_string(trial) + " M=" + std::to_string(M) + " L=" + std::to_string(L) +
                 " passes=" + std::to_string(passes) + " shapes " + shapesToString(specs));
    const GroupLayout g = makeGroupLayout(Topology::make(M, L), specs, DType::kFP32);
    PlanOptions opt;
    opt.rs.passes = passes;
    const RsPlan plan = makePlan(Topology::make(M, L), specs, DType::kFP32, opt).rs;
    int64_t worstCo = 0, worstFlat = 0;
    for (int r = 0; r < N; ++r) {
      int64_t co = 0, flat = 0;
      for (int q = 0; q < passes; ++q)
        for (int blk = 0; blk < M; ++blk) {
          co += static_cast<int64_t>(level1Pushes(g, plan, r, q, blk, true).size());
          flat += static_cast<int64_t>(level1Pushes(g, plan, r, q, blk, false).size());
        }
      worstCo = std::max(worstCo, co);
      worstFlat = std::max(worstFlat, flat);
    }
    EXPECT_EQ(plan.level1Descriptors, worstCo);
    EXPECT_EQ(plan.level1DescriptorsFlat, worstFlat);
  }
}

// Coalescing pays off at the paper's scale (L, M, P) = (8, 64, 30): the
// destination-rank axis (L rows) folds into one strided copy, so the
// coalesced count is about L times smaller than the flat one and within the
// paper's (L-1) P M (plus tails); the flat count is within (L-1) P M L.
TEST(RsLevel1, CoalescingAtPaperScale) {
  const int M = 64, L = 8, P = 30;
  std::vector<ParamSpec> specs(static_cast<size_t>(P), ParamSpec{{int64_t{M} * L * 4, 64}, DType::kBF16});
  const Plan plan = makePlan(Topology::make(M, L), specs, DType::kBF16);
  EXPECT_LE(plan.rs.level1DescriptorsFlat, int64_t{L - 1} * P * M * L);
  EXPECT_LE(plan.rs.level1Descriptors, 2 * int64_t{L - 1} * P * M);
  EXPECT_GE(plan.rs.level1Descriptors, int64_t{L - 1} * M);  // at least one per (owner, node)
  EXPECT_LE(plan.rs.level1Descriptors * (L / 2), plan.rs.level1DescriptorsFlat);
}

// A pass or block outside the plan is refused: on one node block L would be
// the next pass's chunk 0 (the same copies, silently), and block -1 across
// nodes would read before the gradient.
TEST(RsLevel1, RefusesPassOrBlockOutsideThePlan) {
  const std::vector<ParamSpec> specs{ParamSpec{{64, 16}, DType::kBF16}};
  PlanOptions opt;
  opt.rs.passes = 2;
  const Plan one = makePlan(Topology::make(1, 4), specs, DType::kBF16, opt);
  const Plan three = makePlan(Topology::make(3, 2), specs, DType::kBF16, opt);
  for (auto [pass, block] : std::vector<std::pair<int, int>>{{0, 4}, {0, -1}, {2, 0}, {-1, 0}}) {
    SCOPED_TRACE("one node, pass " + std::to_string(pass) + " block " + std::to_string(block));
    EXPECT_TRUE(throwsReason([&] { level1Pushes(one.group, one.rs, 0, pass, block); }, Reason::kBadOption));
  }
  for (auto [pass, block] : std::vector<std::pair<int, int>>{{0, 3}, {0, -1}, {2, 0}, {-1, 1}}) {
    SCOPED_TRACE("three nodes, pass " + std::to_string(pass) + " block " + std::to_string(block));
    EXPECT_TRUE(throwsReason([&] { level1Pushes(three.group, three.rs, 0, pass, block); }, Reason::kBadOption));
  }
  EXPECT_FALSE(level1Pushes(one.group, one.rs, 0, 1, 3).empty());
  EXPECT_FALSE(level1Pushes(three.group, three.rs, 0, 1, 2).empty());
}

}  // namespace
}  // namespace tide_test
