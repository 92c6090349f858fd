// Rules of the sum and landing steps that both fabrics refuse at issue, so
// that a CPU run refuses what a GPU would fault on or race over, or cannot
// launch. Shape (checked first, before any address is bounded):
// - a destination, no negative count, one valid count per source row, at most
//   INT32_MAX elements a sum row (the kernels index a row with 32 bits);
// - 1 to kMaxReduceSources sources, none null (the kernels' parameter block
//   holds that many; a sum of no sources is a zeroing, which zero() does).
// Layout:
// - every element is naturally aligned (the kernels' scalar paths load and
//   store whole elements; a misaligned one traps and takes the CUDA context
//   with it, where the host fabric would read it);
// - a sum's destination rows do not overlap (threads of different rows would
//   race on the shared elements; the host writes rows in order);
// - a landing's destination meets none of its sources (the GPU clears a
//   source before it adds onto the destination, the host after: with the two
//   aliased, the fabrics' answers differ, and a partial overlap races);
// - a landing that clears its sources has sources that are the same or do not
//   meet (a GPU thread clears the elements it read while another thread still
//   reads a source shifted onto them; the host reads every source first).
// What runs across the pieces of one sum is the host fabric's to check
// (sum_op_overlap.hpp): its cost grows with the pieces.
// Each returns what is wrong, or "" when nothing is.
#pragma once

#include <climits>
#include <cstdint>
#include <string>

#include "fabric/byte_range.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric {

// The most sources one sum piece or landing takes.
inline constexpr int kMaxReduceSources = 16;

inline std::string sumPieceShapeProblem(const SumPiece& pc) {
  if (pc.dst == nullptr) return "no destination";
  if (pc.rows < 0 || pc.elems < 0)
    return std::to_string(pc.rows) + " rows of " + std::to_string(pc.elems) + " elements: neither may be negative";
  if (pc.elems > INT32_MAX) return "rows of " + std::to_string(pc.elems) + " elements (at most 2^31 - 1)";
  if (pc.sources.empty() || pc.sources.size() > static_cast<size_t>(kMaxReduceSources))
    return std::to_string(pc.sources.size()) + " sources (1.." + std::to_string(kMaxReduceSources) + " taken)";
  for (size_t k = 0; k < pc.sources.size(); ++k) {
    if (pc.sources[k].ptr == nullptr) return "source " + std::to_string(k) + " is null";
    if (static_cast<int64_t>(pc.sources[k].valid.size()) != pc.rows)
      return "source " + std::to_string(k) + " has " + std::to_string(pc.sources[k].valid.size()) +
             " valid count(s) for " + std::to_string(pc.rows) + " rows (one per row)";
  }
  return "";
}

inline std::string landShapeProblem(const LandOp& op) {
  if (op.dst == nullptr) return "no destination";
  if (op.elems < 0) return std::to_string(op.elems) + " elements (negative)";
  if (op.sources.empty() || op.sources.size() > static_cast<size_t>(kMaxReduceSources))
    return std::to_string(op.sources.size()) + " sources (1.." + std::to_string(kMaxReduceSources) + " taken)";
  for (size_t k = 0; k < op.sources.size(); ++k)
    if (op.sources[k] == nullptr) return "source " + std::to_string(k) + " is null";
  return "";
}

inline bool alignedTo(const void* p, int64_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % static_cast<std::uintptr_t>(bytes) == 0;
}

// `item`: the sources' element size (2 for bf16, 4 for fp32).
inline std::string sumPieceLayoutProblem(const SumPiece& pc, int64_t item) {
  if (!alignedTo(pc.dst, sizeof(float))) return "its destination is not 4-byte aligned (fp32)";
  if (pc.rows > 1 && pc.elems > 0 && pc.dstPitch < pc.elems)
    return "its destination rows overlap (pitch " + std::to_string(pc.dstPitch) + " below " +
           std::to_string(pc.elems) + " elements a row)";
  for (size_t k = 0; k < pc.sources.size(); ++k)
    if (!alignedTo(pc.sources[k].ptr, item))
      return "its source " + std::to_string(k) + " is not " + std::to_string(item) + "-byte aligned";
  return "";
}

inline std::string landLayoutProblem(const LandOp& op) {
  if (!alignedTo(op.dst, sizeof(float))) return "its destination is not 4-byte aligned (fp32)";
  const int64_t bytes = op.elems * int64_t{sizeof(float)};
  for (size_t k = 0; k < op.sources.size(); ++k) {
    if (!alignedTo(op.sources[k], sizeof(float)))
      return "its source " + std::to_string(k) + " is not 4-byte aligned (fp32)";
    if (rangesMeet(op.dst, bytes, op.sources[k], bytes))
      return "its destination overlaps its source " + std::to_string(k);
    if (op.clearSources)
      for (size_t j = 0; j < k; ++j)
        if (op.sources[j] != op.sources[k] && rangesMeet(op.sources[j], bytes, op.sources[k], bytes))
          return "it clears its sources, and source " + std::to_string(j) + " partly overlaps source " +
                 std::to_string(k);
  }
  return "";
}

}  // namespace tide::fabric
