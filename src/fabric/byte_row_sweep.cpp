#include "fabric/byte_row_sweep.hpp"

#include <algorithm>

namespace tide::fabric {

std::optional<std::pair<ByteRow, ByteRow>> firstWriteConflict(std::vector<ByteRow> rows) {
  std::erase_if(rows, [](const ByteRow& r) { return r.hi <= r.lo; });
  std::sort(rows.begin(), rows.end(), [](const ByteRow& a, const ByteRow& b) { return a.lo < b.lo; });
  // Sweeping by start: a row meets an earlier one exactly when that one ends
  // past its start, so the earlier rows that end furthest (any, and writes
  // only) are all a row needs to be compared with.
  const ByteRow* furthest = nullptr;
  const ByteRow* furthestWrite = nullptr;
  for (const ByteRow& r : rows) {
    const ByteRow* hit = r.write ? furthest : furthestWrite;  // a read meets only writes
    if (hit != nullptr && hit->hi > r.lo) return std::make_pair(*hit, r);
    if (furthest == nullptr || r.hi > furthest->hi) furthest = &r;
    if (r.write && (furthestWrite == nullptr || r.hi > furthestWrite->hi)) furthestWrite = &r;
  }
  return std::nullopt;
}

}  // namespace tide::fabric
