// TIDE-AG schedule (paper Sec. 3.1): Bruck recursive doubling, the stage
// slots, and the landing scatter, checked by simulation.
#include <map>

#include "test_util.hpp"

namespace tide_test {
namespace {

int refRounds(int M) {
  int R = 0;
  while ((int64_t{1} << R) < M) ++R;
  return R;
}

// Plan-level facts about rounds and scatter groups that hold for any M.
void checkRoundsAndGroups(const GroupLayout& g, const AgPlan& plan, const AgOptions& opt) {
  const int M = g.topo.nodes;
  const int R = refRounds(M);
  ASSERT_EQ(static_cast<int>(plan.rounds.size()), R) << "rounds must be ceil(log2 M)";
  EXPECT_EQ(plan.stageBytes, int64_t{M - 1} * g.shardBytes);
  int64_t sumSlots = 0;
  for (int d = 0; d < R; ++d) {
    const AgRound& r = plan.rounds[static_cast<size_t>(d)];
    SCOPED_TRACE("round " + std::to_string(d));
    EXPECT_EQ(r.index, d);
    EXPECT_EQ(r.firstSlot, 1 << d);
    EXPECT_EQ(r.slots, std::min(1 << d, M - (1 << d)));
    EXPECT_EQ(r.bytes, int64_t{r.slots} * g.shardBytes);
    EXPECT_GE(r.headBytes, 0);
    EXPECT_LE(r.headBytes, r.bytes);
    sumSlots += r.slots;
  }
  EXPECT_EQ(sumSlots, M - 1) << "sum of c_d must be M-1";

  // Scatter groups: consecutive, non-empty, inside their round, covering
  // stage slots 1..M-1 exactly once; the last round in at most
  // lastRoundGroups groups, every other round in one.
  std::vector<int> perRound(static_cast<size_t>(R), 0);
  int next = 1;
  for (const AgScatterGroup& grp : plan.scatterGroups) {
    SCOPED_TRACE("group round " + std::to_string(grp.round) + " slots [" +
                 std::to_string(grp.firstSlot) + ", +" + std::to_string(grp.slots) + ")");
    ASSERT_GE(grp.round, 0);
    ASSERT_LT(grp.round, R);
    ASSERT_GE(grp.slots, 1);
    EXPECT_EQ(grp.firstSlot, next);
    const AgRound& r = plan.rounds[static_cast<size_t>(grp.round)];
    EXPECT_GE(grp.firstSlot, r.firstSlot);
    EXPECT_LE(grp.firstSlot + grp.slots, r.firstSlot + r.slots);
    next = grp.firstSlot + grp.slots;
    ++perRound[static_cast<size_t>(grp.round)];
  }
  EXPECT_EQ(next, M) << "scatter groups must cover stage slots 1..M-1";
  for (int d = 0; d < R; ++d) {
    if (d + 1 < R)
      EXPECT_EQ(perRound[static_cast<size_t>(d)], 1) << "round " << d;
    else
      EXPECT_LE(perRound[static_cast<size_t>(d)], opt.lastRoundGroups) << "last round";
  }
}

// A head split at byte 0 has no chunk ending at its mark, so its signal
// would never go out (a round waiting for it forever): refused with the rest.
TEST(AllGatherOptions, RefusesAHeadOfNoBytes) {
  const GroupLayout g = makeGroupLayout(Topology::make(2, 1), {ParamSpec{{64}, DType::kBF16}}, DType::kBF16);
  for (int64_t head : {int64_t{0}, int64_t{-1}}) {
    AgOptions o;
    o.headBytes = head;
    try {
      makeAgPlan(g, o);
      ADD_FAILURE() << "headBytes " << head << " accepted";
    } catch (const PlanError& e) {
      EXPECT_EQ(e.reason(), Reason::kBadOption) << reasonName(e.reason());
      EXPECT_NE(std::string(e.what()).find("headBytes"), std::string::npos) << e.what();
    }
  }
  AgOptions one;
  one.headBytes = 1;
  EXPECT_EQ(makeAgPlan(g, one).rounds.at(0).headBytes, 1);
}

// The last round's groups: each takes a scatter-group counter in the
// collectives, and planning counts descriptors over every node for each, so
// a count past kMaxLastRoundGroups is refused when planned (it used to pass
// here and fail only at the first all-gather, or take seconds to plan).
TEST(AllGatherOptions, RefusesMoreLastRoundGroupsThanTheLimit) {
  const GroupLayout g = makeGroupLayout(Topology::make(1024, 1), {ParamSpec{{4096}, DType::kBF16}}, DType::kBF16);
  AgOptions most;
  most.lastRoundGroups = kMaxLastRoundGroups;
  const AgPlan plan = makeAgPlan(g, most);
  EXPECT_EQ(static_cast<int>(plan.scatterGroups.size()), static_cast<int>(plan.rounds.size()) - 1 + kMaxLastRoundGroups);
  AgOptions over;
  over.lastRoundGroups = kMaxLastRoundGroups + 1;
  try {
    makeAgPlan(g, over);
    ADD_FAILURE() << "lastRoundGroups " << over.lastRoundGroups << " accepted";
  } catch (const PlanError& e) {
    EXPECT_EQ(e.reason(), Reason::kBadOption) << reasonName(e.reason());
    EXPECT_NE(std::string(e.what()).find("lastRoundGroups must be at most 32"), std::string::npos) << e.what();
  }
}

// Bruck covers each of the M-1 remote shards exactly once, for every M.
// Simulated from the plan's rounds: in round d node n sends its slots
// [0, c_d) to node (n - 2^d) mod M, which stores them at [2^d, 2^d + c_d).
TEST(AllGatherBruck, CoversEveryRemoteShardOnceForM1To1024) {
  std::vector<int> holder;  // holder[n * M + i]: node whose shard sits in slot i of node n
  std::vector<int> writes;
  std::vector<int> before;
  for (int M = 1; M <= 1024; ++M) {
    SCOPED_TRACE("M=" + std::to_string(M));
    const GroupLayout g =
        makeGroupLayout(Topology::make(M, 1), {ParamSpec{{1}, DType::kBF16}}, DType::kBF16);
    const AgOptions opt;
    const AgPlan plan = makeAgPlan(g, opt);
    checkRoundsAndGroups(g, plan, opt);
    if (::testing::Test::HasFatalFailure()) return;

    const size_t MM = static_cast<size_t>(M) * static_cast<size_t>(M);
    holder.assign(MM, -1);
    writes.assign(MM, 0);
    for (int n = 0; n < M; ++n) holder[static_cast<size_t>(n) * M] = n;  // slot 0: own shard
    for (const AgRound& r : plan.rounds) {
      // Every send in a round reads the state before the round: snapshot
      // the slots [0, c_d) each node sends.
      const int shift = r.firstSlot;
      ASSERT_GE(r.slots, 0);
      ASSERT_LE(r.slots, M);
      before.resize(static_cast<size_t>(M) * static_cast<size_t>(r.slots));
      for (int n = 0; n < M; ++n)
        std::copy_n(holder.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(n) * M), r.slots,
                    before.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(n) * r.slots));
      ASSERT_LE(shift + r.slots, M) << "round " << r.index << " writes past the stage";
      ASSERT_GE(shift, 1) << "round " << r.index << " overwrites the own shard";
      // Plain comparisons in the hot loops (M^2 work per M); report the first problem.
      for (int n = 0; n < M; ++n) {
        const int to = posMod(n - shift, M);
        for (int j = 0; j < r.slots; ++j) {
          const int from = before[static_cast<size_t>(n) * r.slots + j];
          const size_t at = static_cast<size_t>(to) * M + shift + j;
          if (from < 0 || writes[at] != 0) {
            FAIL() << "round " << r.index << ": node " << n << " sends slot " << j << " to node " << to
                   << " slot " << shift + j << (from < 0 ? ", but that slot is empty" : ", already written");
          }
          ++writes[at];
          holder[at] = from;
        }
      }
    }
    for (int n = 0; n < M; ++n)
      for (int i = 1; i < M; ++i) {
        const size_t at = static_cast<size_t>(n) * M + i;
        if (writes[at] != 1 || holder[at] != (n + i) % M || agSlotSource(n, i, M) != (n + i) % M) {
          FAIL() << "slot " << i << " of node " << n << " written " << writes[at] << " times, holds node "
                 << holder[at] << "'s shard, wants " << (n + i) % M;
        }
      }
  }
}

