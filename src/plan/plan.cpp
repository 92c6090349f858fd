// A whole plan: layout, both schedules, descriptor counts and memory.
#include <algorithm>

#include "tide/plan.hpp"

namespace tide::plan {

Plan makePlan(const Topology& topo, const std::vector<ParamSpec>& specs, DType gradDtype,
              const PlanOptions& opt) {
  Plan plan;
  plan.group = makeGroupLayout(topo, specs, gradDtype);
  plan.ag = makeAgPlan(plan.group, opt.ag);
  plan.rs = makeRsPlan(plan.group, opt.rs);
  // Level 1 descriptor counts per call, maximised over the local ranks of
  // node 0 (every node sees the same mix of destination nodes).
  const GroupLayout& g = plan.group;
  const int m = g.topo.nodes;
  const int blocks = m > 1 ? m : g.topo.gpusPerNode;
  for (int l = 0; l < g.topo.gpusPerNode; ++l) {
    int64_t coalesced = 0, flat = 0;
    for (int q = 0; q < plan.rs.passes; ++q) {
      for (int blk = 0; blk < blocks; ++blk) {
        coalesced += static_cast<int64_t>(level1Pushes(g, plan.rs, l, q, blk, true).size());
        flat += static_cast<int64_t>(level1Pushes(g, plan.rs, l, q, blk, false).size());
      }
    }
    plan.rs.level1Descriptors = std::max(plan.rs.level1Descriptors, coalesced);
    plan.rs.level1DescriptorsFlat = std::max(plan.rs.level1DescriptorsFlat, flat);
  }
  plan.memory = memoryModel(m, g.topo.gpusPerNode, plan.rs.bufferGenerations, plan.rs.roundWidth,
                            plan.rs.stagingSlots, plan.rs.mode);
  return plan;
}

}  // namespace tide::plan
