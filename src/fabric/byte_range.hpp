// Whether a byte range lies inside another: rails that read only from a
// registered window (NCCL host RMA and the host fabric's emulation of it)
// refuse other sources, and TIDE-AG sends its shard from where it is only when
// it lies in the arena.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tide::fabric {

// [p, p + bytes) inside [base, base + size). Compared as addresses: the two
// need not point into one array.
inline bool liesWithin(const void* p, int64_t bytes, const void* base, int64_t size) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const auto lo = reinterpret_cast<std::uintptr_t>(base);
  return bytes >= 0 && size >= 0 && at >= lo && at - lo <= static_cast<std::uintptr_t>(size) &&
         static_cast<std::uintptr_t>(bytes) <= static_cast<std::uintptr_t>(size) - (at - lo);
}

}  // namespace tide::fabric