// The rail puts of agRoundPuts, executed byte by byte on every rank: the
// stage of rank (n, l) ends with rank (((n + i) mod M), l)'s shard in slot i.
TEST(AllGatherBruck, RoundPutsDeliverShardsByteExact) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 60; ++trial) {
    const int M = trial < 40 ? trial + 1 : rng.irange(41, 90);
    const int L = rng.irange(1, 3);
    const int N = M * L;
    auto specs = randomSpecs(rng, rng.irange(1, 3), N, 1, 3, 2, rng.coin() ? DType::kBF16 : DType::kFP32);
    SCOPED_TRACE("M=" + std::to_string(M) + " L=" + std::to_string(L) + " shapes " + shapesToString(specs));
    const GroupLayout g = makeGroupLayout(Topology::make(M, L), specs, DType::kBF16);
    const AgPlan plan = makeAgPlan(g);
    const int64_t S = g.shardBytes;
    const int64_t stage = int64_t{M - 1} * S;
    // content[rank][y] = origin rank * S + shard byte, -1 when empty.
    std::vector<std::vector<int64_t>> content(static_cast<size_t>(N), std::vector<int64_t>(static_cast<size_t>(stage), -1));
    std::vector<std::vector<int>> writes(static_cast<size_t>(N), std::vector<int>(static_cast<size_t>(stage), 0));
    for (int d = 0; d < static_cast<int>(plan.rounds.size()); ++d) {
      const auto before = content;
      const int shift = plan.rounds[static_cast<size_t>(d)].firstSlot;
      for (int r = 0; r < N; ++r) {
        const auto puts = agRoundPuts(g, plan, r, d);
        const int peer = posMod(r / L - shift, M) * L + r % L;
        for (const ByteMove& mv : expandBytes(puts)) {
          ASSERT_EQ(mv.srcRank, r);
          ASSERT_EQ(mv.dstRank, peer) << "round " << d << " rank " << r << " must put to its rail peer";
          ASSERT_EQ(mv.dstRegion, static_cast<int>(Region::kStage));
          ASSERT_GE(mv.dstByte, (shift - 1) * S) << "round " << d << " writes below its slots";
          ASSERT_LT(mv.dstByte, std::min<int64_t>(stage, (2 * shift - 1) * S));
          int64_t value;
          if (mv.srcRegion == static_cast<int>(Region::kShard)) {
            ASSERT_LT(mv.srcByte, S);
            value = int64_t{r} * S + mv.srcByte;
          } else {
            ASSERT_EQ(mv.srcRegion, static_cast<int>(Region::kStage));
            ASSERT_LT(mv.srcByte, stage);
            value = before[static_cast<size_t>(r)][static_cast<size_t>(mv.srcByte)];
            ASSERT_GE(value, 0) << "round " << d << " rank " << r << " forwards an empty stage byte "
                                << mv.srcByte;
          }
          const size_t at = static_cast<size_t>(mv.dstByte);
          ASSERT_EQ(writes[static_cast<size_t>(peer)][at], 0) << "stage byte written twice";
          ++writes[static_cast<size_t>(peer)][at];
          content[static_cast<size_t>(peer)][at] = value;
        }
      }
    }
    for (int r = 0; r < N; ++r)
      for (int64_t y = 0; y < stage; ++y) {
        const int slot = static_cast<int>(y / S) + 1;
        const int origin = ((r / L + slot) % M) * L + r % L;
        ASSERT_EQ(content[static_cast<size_t>(r)][static_cast<size_t>(y)], int64_t{origin} * S + y % S)
            << "rank " << r << " stage byte " << y << " (slot " << slot << ")";
      }
  }
}

