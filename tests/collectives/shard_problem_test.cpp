// Communicator::shardProblem: which shard pointers TIDE-AG refuses before any
// exchange. A shard that shares no byte with the arena is the caller's own
// memory wherever it sits; one that shares some must lie inside the arena and
// outside this call's landing. Found by a TSan run (session 37), where the
// arena and a test's shard vector came out adjacent and a shard starting
// exactly at the arena's end was refused.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "tide/plan.hpp"

namespace tide::collectives {
namespace {

plan::Plan oneParamPlan() {
  return plan::makePlan(plan::Topology::make(1, 1), {{{64, 64}, plan::DType::kFP32}}, plan::DType::kFP32);
}

// Storage with `before` bytes, then an arena of `arenaBytes`, then `after` bytes.
struct Memory {
  std::vector<std::byte> bytes;
  int64_t before, arenaBytes;
  Memory(int64_t head, int64_t arena, int64_t tail)
      : bytes(static_cast<size_t>(head + arena + tail)), before(head), arenaBytes(arena) {}
  const std::byte* arena() const { return bytes.data() + before; }
  std::string problem(const plan::Plan& p, int64_t shardAt, int64_t landing) const {
    return Communicator::shardProblem(p.group, arena() + shardAt, landing, arena(), arenaBytes, nullptr);
  }
};

TEST(ShardProblem, ShardsOutsideTheArenaAreTheCallersOwn) {
  const plan::Plan p = oneParamPlan();
  const int64_t s = p.group.shardBytes;
  const Memory m(s, 2 * p.group.unshardedBytes(), s);
  EXPECT_EQ(m.problem(p, m.arenaBytes, 0), "") << "starting exactly where the arena ends";
  EXPECT_EQ(m.problem(p, -s, 0), "") << "ending exactly where the arena starts";
}

TEST(ShardProblem, ShardsAcrossAnEdgeOfTheArenaAreRefused) {
  const plan::Plan p = oneParamPlan();
  const int64_t s = p.group.shardBytes;
  const Memory m(s, 2 * p.group.unshardedBytes(), s);
  EXPECT_EQ(m.problem(p, m.arenaBytes - 1, 0), "the shard starts inside the arena and runs past its end");
  EXPECT_EQ(m.problem(p, -s + 1, 0), "the shard starts before the arena and runs into it");
}

TEST(ShardProblem, ShardsInsideTheArenaMustMissThisCallsLanding) {
  const plan::Plan p = oneParamPlan();
  const int64_t u = p.group.unshardedBytes();
  const Memory m(0, 2 * u, 0);
  EXPECT_EQ(m.problem(p, u, 0), "") << "in the arena, after the landing";
  EXPECT_NE(m.problem(p, u - 1, 0).find("overlaps this call's landing"), std::string::npos);
  EXPECT_NE(m.problem(p, 0, u - p.group.shardBytes).find("overlaps this call's landing"), std::string::npos);
}

TEST(ShardProblem, InPlaceNeedsOneNodeAndNothingElse) {
  const plan::Plan p = oneParamPlan();
  const Memory m(0, p.group.unshardedBytes(), 0);
  EXPECT_EQ(Communicator::shardProblem(p.group, nullptr, 0, m.arena(), m.arenaBytes, nullptr), "");
}

}  // namespace
}  // namespace tide::collectives
