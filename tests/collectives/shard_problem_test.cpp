// Communicator::shardProblem: which shard pointers TIDE-AG refuses before any
// exchange; and Communicator::reduceScatterBufferProblem, the same for TIDE-RS's
// gradients and output (at the end). A shard that shares no byte with the arena is the caller's own
// memory wherever it sits; one that shares some must lie inside the arena and
// outside this call's landing. Found by a TSan run (session 37), where the
// arena and a test's shard vector came out adjacent and a shard starting
// exactly at the arena's end was refused.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/scratch_layout.hpp"
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


// TIDE-RS: gradients and output may sit outside the arena or in its user area, never across one
// of its edges or in the scratch, which the call rewrites while it reads the gradients (a
// probe in session 43 put one rank's output there: the other ranks' outputs came out wrong,
// and every call returned success).
struct ReduceScatterMemory {
  // Two nodes of two GPUs: a scratch with staging and blocks (one GPU alone needs none).
  plan::Plan plan = plan::makePlan(plan::Topology::make(2, 2), {{{64, 64}, plan::DType::kFP32}}, plan::DType::kFP32);
  int64_t gradBytes = plan.group.params[0].rows * plan.group.params[0].rowElems * 4;  // fp32
  int64_t outBytes = plan.group.outBytes();
  int64_t userBytes = 2 * (gradBytes + outBytes);
  ScratchLayout layout = ScratchLayout::forPlans({&plan}, userBytes);
  Memory memory{gradBytes, userBytes + layout.bytes, gradBytes};

  std::string problem(int64_t gradAt, int64_t outAt, bool withLayout = true) const {
    const std::vector<const void*> grads = {memory.arena() + gradAt};
    const auto* out = reinterpret_cast<const float*>(memory.arena() + outAt);
    return Communicator::reduceScatterBufferProblem(plan.group, grads, out, memory.arena(), memory.arenaBytes,
                                                    withLayout ? &layout : nullptr);
  }
};

// The collectives' scratch is rewritten by every call: a shard there is refused as one in the
// landing is (the tests above pass no layout, so only this one reaches that check).
TEST(ShardProblem, ShardsInTheScratchAreRefused) {
  const ReduceScatterMemory m;
  const plan::GroupLayout& g = m.plan.group;
  const int64_t s = g.shardBytes;
  ASSERT_GT(m.layout.bytes, 0);
  ASSERT_GE(m.layout.base - s, g.unshardedBytes()) << "the user area holds the landing and a shard after it";
  const auto problem = [&](int64_t shardAt) {
    return Communicator::shardProblem(g, m.memory.arena() + shardAt, 0, m.memory.arena(), m.memory.arenaBytes,
                                      &m.layout);
  };
  const std::string want = "the shard overlaps the collectives' scratch";
  EXPECT_EQ(problem(m.layout.base).rfind(want, 0), 0u) << problem(m.layout.base);
  EXPECT_EQ(problem(m.layout.base - s + 1).rfind(want, 0), 0u) << "its last byte in the scratch";
  EXPECT_EQ(problem(m.layout.end() - s).rfind(want, 0), 0u) << "at the scratch's end";
  EXPECT_EQ(problem(m.layout.base - s), "") << "ending where the scratch starts";
}

TEST(ReduceScatterBufferProblem, BuffersOutsideTheArenaOrInItsUserAreaServe) {
  const ReduceScatterMemory m;
  const int64_t end = m.memory.arenaBytes;
  EXPECT_EQ(m.problem(-m.gradBytes, end), "") << "ending where the arena starts; starting where it ends";
  EXPECT_EQ(m.problem(0, m.gradBytes), "") << "both in the user area";
}

// The sums write the output while the gradients are still read (Level 1 pushes, rail sends): an
// output sharing a byte with any gradient is refused, wherever the two lie, naming the parameter.
TEST(ReduceScatterBufferProblem, AnOutputOverAGradientIsRefused) {
  const ReduceScatterMemory m;
  const std::string want = "out overlaps the gradient of parameter 0";
  EXPECT_EQ(m.problem(0, 0).rfind(want, 0), 0u) << m.problem(0, 0);
  EXPECT_EQ(m.problem(0, m.gradBytes - 4).rfind(want, 0), 0u) << "the output's first element on the gradient's last";
  EXPECT_EQ(m.problem(m.outBytes - 4, 0).rfind(want, 0), 0u) << "the gradient's first element on the output's last";
  EXPECT_EQ(m.problem(m.outBytes, 0), "") << "the gradient right after the output";
  EXPECT_EQ(m.problem(0, m.gradBytes), "") << "the output right after the gradient";
  // Outside the arena too (the caller's own memory): NCCL's in-place convention, the output on this
  // rank's rows of its gradient, is refused like any other overlap.
  std::vector<float> host(static_cast<size_t>(m.gradBytes / 4));
  const std::vector<const void*> grads = {host.data()};
  for (const int64_t at : {int64_t{0}, m.gradBytes / 4 - m.outBytes / 4}) {
    const std::string why = Communicator::reduceScatterBufferProblem(
        m.plan.group, grads, host.data() + at, m.memory.arena(), m.memory.arenaBytes, &m.layout);
    EXPECT_EQ(why.rfind(want, 0), 0u) << "output at element " << at << ": " << why;
  }
  // Parameter 1 of two, with parameter 0's gradient elsewhere.
  const plan::Plan two =
      plan::makePlan(plan::Topology::make(2, 2), {{{64, 64}, plan::DType::kFP32}, {{32}, plan::DType::kFP32}},
                     plan::DType::kFP32);
  std::vector<float> g0(64 * 64), g1(32);
  std::vector<float> out(static_cast<size_t>(two.group.outBytes() / 4));
  const std::vector<const void*> twoGrads = {g0.data(), g1.data()};
  EXPECT_EQ(Communicator::reduceScatterBufferProblem(two.group, twoGrads, out.data(), m.memory.arena(),
                                                     m.memory.arenaBytes, nullptr),
            "");
  const std::vector<const void*> onOut = {g0.data(), out.data() + 1};
  EXPECT_EQ(Communicator::reduceScatterBufferProblem(two.group, onOut, out.data(), m.memory.arena(),
                                                     m.memory.arenaBytes, nullptr)
                .rfind("out overlaps the gradient of parameter 1", 0),
            0u);
}

TEST(ReduceScatterBufferProblem, BuffersAcrossAnEdgeOfTheArenaAreRefused) {
  const ReduceScatterMemory m;
  const int64_t end = m.memory.arenaBytes;
  EXPECT_EQ(m.problem(0, end - 4), "out starts inside the arena and runs past its end");
  EXPECT_EQ(m.problem(-m.gradBytes + 4, 0), "the gradient of parameter 0 starts before the arena and runs into it");
}

TEST(ReduceScatterBufferProblem, BuffersMeetingTheScratchAreRefused) {
  const ReduceScatterMemory m;
  const int64_t base = m.layout.base;
  ASSERT_GT(m.layout.bytes, m.gradBytes);
  EXPECT_NE(m.problem(0, base).find("out overlaps the collectives' scratch"), std::string::npos);
  EXPECT_NE(m.problem(0, base - 4).find("out overlaps the collectives' scratch"), std::string::npos)
      << "the output's last element in the scratch's first bytes";
  EXPECT_NE(m.problem(base + m.layout.bytes - m.gradBytes, 0).find("the gradient of parameter 0 overlaps"),
            std::string::npos);
  EXPECT_EQ(m.problem(base, 0, /*withLayout=*/false), "") << "no scratch yet: nothing to meet";
}

}  // namespace
}  // namespace tide::collectives