// Coalesced scatter descriptors expand to exactly the byte map of the flat
// ones; together with the local copies they write every byte of every local
// landing exactly once, from the right rank's shard.
TEST(AllGatherDescriptors, CoalescedEqualsFlatAndFillsLandingsExactly) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 80; ++trial) {
    const int M = rng.irange(1, 13);
    const int L = rng.irange(1, 3);
    const int N = M * L;
    const DType dt = rng.coin() ? DType::kBF16 : DType::kFP32;
    auto specs = randomSpecs(rng, rng.irange(1, 4), N, 2, 3, 3, dt);
    AgOptions opt;
    if (rng.coin()) {
      opt.minStridedRun = rng.irange(1, 6);
      opt.lastRoundGroups = rng.irange(1, 5);
    }
    SCOPED_TRACE("trial " + std::to_string(trial) + " M=" + std::to_string(M) + " L=" + std::to_string(L) +
                 " minStridedRun=" + std::to_string(opt.minStridedRun) + " lastRoundGroups=" +
                 std::to_string(opt.lastRoundGroups) + " shapes " + shapesToString(specs));
    const GroupLayout g = makeGroupLayout(Topology::make(M, L), specs, DType::kBF16);
    const RefLayout ref = refLayout(M, L, specs);
    const int64_t S = ref.S;
    const int P = static_cast<int>(specs.size());
    const AgPlan plan = makeAgPlan(g, opt);
    checkRoundsAndGroups(g, plan, opt);
    if (HasFatalFailure()) return;

    // Expected source of landing byte z: (origin rank, shard byte).
    auto expectedSource = [&](int64_t z) {
      for (int p = 0; p < P; ++p) {
        const RefParam& rp = ref.p[static_cast<size_t>(p)];
        if (z >= rp.o * N && z < (rp.o + rp.s) * N) {
          const int64_t rel = z - rp.o * N;
          return std::pair<int, int64_t>{static_cast<int>(rel / rp.s), rp.o + rel % rp.s};
        }
      }
      return std::pair<int, int64_t>{-1, -1};
    };
    std::vector<std::pair<int, int64_t>> source(static_cast<size_t>(N * S));
    for (int64_t z = 0; z < N * S; ++z) source[static_cast<size_t>(z)] = expectedSource(z);

    // writes[rank][z]: times landing byte z of `rank` was written.
    std::vector<std::vector<int>> writes(static_cast<size_t>(N), std::vector<int>(static_cast<size_t>(N * S), 0));
    int64_t worstCo = 0, worstLocal = 0;
    for (int r = 0; r < N; ++r) {
      const int n = r / L, l = r % L;
      SCOPED_TRACE("issuing rank " + std::to_string(r));
      auto apply = [&](const std::vector<ByteMove>& moves) {
        for (const ByteMove& mv : moves) {
          ASSERT_EQ(mv.srcRank, r) << "copies read the issuing rank's own memory: " << describe(mv);
          ASSERT_EQ(mv.dstRegion, static_cast<int>(Region::kLanding)) << describe(mv);
          ASSERT_EQ(mv.dstRank / L, n) << "scatter must stay on the node: " << describe(mv);
          ASSERT_GE(mv.dstByte, 0);
          ASSERT_LT(mv.dstByte, N * S) << describe(mv);
          std::pair<int, int64_t> from;
          if (mv.srcRegion == static_cast<int>(Region::kShard)) {
            ASSERT_LT(mv.srcByte, S) << describe(mv);
            from = {r, mv.srcByte};
          } else {
            ASSERT_EQ(mv.srcRegion, static_cast<int>(Region::kStage)) << describe(mv);
            ASSERT_LT(mv.srcByte, int64_t{M - 1} * S) << describe(mv);
            // Slot i of node n on rail l holds rank ((n + i) mod M) L + l's shard; slot i at (i-1) S.
            const int slot = static_cast<int>(mv.srcByte / S) + 1;
            from = {((n + slot) % M) * L + l, mv.srcByte % S};
          }
          const auto want = source[static_cast<size_t>(mv.dstByte)];
          ASSERT_EQ(from, want) << "landing byte " << mv.dstByte << " of rank " << mv.dstRank
                                << " gets (rank " << from.first << ", shard byte " << from.second
                                << "), wants (rank " << want.first << ", " << want.second << "): "
                                << describe(mv);
          ++writes[static_cast<size_t>(mv.dstRank)][static_cast<size_t>(mv.dstByte)];
        }
      };

      const auto local = agLocalDescriptors(g, r);
      for (const CopyDesc& d : local) ASSERT_EQ(d.src.region, Region::kShard) << describe(d);
      // Independent reference for the local copies: own shard of every
      // parameter into every local landing at Landing(p, r).
      std::vector<ByteMove> wantLocal;
      for (int dl = 0; dl < L; ++dl)
        for (int p = 0; p < P; ++p) {
          const RefParam& rp = ref.p[static_cast<size_t>(p)];
          for (int64_t x = 0; x < rp.s; ++x)
            wantLocal.push_back({r, static_cast<int>(Region::kShard), 0, rp.o + x, n * L + dl,
                                 static_cast<int>(Region::kLanding), 0, rp.o * N + int64_t{r} * rp.s + x});
        }
      std::sort(wantLocal.begin(), wantLocal.end());
      auto gotLocal = expandBytes(local);
      // Region indices are not part of the contract for shard and landing.
      for (ByteMove& mv : gotLocal) mv.srcIndex = mv.dstIndex = 0;
      std::sort(gotLocal.begin(), gotLocal.end());
      EXPECT_EQ(gotLocal, wantLocal) << firstDifference(gotLocal, wantLocal);
      ASSERT_EQ(expandBytes(flatten(local)), expandBytes(local));
      apply(expandBytes(local));
      if (HasFatalFailure()) return;

      int64_t coTotal = 0;
      for (const AgScatterGroup& grp : plan.scatterGroups) {
        SCOPED_TRACE("group round " + std::to_string(grp.round) + " first slot " +
                     std::to_string(grp.firstSlot) + " slots " + std::to_string(grp.slots));
        const auto co = agScatterDescriptors(g, plan, r, grp, true);
        const auto fl = agScatterDescriptors(g, plan, r, grp, false);
        for (const CopyDesc& d : fl) ASSERT_EQ(d.rows, 1) << "flat descriptor is strided: " << describe(d);
        // Flat: one copy per (slot, parameter, local GPU).
        EXPECT_EQ(static_cast<int64_t>(fl.size()), int64_t{grp.slots} * P * L);
        EXPECT_LE(co.size(), fl.size());
        // Runs of consecutive source nodes (split where (n + i) wraps past
        // M - 1); runs of >= minStridedRun slots take one copy per
        // (parameter, local GPU), shorter runs one per slot.
        int64_t bound = 0;
        int runLen = 0;
        for (int i = grp.firstSlot; i < grp.firstSlot + grp.slots; ++i) {
          if (runLen > 0 && (n + i) % M == 0) {
            bound += runLen >= opt.minStridedRun ? 1 : runLen;
            runLen = 0;
          }
          ++runLen;
        }
        bound += runLen >= opt.minStridedRun ? 1 : runLen;
        EXPECT_LE(static_cast<int64_t>(co.size()), bound * P * L) << "runs are not coalesced";
        const auto coBytes = expandBytes(co);
        const auto flBytes = expandBytes(fl);
        ASSERT_EQ(coBytes, flBytes) << firstDifference(coBytes, flBytes);
        const auto flatCo = flatten(co);
        for (const CopyDesc& d : flatCo) ASSERT_EQ(d.rows, 1) << describe(d);
        ASSERT_EQ(expandBytes(flatCo), coBytes) << "flatten changes the byte map";
        EXPECT_FALSE(hasDuplicates(coBytes));
        apply(coBytes);
        if (HasFatalFailure()) return;
        coTotal += static_cast<int64_t>(co.size());
      }
      worstCo = std::max(worstCo, coTotal);
      worstLocal = std::max(worstLocal, static_cast<int64_t>(local.size()));
    }
    for (int r = 0; r < N; ++r)
      for (int64_t z = 0; z < N * S; ++z)
        ASSERT_EQ(writes[static_cast<size_t>(r)][static_cast<size_t>(z)], 1)
            << "landing byte " << z << " of rank " << r;
    // Plan counts: maximised over ranks, with or without the local copies.
    EXPECT_LE(plan.descriptors, plan.descriptorsFlat);
    const bool withoutLocal = plan.descriptors == worstCo && plan.descriptorsFlat == int64_t{M - 1} * P * L;
    const bool withLocal = plan.descriptors == worstCo + worstLocal &&
                           plan.descriptorsFlat == int64_t{M - 1} * P * L + worstLocal;
    EXPECT_TRUE(withoutLocal || withLocal)
        << "descriptors " << plan.descriptors << " flat " << plan.descriptorsFlat << "; measured worst coalesced "
        << worstCo << ", local " << worstLocal << ", flat scatter " << int64_t{M - 1} * P * L;
  }
}

