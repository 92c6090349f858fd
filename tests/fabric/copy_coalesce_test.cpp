// coalesceCopies against an independent reference: every input copy applied
// one by one to a poisoned byte buffer, then the coalesced ops applied
// (strided ones row by row) to another; the two buffers must match byte for
// byte, and the op count must fall exactly as far as the runs allow.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "fabric/copy_coalesce.hpp"

namespace tide::fabric {
namespace {

struct Buffers {
  explicit Buffers(size_t bytes, unsigned seed) : src(bytes), dst(bytes, std::byte{0xA5}) {
    std::mt19937 rng(seed);
    for (auto& b : src) b = static_cast<std::byte>(rng() & 0xFF);
  }
  std::vector<std::byte> src, dst;
};

CopyOp flatCopy(Buffers& b, int64_t dstOff, int64_t srcOff, int64_t width) {
  CopyOp op;
  op.dst = b.dst.data() + dstOff;
  op.src = b.src.data() + srcOff;
  op.width = width;
  return op;
}

void apply(const std::vector<CopyOp>& ops) {
  for (const CopyOp& op : ops) {
    const int64_t sp = op.rows > 1 ? op.srcPitch : op.width, dp = op.rows > 1 ? op.dstPitch : op.width;
    for (int64_t r = 0; r < op.rows; ++r)
      std::memcpy(static_cast<std::byte*>(op.dst) + r * dp, static_cast<const std::byte*>(op.src) + r * sp,
                  static_cast<size_t>(op.width));
  }
}

// Applies `ops` and their coalesced form to two fresh copies of the buffers;
// returns the coalesced ops after checking the bytes agree.
std::vector<CopyOp> checkSameBytes(const std::vector<CopyOp>& ops, Buffers& base, int64_t maxPitch = kMaxCopyPitch) {
  Buffers other = base;
  std::vector<CopyOp> rebased;
  for (CopyOp op : ops) {  // the same ops on `other`
    op.dst = other.dst.data() + (static_cast<std::byte*>(op.dst) - base.dst.data());
    op.src = other.src.data() + (static_cast<const std::byte*>(op.src) - base.src.data());
    rebased.push_back(op);
  }
  apply(ops);
  const std::vector<CopyOp> merged = coalesceCopies(rebased, maxPitch);
  apply(merged);
  EXPECT_EQ(0, std::memcmp(base.dst.data(), other.dst.data(), base.dst.size()));
  return merged;
}

TEST(CopyCoalesce, EqualParamsIntoParamMajorLandingBecomeOneStridedCopy) {
  // A rank's shard of P equal parameters (contiguous) into a landing where
  // parameter p's N shards lie back to back: rank r writes at p*N*w + r*w.
  const int64_t w = 1000, params = 7, ranks = 4, rank = 2;
  Buffers b(static_cast<size_t>(params * ranks * w), 11);
  std::vector<CopyOp> ops;
  for (int64_t p = 0; p < params; ++p) ops.push_back(flatCopy(b, p * ranks * w + rank * w, p * w, w));
  const auto merged = checkSameBytes(ops, b);
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].rows, params);
  EXPECT_EQ(merged[0].srcPitch, w);
  EXPECT_EQ(merged[0].dstPitch, ranks * w);
}

TEST(CopyCoalesce, BackToBackCopiesBecomeOneFlatCopy) {
  Buffers b(4096, 12);
  std::vector<CopyOp> ops;
  for (int64_t k = 0; k < 5; ++k) ops.push_back(flatCopy(b, 100 + k * 300, 7 + k * 300, 300));
  const auto merged = checkSameBytes(ops, b);
  ASSERT_EQ(merged.size(), 1u);
  EXPECT_EQ(merged[0].rows, 1);
  EXPECT_EQ(merged[0].width, 1500);
}

TEST(CopyCoalesce, RunsBreakAtWidthStrideAndStridedInputs) {
  Buffers b(1 << 16, 13);
  std::vector<CopyOp> ops = {
      flatCopy(b, 0, 0, 100), flatCopy(b, 200, 150, 100), flatCopy(b, 400, 300, 100),  // run of 3
      flatCopy(b, 700, 500, 100),   // stride changes on the destination: new run
      flatCopy(b, 900, 700, 64),    // width changes: new run
  };
  CopyOp strided = flatCopy(b, 2000, 2000, 50);
  strided.rows = 4;
  strided.srcPitch = 80;
  strided.dstPitch = 90;
  ops.push_back(strided);  // passes through
  ops.push_back(flatCopy(b, 3000, 3000, 10));
  ops.push_back(flatCopy(b, 3005, 3020, 10));  // overlapping destinations' stride < width: no merge
  const auto merged = checkSameBytes(ops, b);
  ASSERT_EQ(merged.size(), 6u);
  EXPECT_EQ(merged[0].rows, 3);
  EXPECT_EQ(merged[1].rows, 1);
  EXPECT_EQ(merged[2].width, 64);
  EXPECT_EQ(merged[3].rows, 4);
  EXPECT_EQ(merged[3].dstPitch, 90);
}

TEST(CopyCoalesce, PitchAboveTheLimitStaysSeparateButFlatRunsDoNot) {
  Buffers b(1 << 14, 14);
  std::vector<CopyOp> ops;
  for (int64_t k = 0; k < 3; ++k) ops.push_back(flatCopy(b, k * 2000, k * 100, 100));
  EXPECT_EQ(checkSameBytes(ops, b, /*maxPitch=*/1000).size(), 3u);
  Buffers c(1 << 14, 15);
  std::vector<CopyOp> flatRun;
  for (int64_t k = 0; k < 3; ++k) flatRun.push_back(flatCopy(c, k * 2000, k * 2000, 2000));
  EXPECT_EQ(checkSameBytes(flatRun, c, /*maxPitch=*/1000).size(), 1u);
}

TEST(CopyCoalesce, RandomListsKeepEveryByte) {
  std::mt19937 rng(99);
  for (int trial = 0; trial < 200; ++trial) {
    Buffers b(1 << 15, static_cast<unsigned>(trial));
    std::vector<CopyOp> ops;
    // Non-overlapping destinations: slots of 512 bytes, widths up to 512,
    // source anywhere; mostly regular runs with random breaks.
    int64_t slot = 0, srcOff = static_cast<int64_t>(rng() % 4096);
    const int64_t width = 1 + static_cast<int64_t>(rng() % 512);
    while (slot + 2 < 60) {
      const int64_t w = rng() % 5 == 0 ? 1 + static_cast<int64_t>(rng() % 512) : width;
      ops.push_back(flatCopy(b, slot * 512, srcOff, w));
      slot += rng() % 4 == 0 ? 2 : 1;
      srcOff = (srcOff + w + static_cast<int64_t>(rng() % 3) * 64) % (1 << 14);
    }
    const auto merged = checkSameBytes(ops, b);
    EXPECT_LE(merged.size(), ops.size());
  }
}

}  // namespace
}  // namespace tide::fabric
