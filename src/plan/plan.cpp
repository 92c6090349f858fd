// A whole plan: layout, both schedules, descriptor counts and memory.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "tide/plan.hpp"

namespace tide::plan {
namespace {

// Copies one sender pushes to one owner for destination ranks
// [firstRank, firstRank + rows) over `range`: per parameter piece, the full
// rows (one strided copy when coalesced) plus a short tail row.
std::pair<int64_t, int64_t> pushCount(const GroupLayout& g, ElemRange range, int firstRank, int rows) {
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

using Counts = std::pair<int64_t, int64_t>;  // (coalesced, flat)

void add(Counts& a, const Counts& b) {
  a.first += b.first;
  a.second += b.second;
}

// Level 1 descriptor counts per call, maximised over every sender rank (the
// tail padding and the sub-slice rotation make them differ).
//
// Across nodes (M > 1), sender (n, u) pushes, for every destination node t
// and every owner j != u, sub-slice s = (j + d) mod L with d = c(t, n) mod M
// (Eq. 6; d = 0 for t = n). As j runs over the L - 1 owners, s runs over
// every sub-slice but (u + d) mod L, so the sender's count is the sum of all
// of node t's counts less that one sub-slice's. Summed over t, the skipped
// sub-slices follow d, whose histogram mod L is the same for every n (t - n
// takes each residue 1..M-1 once). Most nodes have the same counts (only the
// tail padding makes a node differ), so only the nodes that differ are
// visited per sender: O(M L) for uniform layouts instead of O(M^2 L^2 passes)
// (which took minutes at M in the tens of thousands).
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
        for (int s = 0; s < l; ++s) add(cnt[static_cast<size_t>(owner) * l + s], pushCount(g, subSliceRange(g, rs, q, s), owner, 1));
    for (int u = 0; u < l; ++u) {
      Counts c{};
      for (int owner = 0; owner < l; ++owner)
        if (owner != u)
          for (int s = 0; s < l; ++s) add(c, cnt[static_cast<size_t>(owner) * l + s]);
      keepMax(c);
    }
    return;
  }
  // w[t * L + s]: node t's L rows of sub-slice s, summed over passes.
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
  auto row = [&w, l](int t) { return w.begin() + static_cast<std::ptrdiff_t>(t) * l; };
  // The most common row of counts is the reference; the nodes whose rows differ are visited one by one.
  std::vector<int> order(static_cast<size_t>(m));
  for (int t = 0; t < m; ++t) order[static_cast<size_t>(t)] = t;
  auto less = [&](int a, int b) { return std::lexicographical_compare(row(a), row(a) + l, row(b), row(b) + l); };
  auto same = [&](int a, int b) { return std::equal(row(a), row(a) + l, row(b)); };
  std::sort(order.begin(), order.end(), less);
  int ref = order[0];
  for (size_t i = 0, best = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && same(order[i], order[j])) ++j;
    if (j - i > best) {
      best = j - i;
      ref = order[i];
    }
    i = j;
  }
  std::vector<int> differing;
  for (int t = 0; t < m; ++t)
    if (!same(t, ref)) differing.push_back(t);
  // hist[r]: destination nodes whose skipped sub-slice is (u + r) mod L, for any sender node.
  std::vector<int64_t> hist(static_cast<size_t>(l), 0);
  hist[0] = 1;  // t = n
  for (int k = 1; k < m; ++k) ++hist[static_cast<size_t>(k % l)];
  for (int u = 0; u < l; ++u) {
    Counts skippedAtRef{};  // every node as the reference row
    for (int r = 0; r < l; ++r) {
      const Counts c = row(ref)[(u + r) % l];  // (a copy: GCC 13 takes a reference here for a dangling one)
      skippedAtRef.first += hist[static_cast<size_t>(r)] * c.first;
      skippedAtRef.second += hist[static_cast<size_t>(r)] * c.second;
    }
    for (int n = 0; n < m; ++n) {
      Counts skipped = skippedAtRef;
      for (int t : differing) {
        const int d = t == n ? 0 : contributorIndex(t, n, m) % m;
        const int s = (u + d) % l;
        skipped.first += row(t)[s].first - row(ref)[s].first;
        skipped.second += row(t)[s].second - row(ref)[s].second;
      }
      keepMax({all.first - skipped.first, all.second - skipped.second});
      if (differing.empty()) break;  // every sender node alike
    }
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
                            plan.rs.stagingSlots, plan.rs.mode);
  return plan;
}

}  // namespace tide::plan