// Descriptor count grows as O(P log M), not O(P M): each scatter group has
// at most two runs (one wrap), i.e. at most 1 + (minStridedRun - 1) = 4
// copies per (parameter, local GPU) with the defaults, so the per-rank count
// stays within 4 (R - 1 + lastRoundGroups) P L plus the local copies.
TEST(AllGatherDescriptors, CountIsLogarithmicInM) {
  for (int M : {2, 5, 8, 16, 33, 64, 100, 256, 1000}) {
    SCOPED_TRACE("M=" + std::to_string(M));
    const int L = 8, P = 7;
    std::vector<ParamSpec> specs(static_cast<size_t>(P), ParamSpec{{int64_t{M} * L, 2}, DType::kBF16});
    const GroupLayout g = makeGroupLayout(Topology::make(M, L), specs, DType::kBF16);
    const AgPlan plan = makeAgPlan(g);
    const int64_t logBound = int64_t{4 * (refRounds(M) - 1 + plan.options.lastRoundGroups)} * P * L;
    EXPECT_LE(plan.descriptors, logBound + int64_t{P} * L);
    if (M >= 64) {
      EXPECT_LT(plan.descriptors * 4, plan.descriptorsFlat);
    }
  }
}

// A scatter group outside stage slots 1..M-1 is refused: it would read past
// the (M-1) S-byte stage (or from slot 0, which is not in the stage).
TEST(AllGatherDescriptors, RefusesGroupsOutsideTheStage) {
  const GroupLayout g = makeGroupLayout(Topology::make(3, 2), {ParamSpec{{64, 16}, DType::kBF16}}, DType::kBF16);
  const AgPlan plan = makeAgPlan(g);
  for (const AgScatterGroup& bad : {AgScatterGroup{0, 3, 2}, AgScatterGroup{1, 2, 2}, AgScatterGroup{0, 0, 1},
                                    AgScatterGroup{0, 1, 0}}) {
    SCOPED_TRACE("slots [" + std::to_string(bad.firstSlot) + ", +" + std::to_string(bad.slots) + ")");
    EXPECT_TRUE(throwsReason([&] { agScatterDescriptors(g, plan, 0, bad); }, Reason::kBadOption));
  }
  for (const AgScatterGroup& grp : plan.scatterGroups)
    for (const CopyDesc& d : agScatterDescriptors(g, plan, 0, grp))
      EXPECT_LE(d.src.offset + (d.rows - 1) * d.srcPitch + d.width, plan.stageBytes) << describe(d);
}

