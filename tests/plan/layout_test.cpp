// Group geometry (paper Sec. 2.1, Eq. 2) against FSDP2's padding rule, the
// landing bijection, and the contract checks (Sec. 2.5).
#include <numeric>

#include "test_util.hpp"

namespace tide_test {
namespace {

// FSDP2 shards dim 0 with torch.chunk(D, N) and pads with empty chunks
// (_chunk_with_empty): chunk size ceil(D/N), the last non-empty chunk may be
// short, later ranks get nothing. Returns the valid rows of every rank.
std::vector<int64_t> torchChunkRows(int64_t D, int N) {
  std::vector<int64_t> rows(static_cast<size_t>(N), 0);
  const int64_t chunk = (D + N - 1) / N;
  int64_t start = 0;
  for (int r = 0; r < N && start < D; ++r) {
    rows[static_cast<size_t>(r)] = std::min(chunk, D - start);
    start += chunk;
  }
  return rows;
}

TEST(Topology, NodeMajorRanksAndRails) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 200; ++trial) {
    const int M = rng.irange(1, 300), L = rng.irange(1, 8);
    SCOPED_TRACE("M=" + std::to_string(M) + " L=" + std::to_string(L));
    const Topology t = Topology::make(M, L);
    ASSERT_EQ(t.nodes, M);
    ASSERT_EQ(t.gpusPerNode, L);
    ASSERT_EQ(t.ranks(), M * L);
    for (int k = 0; k < 20; ++k) {
      const int n = rng.irange(0, M - 1), l = rng.irange(0, L - 1);
      const int r = n * L + l;
      EXPECT_EQ(t.rankOf(n, l), r);
      EXPECT_EQ(t.nodeOf(r), n);
      EXPECT_EQ(t.localOf(r), l);
      EXPECT_NO_THROW(t.checkRank(r));
      const int delta = rng.irange(-3 * M, 3 * M);
      EXPECT_EQ(t.railPeer(r, delta), posMod(n + delta, M) * L + l) << "delta " << delta;
    }
    EXPECT_TRUE(throwsReason([&] { t.checkRank(-1); }, Reason::kBadTopology));
    EXPECT_TRUE(throwsReason([&] { t.checkRank(M * L); }, Reason::kBadTopology));
  }
}

TEST(Topology, RejectsBadShapes) {
  for (auto [m, l] : std::vector<std::pair<int, int>>{{0, 1}, {-1, 8}, {0, 0}, {1, 0}, {1, -2}, {1, 9},
                                                      {4, 16}, {-5, 9}}) {
    SCOPED_TRACE("M=" + std::to_string(m) + " L=" + std::to_string(l));
    EXPECT_TRUE(throwsReason([&] { Topology::make(m, l); }, Reason::kBadTopology));
  }
  EXPECT_NO_THROW(Topology::make(1, 1));
  EXPECT_NO_THROW(Topology::make(1024, 8));
  EXPECT_NO_THROW(Topology::make(3, 5));
}

TEST(Names, DtypesModesReasons) {
  EXPECT_EQ(parseDtype("bf16"), DType::kBF16);
  EXPECT_EQ(parseDtype("fp32"), DType::kFP32);
  EXPECT_EQ(itemSize(DType::kBF16), 2);
  EXPECT_EQ(itemSize(DType::kFP32), 4);
  EXPECT_STREQ(dtypeName(DType::kBF16), "bf16");
  EXPECT_STREQ(dtypeName(DType::kFP32), "fp32");
  EXPECT_TRUE(throwsReason([] { parseDtype("fp16"); }, Reason::kUnsupportedDtype));
  EXPECT_TRUE(throwsReason([] { parseDtype(""); }, Reason::kUnsupportedDtype));
  EXPECT_EQ(parseMode("in-place"), Mode::kInPlace);
  EXPECT_EQ(parseMode("slot-reuse"), Mode::kSlotReuse);
  EXPECT_EQ(parseMode(modeName(Mode::kInPlace)), Mode::kInPlace);
  EXPECT_EQ(parseMode(modeName(Mode::kSlotReuse)), Mode::kSlotReuse);
  EXPECT_ANY_THROW(parseMode("sideways"));
  // Reason names are what the adapter logs: non-empty and distinct.
  std::vector<std::string> names;
  for (int r = 0; r <= static_cast<int>(Reason::kTooLarge); ++r) {  // the enum's last
    const char* n = reasonName(static_cast<Reason>(r));
    ASSERT_NE(n, nullptr);
    EXPECT_GT(std::string(n).size(), 0u);
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end()) << "duplicate reason names";
  // Region names are distinct too (they appear in printed plans).
  std::vector<std::string> regions;
  for (int r = 0; r <= static_cast<int>(Region::kOutput); ++r) regions.push_back(regionName(static_cast<Region>(r)));
  std::sort(regions.begin(), regions.end());
  EXPECT_EQ(std::adjacent_find(regions.begin(), regions.end()), regions.end());
}

