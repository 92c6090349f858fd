// One copy call's ops must not meet where either writes (copy_batch_overlap):
// hand-made batches, and random ones against a byte-by-byte reference.
#include "fabric/copy_batch_overlap.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "test_seed.hpp"
namespace tide::fabric {
namespace {

std::byte buf[1 << 14];

CopyOp op(int64_t dst, int64_t src, int64_t width, int64_t rows = 1, int64_t dstPitch = 0, int64_t srcPitch = 0) {
  CopyOp o;
  o.dst = buf + dst;
  o.src = buf + src;
  o.width = width;
  o.rows = rows;
  o.dstPitch = dstPitch;
  o.srcPitch = srcPitch;
  return o;
}

TEST(CopyBatchOverlap, DisjointAndInterleavedBatchesPass) {
  EXPECT_EQ(findCopyBatchOverlap({}), "");
  EXPECT_EQ(findCopyBatchOverlap({op(0, 1000, 100), op(100, 1100, 100)}), "");
  // Two ops write alternate rows of one region (one rank's pieces of a landing):
  // their extents overlap, their bytes do not.
  EXPECT_EQ(findCopyBatchOverlap({op(0, 4000, 64, 8, 128, 64), op(64, 5000, 64, 8, 128, 64)}), "");
  // Reads may meet reads.
  EXPECT_EQ(findCopyBatchOverlap({op(0, 4000, 64), op(100, 4000, 64)}), "");
  // Empty ops take no bytes.
  EXPECT_EQ(findCopyBatchOverlap({op(0, 0, 0), op(0, 10, 64, 0)}), "");
}

TEST(CopyBatchOverlap, MeetingBytesAreNamed) {
  const std::string readWrite = findCopyBatchOverlap({op(0, 4000, 64), op(6000, 30, 64)});
  EXPECT_NE(readWrite.find("op 0 writes row 0"), std::string::npos) << readWrite;
  EXPECT_NE(readWrite.find("op 1 reads row 0"), std::string::npos) << readWrite;
  EXPECT_NE(readWrite.find("any order"), std::string::npos) << readWrite;
  EXPECT_NE(findCopyBatchOverlap({op(0, 4000, 64), op(63, 5000, 64)}), "");      // two writes, one byte
  EXPECT_NE(findCopyBatchOverlap({op(0, 32, 64)}), "");                          // its own source: no memmove
  EXPECT_NE(findCopyBatchOverlap({op(0, 4000, 64, 2, 32, 64)}), "");             // its own rows meet
  EXPECT_NE(findCopyBatchOverlap({op(0, 4000, 64, 8, 128, 64), op(7 * 128 + 63, 9000, 1)}), "");  // the last row
  EXPECT_EQ(findCopyBatchOverlap({op(0, 4000, 64, 8, 128, 64), op(7 * 128 + 64, 9000, 1)}), "");  // just past it
}

// The reference: every byte's writers and readers, op by op.
bool meetsByBytes(const std::vector<CopyOp>& ops) {
  std::vector<std::vector<std::pair<size_t, bool>>> at(sizeof(buf));
  for (size_t i = 0; i < ops.size(); ++i)
    for (int64_t r = 0; r < ops[i].rows; ++r)
      for (int64_t x = 0; x < ops[i].width; ++x) {
        at[static_cast<size_t>(static_cast<const std::byte*>(ops[i].src) - buf + r * ops[i].srcPitch + x)].push_back(
            {i, false});
        at[static_cast<size_t>(static_cast<std::byte*>(ops[i].dst) - buf + r * ops[i].dstPitch + x)].push_back(
            {i, true});
      }
  for (const auto& users : at) {
    int writes = 0;
    for (const auto& u : users) writes += u.second;
    if (writes > 0 && users.size() > 1) return true;  // a write met another access (or itself twice)
  }
  return false;
}

TEST(CopyBatchOverlap, AgreesWithAByteMapOnRandomBatches) {
  TIDE_TRACED_SEED(seed);
  std::mt19937_64 rng(seed);
  auto pick = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int meeting = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<CopyOp> ops;
    const int n = static_cast<int>(pick(1, 4));
    for (int i = 0; i < n; ++i) {
      const int64_t width = pick(1, 24), rows = pick(1, 4);
      const int64_t dstPitch = pick(width - 4 > 0 ? width - 4 : 1, 64), srcPitch = pick(width, 64);
      const int64_t span = 64 * 4 + 24;
      ops.push_back(op(pick(0, 2048 - span), pick(0, 2048 - span), width, rows, dstPitch, srcPitch));
    }
    const bool want = meetsByBytes(ops);
    meeting += want;
    EXPECT_EQ(!findCopyBatchOverlap(ops).empty(), want) << "trial " << trial;
  }
  EXPECT_GT(meeting, 300) << "too few meeting batches drawn to test anything";
  EXPECT_LT(meeting, 2700) << "too few sound batches drawn to test anything";
}

}  // namespace
}  // namespace tide::fabric
