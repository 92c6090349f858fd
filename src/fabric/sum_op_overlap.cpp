#include "fabric/sum_op_overlap.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "fabric/byte_row_sweep.hpp"
#include "tide/plan.hpp"

namespace tide::fabric {
namespace {

std::string describe(const ByteRow& r) {
  const std::string what = r.write ? "destination" : "source " + std::to_string(r.source);
  return "piece " + std::to_string(r.op) + "'s " + what + " row " + std::to_string(r.row) + " at [" +
         std::to_string(r.lo) + ", " + std::to_string(r.hi) + ")";
}

}  // namespace

std::string findSumOpOverlap(const SumOp& op) {
  const auto item = static_cast<std::uintptr_t>(plan::itemSize(op.srcType));
  std::vector<ByteRow> rows;
  for (size_t i = 0; i < op.pieces.size(); ++i) {
    const SumPiece& pc = op.pieces[i];
    if (pc.rows <= 0 || pc.elems <= 0) continue;  // reads and writes nothing
    for (int64_t r = 0; r < pc.rows; ++r) {
      const auto dst = reinterpret_cast<std::uintptr_t>(pc.dst + r * pc.dstPitch);
      const auto dstEnd = dst + static_cast<std::uintptr_t>(pc.elems) * sizeof(float);
      rows.push_back({dst, dstEnd, i, r, -1, true});
      for (size_t k = 0; k < pc.sources.size(); ++k) {
        const SumSource& s = pc.sources[k];
        // Row r reads its valid elements only (as the fabrics' bounds checks count them).
        const int64_t valid = std::min(s.valid[static_cast<size_t>(r)], pc.elems);
        if (valid <= 0) continue;  // reads nothing (and its pitch was never bounded)
        const auto src = reinterpret_cast<std::uintptr_t>(s.ptr) + static_cast<std::uintptr_t>(r * s.pitch) * item;
        const auto srcEnd = src + static_cast<std::uintptr_t>(valid) * item;
        // The destination row itself, element for element: one thread reads and writes each
        // element. Dropping it loses nothing: it lies within that destination row, so any row
        // meeting it where one writes meets the destination row too.
        if (item == sizeof(float) && src == dst) continue;
        rows.push_back({src, srcEnd, i, r, static_cast<int>(k), false});
      }
    }
  }
  const auto hit = firstWriteConflict(std::move(rows));
  if (!hit) return "";
  return describe(hit->first) + " and " + describe(hit->second) +
         " meet: a sum's pieces run at once on the GPU, so no piece may write where another piece, or a "
         "source other than its own destination, reads or writes";
}

}  // namespace tide::fabric
