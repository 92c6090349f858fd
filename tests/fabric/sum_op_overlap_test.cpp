// The pieces of one sum must not meet where one writes, except a source that
// is exactly its own piece's destination (sum_op_overlap): hand-made sums, and
// random ones against a reference that models the GPU's threads element by
// element.
#include "fabric/sum_op_overlap.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "test_seed.hpp"
namespace tide::fabric {
namespace {

alignas(16) float arena[1 << 12];

SumSource source(const void* p, int64_t pitch, std::vector<int64_t> valid) { return SumSource{p, pitch, std::move(valid)}; }

SumPiece piece(int64_t dst, int64_t rows, int64_t elems, int64_t dstPitch, std::vector<SumSource> sources) {
  SumPiece pc;
  pc.dst = arena + dst;
  pc.rows = rows;
  pc.elems = elems;
  pc.dstPitch = dstPitch;
  pc.sources = std::move(sources);
  return pc;
}

SumOp sumOf(plan::DType type, std::vector<SumPiece> pieces) {
  SumOp op;
  op.srcType = type;
  op.pieces = std::move(pieces);
  return op;
}

const plan::DType kF32 = plan::DType::kFP32;
const plan::DType kBF16 = plan::DType::kBF16;

TEST(SumOpOverlap, SeparatePiecesAndTheirOwnDestinationPass) {
  EXPECT_EQ(findSumOpOverlap(sumOf(kF32, {})), "");
  // Two pieces, each reading two sources elsewhere; the sources may meet each other.
  EXPECT_EQ(findSumOpOverlap(sumOf(kF32, {piece(0, 2, 16, 32, {source(arena + 1000, 16, {16, 16}),
                                                                source(arena + 1008, 16, {16, 16})}),
                                           piece(16, 2, 16, 32, {source(arena + 1000, 16, {16, 16})})})),
            "");
  // Accumulating onto a source that is the destination itself, row for row.
  EXPECT_EQ(findSumOpOverlap(sumOf(kF32, {piece(0, 3, 8, 24, {source(arena, 24, {8, 8, 8}),
                                                              source(arena + 2000, 8, {8, 8, 8})})})),
            "");
  // A source row's padding (past its valid count) is not read: piece 0's source row holds 2 valid
  // elements, and piece 1 writes right after them, where its padding would be.
  EXPECT_EQ(findSumOpOverlap(sumOf(kF32, {piece(0, 1, 8, 8, {source(arena + 300, 8, {2})}),
                                           piece(302, 1, 6, 6, {source(arena + 400, 6, {6})})})),
            "");
  EXPECT_NE(findSumOpOverlap(sumOf(kF32, {piece(0, 1, 8, 8, {source(arena + 300, 8, {3})}),
                                           piece(302, 1, 6, 6, {source(arena + 400, 6, {6})})})),
            "");
  // Empty pieces take no bytes.
  EXPECT_EQ(findSumOpOverlap(sumOf(kF32, {piece(0, 0, 8, 8, {source(arena, 8, {})}),
                                           piece(0, 1, 8, 8, {source(arena + 100, 8, {8})})})),
            "");
}

TEST(SumOpOverlap, RowsThatMeetAreNamed) {
  // Piece 1 reads what piece 0 writes.
  const std::string why = findSumOpOverlap(sumOf(kF32, {piece(0, 1, 16, 16, {source(arena + 500, 16, {16})}),
                                                        piece(200, 1, 16, 16, {source(arena + 8, 16, {16})})}));
  EXPECT_NE(why.find("piece 0's destination row 0"), std::string::npos) << why;
  EXPECT_NE(why.find("piece 1's source 0 row 0"), std::string::npos) << why;
  EXPECT_NE(why.find("run at once on the GPU"), std::string::npos) << why;
  // Two destinations share one element.
  EXPECT_NE(findSumOpOverlap(sumOf(kF32, {piece(0, 1, 16, 16, {source(arena + 500, 16, {16})}),
                                           piece(15, 1, 16, 16, {source(arena + 600, 16, {16})})})),
            "");
  // Its own destination, one element along: another thread writes what one reads.
  EXPECT_NE(findSumOpOverlap(sumOf(kF32, {piece(0, 1, 16, 16, {source(arena + 1, 16, {15})})})), "");
  // bf16 at the destination's address: two bf16 elements per fp32 one, read by two threads.
  EXPECT_NE(findSumOpOverlap(sumOf(kBF16, {piece(0, 1, 16, 16, {source(arena, 16, {16})})})), "");
  // Row 0 is its own, but row 1 of the source is read from destination row 0's bytes (pitch 8 < 16).
  EXPECT_NE(findSumOpOverlap(sumOf(kF32, {piece(0, 2, 16, 16, {source(arena, 8, {8, 8})})})), "");
}

// The reference: per element of the arena, which (piece, row, element) threads
// read and write it; two different threads touching one element where one
// writes race, and so does a bf16 read of an fp32 element being written.
bool racesByElements(const SumOp& op) {
  struct Touch {
    size_t piece;
    int64_t row, elem;
    bool write;
    bool wholeElement;  // an fp32 access of exactly this element
  };
  std::vector<std::vector<Touch>> at(sizeof(arena));
  const auto* base = reinterpret_cast<const std::byte*>(arena);
  const int64_t item = op.srcType == kBF16 ? 2 : 4;
  for (size_t i = 0; i < op.pieces.size(); ++i) {
    const SumPiece& pc = op.pieces[i];
    for (int64_t r = 0; r < pc.rows; ++r)
      for (int64_t x = 0; x < pc.elems; ++x) {
        const auto* d = reinterpret_cast<const std::byte*>(pc.dst + r * pc.dstPitch + x);
        for (int b = 0; b < 4; ++b) at[static_cast<size_t>(d - base + b)].push_back({i, r, x, true, true});
        for (const SumSource& s : pc.sources) {
          if (x >= s.valid[static_cast<size_t>(r)]) continue;
          const auto* p = static_cast<const std::byte*>(s.ptr) + (r * s.pitch + x) * item;
          for (int64_t b = 0; b < item; ++b)
            at[static_cast<size_t>(p - base + b)].push_back({i, r, x, false, item == 4 && p == d});
        }
      }
  }
  for (const auto& users : at)
    for (const Touch& w : users) {
      if (!w.write) continue;
      for (const Touch& u : users) {
        const bool sameThread = u.piece == w.piece && u.row == w.row && u.elem == w.elem;
        if (&u != &w && !(sameThread && u.wholeElement)) return true;
      }
    }
  return false;
}

TEST(SumOpOverlap, AgreesWithAnElementMapOnRandomSums) {
  TIDE_TRACED_SEED(seed);
  std::mt19937_64 rng(seed);
  auto pick = [&rng](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int racing = 0, clean = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const plan::DType type = pick(0, 1) != 0 ? kF32 : kBF16;
    std::vector<SumPiece> pieces;
    const int n = static_cast<int>(pick(1, 3));
    for (int i = 0; i < n; ++i) {
      const int64_t rows = pick(0, 3), elems = pick(1, 8), dstPitch = elems + pick(0, 6);
      const int64_t dst = pick(0, 160);
      std::vector<SumSource> sources;
      for (int k = 0; k < static_cast<int>(pick(1, 2)); ++k) {
        std::vector<int64_t> valid;
        for (int64_t r = 0; r < rows; ++r) valid.push_back(pick(0, elems));
        // Sometimes the destination itself (fp32: an allowed alias), else anywhere nearby.
        const int64_t pitch = pick(0, 1) != 0 ? dstPitch : elems + pick(0, 6);
        const void* p = pick(0, 3) == 0 ? static_cast<const void*>(arena + dst)
                                        : static_cast<const void*>(reinterpret_cast<const std::byte*>(arena) +
                                                                   pick(0, 320) * (type == kBF16 ? 2 : 4));
        sources.push_back(source(p, pitch, std::move(valid)));
      }
      pieces.push_back(piece(dst, rows, elems, dstPitch, std::move(sources)));
    }
    const SumOp op = sumOf(type, std::move(pieces));
    const bool races = racesByElements(op);
    (races ? racing : clean) += 1;
    EXPECT_EQ(findSumOpOverlap(op).empty(), !races) << "trial " << trial;
  }
  EXPECT_GT(racing, 100);  // both outcomes drawn often enough to mean something
  EXPECT_GT(clean, 100);
}

}  // namespace
}  // namespace tide::fabric
