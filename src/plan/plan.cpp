// A whole plan: layout, both schedules, descriptor counts and memory.
#include <algorithm>

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

// Level 1 descriptor counts per call, maximised over every sender rank (the
// tail padding and the sub-slice rotation make them differ). Counts per
// (destination block, sub-slice) are computed once, then summed per rank.
void countLevel1Descriptors(const GroupLayout& g, RsPlan& rs) {
  const int m = g.topo.nodes;
  const int l = g.topo.gpusPerNode;
  rs.level1Descriptors = rs.level1DescriptorsFlat = 0;
  if (l == 1) return;  // nobody to push to
  // cnt[(q * blocks + block) * L + s] for the owner's rows of that block.
  const int blocks = m > 1 ? m : l;  // destination nodes, or single-node owners
  std::vector<std::pair<int64_t, int64_t>> cnt(static_cast<size_t>(rs.passes) * blocks * l);
  for (int q = 0; q < rs.passes; ++q)
    for (int b = 0; b < blocks; ++b)
      for (int s = 0; s < l; ++s)
        cnt[(static_cast<size_t>(q) * blocks + b) * l + s] =
            m > 1 ? pushCount(g, subSliceRange(g, rs, q, s), g.topo.rankOf(b, 0), l)
                  : pushCount(g, subSliceRange(g, rs, q, s), b, 1);
  for (int n = 0; n < m; ++n) {
    for (int u = 0; u < l; ++u) {
      int64_t co = 0, fl = 0;
      for (int q = 0; q < rs.passes; ++q) {
        if (m > 1) {
          for (int t = 0; t < m; ++t)
            for (int j = 0; j < l; ++j) {
              if (j == u) continue;
              const int s = subSlice(j, contributorIndex(t, n, m), m, l);
              const auto& c = cnt[(static_cast<size_t>(q) * blocks + t) * l + s];
              co += c.first;
              fl += c.second;
            }
        } else {
          for (int s = 0; s < l; ++s)
            for (int owner = 0; owner < l; ++owner) {
              if (owner == u) continue;
              const auto& c = cnt[(static_cast<size_t>(q) * blocks + owner) * l + s];
              co += c.first;
              fl += c.second;
            }
        }
      }
      rs.level1Descriptors = std::max(rs.level1Descriptors, co);
      rs.level1DescriptorsFlat = std::max(rs.level1DescriptorsFlat, fl);
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
