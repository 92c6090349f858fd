// A whole plan: layout, both schedules, descriptor counts and memory.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tide/plan.hpp"

namespace tide::plan {
namespace {

using Counts = std::pair<int64_t, int64_t>;  // (coalesced, flat)

// Copies one sender pushes to one owner for destination ranks
// [firstRank, firstRank + rows) over `range`: per parameter piece, the full
// rows (one strided copy when coalesced) plus a short tail row.
Counts pushCount(const GroupLayout& g, ElemRange range, int firstRank, int rows) {
  int64_t coalesced = 0, flat = 0;
  for (const ParamLayout& pl : g.params) {
    const int64_t a = std::max(range.begin, pl.outOffset);
    const int64_t e = std::min(range.end, pl.outOffset + pl.outElems);
    if (a >= e) continue;
    int64_t full = 0, partial = 0;
    for (int i = 0; i < rows; ++i) {
      const int64_t start = int64_t{firstRank + i} * pl.outElems + (a - pl.outOffset);
      const int64_t valid = std::clamp<int64_t>(pl.rows * pl.rowElems - start, 0, e - a);
      if (valid == e - a) ++full;
      else if (valid > 0) ++partial;
    }
    coalesced += (full > 1 ? 1 : full) + partial;
    flat += full + partial;
  }
  return {coalesced, flat};
}

void add(Counts& a, const Counts& b) {
  a.first += b.first;
  a.second += b.second;
}

// How many k in [lo, hi] (0 <= lo, hi < lo allowed: none) have k mod l == r.
int64_t countResidue(int64_t lo, int64_t hi, int r, int l) {
  auto upTo = [r, l](int64_t z) -> int64_t { return z < r ? 0 : (z - r) / l + 1; };
  return hi < lo ? 0 : upTo(hi) - upTo(lo - 1);
}

// Level 1 descriptor counts per call, maximised over every sender rank (the
// tail padding and the sub-slice rotation make them differ).
//
// Across nodes (M > 1), sender (n, u) pushes, for every destination node t
// and every owner j != u, sub-slice s = (j + d) mod L with d = c(t, n) mod M
// (Eq. 6), i.e. d = (t - n) mod M (t = n too: c = M there). As j runs over
// the L - 1 owners, s runs over every sub-slice but (u + d) mod L, so the
// sender's count is the sum of all of node t's counts less that one
// sub-slice's. Consecutive destination nodes mostly have equal counts: a
// parameter with fewer rows than ranks ends inside one node, so there are at
// most 2P + 1 runs of equal nodes, and over a run of nodes d takes a
// contiguous (cyclic) range of values, whose residues mod L are counted in
// O(1). That is O(M runs L^2) instead of O(M^2 L^2 passes), which took
// minutes at M in the tens of thousands.
void countLevel1Descriptors(const GroupLayout& g, RsPlan& rs) {
  const int m = g.topo.nodes;
  const int l = g.topo.gpusPerNode;
  rs.level1Descriptors = rs.level1DescriptorsFlat = 0;
  if (l == 1) return;  // nobody to push to
  auto keepMax = [&rs](const Counts& c) {
    rs.level1Descriptors = std::max(rs.level1Descriptors, c.first);
    rs.level1DescriptorsFlat = std::max(rs.level1DescriptorsFlat, c.second);
  };
  if (m == 1) {
    // One node: owner j's rows of chunk s, from every sender u != j.
    std::vector<Counts> cnt(static_cast<size_t>(l) * l);  // cnt[owner * L + s], summed over passes
    for (int q = 0; q < rs.passes; ++q)
      for (int owner = 0; owner < l; ++owner)
        for (int s = 0; s < l; ++s)
          add(cnt[static_cast<size_t>(owner) * l + s], pushCount(g, subSliceRange(g, rs, q, s), owner, 1));
    for (int u = 0; u < l; ++u) {
      Counts c{};
      for (int owner = 0; owner < l; ++owner)
        if (owner != u)
          for (int s = 0; s < l; ++s) add(c, cnt[static_cast<size_t>(owner) * l + s]);
      keepMax(c);
    }
    return;
  }
  // w[t * L + s]: node t's L rows of sub-slice s, summed over passes; `all` over every t and s.
  std::vector<Counts> w(static_cast<size_t>(m) * l);
  Counts all{};
  for (int q = 0; q < rs.passes; ++q)
    for (int s = 0; s < l; ++s) {
      const ElemRange range = subSliceRange(g, rs, q, s);
      for (int t = 0; t < m; ++t) {
        const Counts c = pushCount(g, range, g.topo.rankOf(t, 0), l);
        add(w[static_cast<size_t>(t) * l + s], c);
        add(all, c);
      }
    }
  auto at = [&w, l](int t, int s) { return w[static_cast<size_t>(t) * l + static_cast<size_t>(s)]; };
  struct Run {
    int first = 0;
    int count = 0;
  };
  std::vector<Run> runs;
  for (int t = 0; t < m; ++t) {
    const bool same = t > 0 && std::equal(w.begin() + static_cast<std::ptrdiff_t>(t) * l,
                                          w.begin() + static_cast<std::ptrdiff_t>(t + 1) * l,
                                          w.begin() + static_cast<std::ptrdiff_t>(t - 1) * l);
    if (same) {
      ++runs.back().count;
    } else {
      runs.push_back({t, 1});
    }
  }
  std::vector<int64_t> residues(static_cast<size_t>(l));
  std::vector<Counts> skipped(static_cast<size_t>(l));  // per u: the sub-slices no owner takes
  for (int n = 0; n < m; ++n) {
    std::fill(skipped.begin(), skipped.end(), Counts{});
    for (const Run& run : runs) {
      // d = (t - n) mod M over the run: from lo, `count` values, wrapping past M - 1 to 0.
      const int64_t lo = ((run.first - n) % m + m) % m;
      const int64_t hi = lo + run.count - 1;
      for (int r = 0; r < l; ++r)
        residues[static_cast<size_t>(r)] =
            countResidue(lo, std::min<int64_t>(hi, m - 1), r, l) + countResidue(0, hi - m, r, l);
      for (int u = 0; u < l; ++u)
        for (int r = 0; r < l; ++r) {
          const Counts c = at(run.first, (u + r) % l);
          skipped[static_cast<size_t>(u)].first += residues[static_cast<size_t>(r)] * c.first;
          skipped[static_cast<size_t>(u)].second += residues[static_cast<size_t>(r)] * c.second;
        }
    }
    for (int u = 0; u < l; ++u)
      keepMax({all.first - skipped[static_cast<size_t>(u)].first, all.second - skipped[static_cast<size_t>(u)].second});
    if (runs.size() == 1) break;  // every destination node alike: every sender node too
  }
}

}  // namespace

Plan makePlan(const Topology& topo, const std::vector<ParamSpec>& specs, DType gradDtype,
              const PlanOptions& opt) {
  Plan plan;
  plan.group = makeGroupLayout(topo, specs, gradDtype);
  plan.ag = makeAgPlan(plan.group, opt.ag);
  plan.rs = makeRsPlan(plan.group, opt.rs);
  countLevel1Descriptors(plan.group, plan.rs);
  plan.memory = memoryModel(plan.group.topo.nodes, plan.group.topo.gpusPerNode, plan.rs.bufferGenerations, plan.rs.roundWidth,
                            plan.rs.stagingSlots, plan.rs.mode, itemSize(plan.group.gradDtype), plan.rs.landing,
                            itemSize(plan.group.agDtype), plan.rs.railLane, plan.ag.railLane, plan.rs.passes);
  // The closed form counts a sub-chunk as E / (L * passes) elements; the plan
  // rounds it up to a multiple of 8 (reduce_scatter_plan.cpp), up to 7 more
  // elements per staging row and block.
  const double ns = static_cast<double>(plan.group.unshardedBytes());
  if (ns > 0) {
    const double staged = static_cast<double>(plan.rs.stagingBytes) / ns;
    plan.memory.stagingRounding = std::max(0.0, staged - plan.memory.rsAreaBound);
    plan.memory.rsAreaBound += plan.memory.stagingRounding;
    plan.memory.tideLive += plan.memory.stagingRounding;
  }
  return plan;
}

}  // namespace tide::plan