// A round index outside the plan is a PlanError, not std::out_of_range.
TEST(AllGatherBruck, RoundsOutsideThePlanAreRefused) {
  const GroupLayout g = makeGroupLayout(Topology::make(3, 2), {ParamSpec{{64, 16}, DType::kBF16}}, DType::kBF16);
  const AgPlan plan = makeAgPlan(g);
  ASSERT_EQ(plan.rounds.size(), 2u);
  EXPECT_FALSE(agRoundPuts(g, plan, 0, 1).empty());
  EXPECT_TRUE(throwsReason([&] { (void)agRoundPuts(g, plan, 0, -1); }, Reason::kBadOption));
  EXPECT_TRUE(throwsReason([&] { (void)agRoundPuts(g, plan, 0, 2); }, Reason::kBadOption));
}

// A rail-lane plan has no stage: its rounds' stage puts are refused, not listed into nothing.
TEST(AllGatherBruck, RailLanePlansHaveNoStagePuts) {
  const GroupLayout g = makeGroupLayout(Topology::make(4, 1), {ParamSpec{{64, 16}, DType::kBF16}}, DType::kBF16);
  AgOptions opt;
  opt.railLane = true;
  const AgPlan plan = makeAgPlan(g, opt);
  ASSERT_TRUE(plan.railLane);
  EXPECT_EQ(plan.stageBytes, 0);
  EXPECT_TRUE(throwsReason([&] { (void)agRoundPuts(g, plan, 0, 0); }, Reason::kBadOption));
}

}  // namespace
}  // namespace tide_test
