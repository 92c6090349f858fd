#include "fabric/copy_batch_overlap.hpp"

#include <cstdint>

#include "fabric/byte_row_sweep.hpp"

namespace tide::fabric {
namespace {

std::string describe(const ByteRow& r) {
  return std::string("op ") + std::to_string(r.op) + (r.write ? " writes" : " reads") + " row " +
         std::to_string(r.row) + " at [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) + ")";
}

}  // namespace

std::string findCopyBatchOverlap(const std::vector<CopyOp>& ops) {
  std::vector<ByteRow> rows;
  for (size_t i = 0; i < ops.size(); ++i) {
    const CopyOp& op = ops[i];
    if (op.width <= 0 || op.rows <= 0) continue;
    const auto w = static_cast<std::uintptr_t>(op.width);
    for (int64_t r = 0; r < op.rows; ++r) {
      const auto src = reinterpret_cast<std::uintptr_t>(op.src) + static_cast<std::uintptr_t>(r * op.srcPitch);
      const auto dst = reinterpret_cast<std::uintptr_t>(op.dst) + static_cast<std::uintptr_t>(r * op.dstPitch);
      rows.push_back({src, src + w, i, r, -1, false});
      rows.push_back({dst, dst + w, i, r, -1, true});
    }
  }
  const auto hit = firstWriteConflict(std::move(rows));
  if (!hit) return "";
  return describe(hit->first) + " and " + describe(hit->second) +
         ": one copy call's ops may run in any order or at once, so their bytes must not meet";
}

}  // namespace tide::fabric
