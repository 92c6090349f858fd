// Which rows of one batched call meet where one of them writes. The ops of a
// batched call (a copy list, the pieces of a sum, the puts of a rail list) run
// in any order or at once on the GPU and one after another on the host, so a
// row written by one and read or written by another gives the two fabrics
// different bytes (or a race). The host fabric checks its calls with this
// sweep, so that CPU runs catch what a GPU would race over; O(n log n) in the
// number of rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace tide::fabric {

// Bytes [lo, hi) that one op of the call reads or writes in one of its rows.
struct ByteRow {
  std::uintptr_t lo = 0, hi = 0;
  size_t op = 0;      // the op (copy op, sum piece, rail piece) within the call
  int64_t row = 0;    // the row within the op
  int source = -1;    // a sum piece's source index; -1 for a destination or copy source
  bool write = false;
};

// The first pair (in address order) of rows that share a byte where one writes;
// nullopt when there is none. Empty rows meet nothing.
std::optional<std::pair<ByteRow, ByteRow>> firstWriteConflict(std::vector<ByteRow> rows);

}  // namespace tide::fabric