// R_p, s_p, o_p, S, out offsets and validRows against an independent
// computation of Sec. 2.1 and of FSDP2's torch.chunk padding.
TEST(Layout, MatchesSection21AndFsdp2Padding) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 300; ++trial) {
    const int M = rng.coin(0.8) ? rng.irange(1, 16) : rng.irange(17, 1024);
    const int L = rng.irange(1, 8);
    const int N = M * L;
    const DType dt = rng.coin() ? DType::kBF16 : DType::kFP32;
    const DType gdt = rng.coin() ? DType::kBF16 : DType::kFP32;
    const int P = rng.coin(0.9) ? rng.irange(1, 12) : rng.irange(13, kMaxParams);
    auto specs = randomSpecs(rng, P, N, 4, 9, rng.irange(1, 4), dt);
    SCOPED_TRACE("trial " + std::to_string(trial) + " M=" + std::to_string(M) + " L=" +
                 std::to_string(L) + " grad " + dtypeName(gdt) + " shapes " + shapesToString(specs));
    ASSERT_EQ(checkGroup(specs), Reason::kOk);
    const GroupLayout g = makeGroupLayout(Topology::make(M, L), specs, gdt);
    const RefLayout ref = refLayout(M, L, specs);

    ASSERT_EQ(g.topo.nodes, M);
    ASSERT_EQ(g.topo.gpusPerNode, L);
    EXPECT_EQ(g.agDtype, dt);
    EXPECT_EQ(g.gradDtype, gdt);
    ASSERT_EQ(g.params.size(), specs.size());
    for (int p = 0; p < P; ++p) {
      const ParamLayout& pl = g.params[static_cast<size_t>(p)];
      const RefParam& rp = ref.p[static_cast<size_t>(p)];
      SCOPED_TRACE("param " + std::to_string(p));
      EXPECT_EQ(pl.rows, rp.D);
      EXPECT_EQ(pl.rowElems, rp.K);
      EXPECT_EQ(pl.shardRows, rp.R);
      EXPECT_EQ(pl.shardBytes, rp.s);
      EXPECT_EQ(pl.shardOffset, rp.o);
      EXPECT_EQ(pl.outElems, rp.outElems);
      EXPECT_EQ(pl.outOffset, rp.outOffset);
      // FSDP2's padded shard is chunks[0]: R_p rows, padding at the tail only.
      const std::vector<int64_t> chunk = torchChunkRows(rp.D, N);
      EXPECT_EQ(pl.shardRows, chunk[0]);
      int64_t sum = 0;
      for (int r = 0; r < N; ++r) {
        ASSERT_EQ(pl.validRows(r), chunk[static_cast<size_t>(r)]) << "rank " << r;
        sum += pl.validRows(r);
      }
      EXPECT_EQ(sum, rp.D);
      // Padding only at the tail: valid rows never increase with the rank.
      for (int r = 1; r < N; ++r) ASSERT_LE(pl.validRows(r), pl.validRows(r - 1));
    }
    EXPECT_EQ(g.shardBytes, ref.S);
    EXPECT_EQ(g.outElems, ref.E);
    EXPECT_EQ(g.unshardedBytes(), ref.S * N);
    EXPECT_EQ(g.outBytes(), ref.E * 4);
    EXPECT_EQ(g.gradShardBytes(), ref.E * refItemSize(gdt));
  }
}

