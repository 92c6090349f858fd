// Layout rules of the sum and landing steps that both fabrics refuse at issue,
// so that a CPU run refuses what a GPU would fault on or race over:
// - every element is naturally aligned (the kernels' scalar paths load and
//   store whole elements; a misaligned one traps and takes the CUDA context
//   with it, where the host fabric would read it);
// - a sum's destination rows do not overlap (threads of different rows would
//   race on the shared elements; the host writes rows in order);
// - a landing's destination meets none of its sources (the GPU clears a
//   source before it adds onto the destination, the host after: with the two
//   aliased, the fabrics' answers differ, and a partial overlap races).
// Each returns what is wrong, or "" when nothing is.
#pragma once

#include <cstdint>
#include <string>

#include "fabric/byte_range.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric {

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
  }
  return "";
}

}  // namespace tide::fabric
