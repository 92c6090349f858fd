#include "fabric/copy_batch_overlap.hpp"

#include <algorithm>
#include <cstdint>

namespace tide::fabric {
namespace {

// One row of one op: the bytes [lo, hi) it reads (its source) or writes.
struct Row {
  std::uintptr_t lo, hi;
  size_t op;
  int64_t row;
  bool write;
};

std::string describe(const Row& r) {
  return std::string("op ") + std::to_string(r.op) + (r.write ? " writes" : " reads") + " row " +
         std::to_string(r.row);
}

}  // namespace

std::string findCopyBatchOverlap(const std::vector<CopyOp>& ops) {
  std::vector<Row> rows;
  for (size_t i = 0; i < ops.size(); ++i) {
    const CopyOp& op = ops[i];
    if (op.width <= 0 || op.rows <= 0) continue;
    const auto w = static_cast<std::uintptr_t>(op.width);
    for (int64_t r = 0; r < op.rows; ++r) {
      const auto src = reinterpret_cast<std::uintptr_t>(op.src) + static_cast<std::uintptr_t>(r * op.srcPitch);
      const auto dst = reinterpret_cast<std::uintptr_t>(op.dst) + static_cast<std::uintptr_t>(r * op.dstPitch);
      rows.push_back({src, src + w, i, r, false});
      rows.push_back({dst, dst + w, i, r, true});
    }
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.lo < b.lo; });
  // Sweeping by start: a row meets an earlier one exactly when that one ends
  // past its start, so the earlier rows that end furthest (any, and writes
  // only) are all a row needs to be compared with.
  const Row* furthest = nullptr;
  const Row* furthestWrite = nullptr;
  for (const Row& r : rows) {
    const Row* hit = r.write ? furthest : furthestWrite;  // a read meets only writes
    if (hit != nullptr && hit->hi > r.lo)
      return describe(*hit) + " at [" + std::to_string(hit->lo) + ", " + std::to_string(hit->hi) + ") and " +
             describe(r) + " at [" + std::to_string(r.lo) + ", " + std::to_string(r.hi) +
             "): one copy call's ops may run in any order or at once, so their bytes must not meet";
    if (furthest == nullptr || r.hi > furthest->hi) furthest = &r;
    if (r.write && (furthestWrite == nullptr || r.hi > furthestWrite->hi)) furthestWrite = &r;
  }
  return "";
}

}  // namespace tide::fabric