// Landing(p, r) = o_p N + r s_p is a bijection onto [0, N S): mark every
// byte; each must be hit exactly once. Also, element (row, col) of p's
// unsharded (padded) view sits at o_p N + (row K_p + col) b: parameter-major.
TEST(Layout, LandingIsABijection) {
  TIDE_SEEDED_RNG(rng);
  for (int trial = 0; trial < 150; ++trial) {
    const int M = rng.irange(1, 12), L = rng.irange(1, 8);
    const int N = M * L;
    const DType dt = rng.coin() ? DType::kBF16 : DType::kFP32;
    const int P = rng.irange(1, 10);
    auto specs = randomSpecs(rng, P, N, 3, 6, 3, dt);
    SCOPED_TRACE("trial " + std::to_string(trial) + " M=" + std::to_string(M) + " L=" +
                 std::to_string(L) + " shapes " + shapesToString(specs));
    const GroupLayout g = makeGroupLayout(Topology::make(M, L), specs, DType::kBF16);
    const RefLayout ref = refLayout(M, L, specs);
    const int64_t total = ref.S * N;
    ASSERT_EQ(g.unshardedBytes(), total);
    std::vector<uint8_t> hits(static_cast<size_t>(total), 0);
    for (int p = 0; p < P; ++p) {
      const RefParam& rp = ref.p[static_cast<size_t>(p)];
      for (int r = 0; r < N; ++r) {
        const int64_t at = g.landing(p, r);
        ASSERT_EQ(at, rp.o * N + int64_t{r} * rp.s) << "p " << p << " r " << r;
        ASSERT_GE(at, 0);
        ASSERT_LE(at + rp.s, total);
        for (int64_t x = 0; x < rp.s; ++x) ++hits[static_cast<size_t>(at + x)];
        // Rank r's shard holds rows [r R_p, (r+1) R_p) of p's padded view.
        for (int64_t i = 0; i < rp.R; ++i) {
          const int64_t row = int64_t{r} * rp.R + i;
          ASSERT_EQ(at + i * rp.K * ref.bAg, rp.o * N + row * rp.K * ref.bAg);
        }
      }
    }
    for (int64_t x = 0; x < total; ++x)
      ASSERT_EQ(hits[static_cast<size_t>(x)], 1) << "landing byte " << x << " hit "
                                                   << int(hits[static_cast<size_t>(x)]) << " times";
  }
}

TEST(Layout, RanksOutsideTheTopologyAreRefused) {
  const GroupLayout g = makeGroupLayout(Topology::make(2, 2), {{{10, 3}, DType::kBF16}}, DType::kBF16);
  EXPECT_EQ(g.params[0].validRows(3), 1);  // rows 9..11 of 10: one holds data
  EXPECT_TRUE(throwsReason([&] { (void)g.params[0].validRows(-1); }, Reason::kBadTopology));
  EXPECT_TRUE(throwsReason([&] { (void)g.landing(0, -1); }, Reason::kBadTopology));
  EXPECT_TRUE(throwsReason([&] { (void)g.landing(0, 4); }, Reason::kBadTopology));
  EXPECT_EQ(g.landing(0, 3), 3 * g.params[0].shardBytes);
  // A parameter index outside the group is a PlanError too, not std::out_of_range.
  EXPECT_TRUE(throwsReason([&] { (void)g.landing(-1, 0); }, Reason::kBadOption));
  EXPECT_TRUE(throwsReason([&] { (void)g.landing(1, 0); }, Reason::kBadOption));
}

TEST(Layout, ContractRejections) {
  const Topology t = Topology::make(2, 4);
  auto expectReason = [&](const std::vector<ParamSpec>& specs, Reason want, const char* what) {
    SCOPED_TRACE(what);
    std::string detail;
    EXPECT_EQ(checkGroup(specs, &detail), want) << reasonName(checkGroup(specs));
    if (want != Reason::kOk && want != Reason::kEmptyGroup && want != Reason::kTooManyParams) {
      EXPECT_FALSE(detail.empty()) << "detail should name the parameter";
    }
    if (want == Reason::kOk) {
      EXPECT_NO_THROW(makeGroupLayout(t, specs, DType::kBF16));
    } else {
      EXPECT_TRUE(throwsReason([&] { makeGroupLayout(t, specs, DType::kBF16); }, want));
    }
  };
  const ParamSpec ok{{16, 4}, DType::kBF16};
  expectReason({}, Reason::kEmptyGroup, "empty group");
  expectReason(std::vector<ParamSpec>(256, ok), Reason::kOk, "256 params");
  expectReason(std::vector<ParamSpec>(257, ok), Reason::kTooManyParams, "257 params");
  expectReason({ok, ParamSpec{{8}, DType::kFP32}}, Reason::kMixedDtypes, "mixed dtypes");
  expectReason({ParamSpec{{8}, DType::kFP32}, ok}, Reason::kMixedDtypes, "mixed dtypes (fp32 first)");
  expectReason({ok, ParamSpec{{}, DType::kBF16}}, Reason::kZeroDimTensor, "0-d tensor");
  expectReason({ParamSpec{{0, 4}, DType::kBF16}}, Reason::kEmptyParam, "zero rows");
  expectReason({ok, ParamSpec{{4, 0}, DType::kBF16}}, Reason::kEmptyParam, "zero columns");
  expectReason({ok, ParamSpec{{4, 3, 0, 2}, DType::kBF16}}, Reason::kEmptyParam, "zero inner dim");
  expectReason({ParamSpec{{int64_t{1} << 40, 2, 0}, DType::kBF16}}, Reason::kEmptyParam, "empty despite a huge extent");
  expectReason({ParamSpec{{1}, DType::kFP32}}, Reason::kOk, "one fp32 element");
  expectReason({ParamSpec{{3, 1, 1, 5}, DType::kBF16}}, Reason::kOk, "4-d");
}

}  // namespace
}  // namespace tide_test
