// The communicator's issue, on an endpoint that only records what is issued
// and keeps the event window as both fabrics keep it (Endpoint::kEventWindow):
// both collectives at the largest topology a communicator takes (kMaxNodes
// nodes), where running them on the host fabric would need gigabytes of
// scratch, wait on no event recycled before the wait is issued; a scratch
// layout with no staging slot is refused.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/counter_ids.hpp"
#include "collectives/scratch_layout.hpp"
#include "tide/fabric.hpp"
#include "tide/plan.hpp"

namespace tide {
namespace {

using fabric::FabricError;

// Issue-only: every op is accepted and dropped; record() numbers events over
// the whole endpoint, and waitEvent() refuses one older than the window, as
// the host fabric's check and the CUDA fabric's event ring do.
class IssueOnlyEndpoint final : public fabric::Endpoint {
 public:
  IssueOnlyEndpoint(plan::Topology topo, int rank, int64_t arenaBytes)
      : topo_(topo), rank_(rank), arena_(static_cast<size_t>(arenaBytes)), peer_(static_cast<size_t>(arenaBytes)) {}

  int rank() const override { return rank_; }
  const plan::Topology& topology() const override { return topo_; }
  std::byte* arena() override { return arena_.data(); }
  int64_t arenaBytes() const override { return static_cast<int64_t>(arena_.size()); }
  std::byte* peerArena(int) override { return peer_.data(); }
  bool railsByCopy() const override { return true; }
  std::string railsDescription() const override { return "issue only"; }
  int numQueues() const override { return collectives::kQueuesNeeded; }
  void setCallContext(const std::string&) override {}
  void copy(int, const std::vector<fabric::CopyOp>&) override {}
  void sum(int, const fabric::SumOp&) override {}
  void land(int, const fabric::LandOp&) override {}
  void zero(int, void*, int64_t) override {}
  void railPut(int, int, int64_t, const void*, int64_t, int, uint64_t) override {}
  void signal(int, int, int, uint64_t) override {}
  void wait(int, int, uint64_t, int, const char*) override {}
  uint64_t record(int q) override {
    queueOf_.push_back(q);
    return queueOf_.size();  // 1-based: 0 is "no event"
  }
  bool eventLive(int q, uint64_t event) const override {
    if (event == 0) return true;
    return event <= queueOf_.size() && queueOf_[event - 1] == q && event + kEventWindow > queueOf_.size();
  }
  void waitEvent(int, int srcQueue, uint64_t event) override {
    if (!eventLive(srcQueue, event))
      throw FabricError(FabricError::Kind::kUsage, "event " + std::to_string(event) + " of queue " +
                                                       std::to_string(srcQueue) + " waited on after " +
                                                       std::to_string(queueOf_.size() - event) + " later events");
  }
  void synchronize(int) override {}
  void synchronizeAll() override {}
  void synchronizeEvent(int, uint64_t) override {}
  uint64_t counterValue(int) override { return 0; }
  void delay(int, double) override {}
  fabric::Stats stats() const override { return {}; }
  void resetStats() override {}
  void setFabricFaults(const fabric::FabricFaults&) override {}

 private:
  plan::Topology topo_;
  int rank_;
  std::vector<std::byte> arena_, peer_;
  std::vector<int> queueOf_;  // by event - 1
};

struct ScaleCase {
  int gpusPerNode;
  plan::Mode mode;
  int passes;
  bool landingOwnQueue;
};

std::string caseName(const ScaleCase& c) {
  std::string name = "L";
  name += std::to_string(c.gpusPerNode);
  name += c.mode == plan::Mode::kInPlace ? "_InPlace_passes" : "_SlotReuse_passes";
  name += std::to_string(c.passes);
  name += c.landingOwnQueue ? "_landOwnQueue" : "_landBehindSends";
  return name;
}

class IssueAtMaxNodes : public ::testing::TestWithParam<ScaleCase> {};

// Two calls of each collective, so that the second finds the first's events
// in the window too.
TEST_P(IssueAtMaxNodes, NoCallWaitsOnARecycledEvent) {
  const ScaleCase c = GetParam();
  const plan::Topology topo = plan::Topology::make(collectives::ids::kMaxNodes, c.gpusPerNode);
  plan::PlanOptions options;
  options.rs.mode = c.mode;
  options.rs.passes = c.passes;
  const std::vector<plan::ParamSpec> specs = {{{int64_t{3} * topo.ranks(), 4}, plan::DType::kBF16}};
  const plan::Plan pl = plan::makePlan(topo, specs, plan::DType::kBF16, options);
  // The landing at the arena's start, the scratch after it.
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&pl}, pl.group.unshardedBytes());
  for (const int rank : {0, topo.ranks() - 1}) {
    IssueOnlyEndpoint ep(topo, rank, layout.end());
    collectives::IssueOptions issue;
    issue.landingOwnQueue = c.landingOwnQueue;
    collectives::Communicator comm(ep, layout, {}, issue);
    std::vector<std::vector<uint16_t>> grads;
    std::vector<const void*> gradPtrs;
    for (const auto& p : pl.group.params) {
      grads.emplace_back(static_cast<size_t>(p.rows * p.rowElems));
      gradPtrs.push_back(grads.back().data());
    }
    std::vector<uint16_t> shard(static_cast<size_t>(pl.group.shardBytes / 2));
    std::vector<float> out(static_cast<size_t>(pl.group.outElems));
    for (int call = 0; call < 2; ++call) {
      EXPECT_NO_THROW(comm.allGather(pl, shard.data(), 0)) << "rank " << rank << ", call " << call;
      EXPECT_NO_THROW(comm.reduceScatter(pl, gradPtrs, out.data(), 1.0f, false))
          << "rank " << rank << ", call " << call;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, IssueAtMaxNodes,
    ::testing::Values(ScaleCase{1, plan::Mode::kInPlace, 1, true}, ScaleCase{1, plan::Mode::kInPlace, 3, true},
                      ScaleCase{2, plan::Mode::kInPlace, 1, true}, ScaleCase{2, plan::Mode::kInPlace, 3, false},
                      ScaleCase{1, plan::Mode::kSlotReuse, 1, true}, ScaleCase{2, plan::Mode::kSlotReuse, 3, true}),
    [](const auto& param_info) { return caseName(param_info.param); });

// A layout not made by forPlans has no staging slot, and the slot of a chunk
// is its number modulo the slot count: refused when the communicator is made.
TEST(IssueOnly, ScratchLayoutWithoutStagingSlotsIsRefused) {
  const plan::Topology topo = plan::Topology::make(1, 2);
  const plan::Plan pl = plan::makePlan(topo, {{{64, 8}, plan::DType::kBF16}}, plan::DType::kBF16);
  collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&pl});
  IssueOnlyEndpoint ep(topo, 0, layout.end() + pl.group.unshardedBytes());
  EXPECT_NO_THROW(collectives::Communicator(ep, layout));
  layout.stagingSlots = 0;
  try {
    collectives::Communicator comm(ep, layout);
    FAIL() << "a scratch layout without staging slots was taken";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kUsage);
    EXPECT_NE(std::string(e.what()).find("staging slot"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tide
