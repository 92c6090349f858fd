// Whether a byte range lies inside another, or meets one: rails that read only from a
// registered window (NCCL host RMA and the host fabric's emulation of it)
// refuse other sources, and TIDE-AG sends its shard from where it is only when
// it lies in the arena.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tide::fabric {

// [p, p + bytes) inside [base, base + size). Compared as addresses: the two
// need not point into one array.
inline bool liesWithin(const void* p, int64_t bytes, const void* base, int64_t size) {
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  const auto lo = reinterpret_cast<std::uintptr_t>(base);
  return bytes >= 0 && size >= 0 && at >= lo && at - lo <= static_cast<std::uintptr_t>(size) &&
         static_cast<std::uintptr_t>(bytes) <= static_cast<std::uintptr_t>(size) - (at - lo);
}

// [p, p + bytes) and [base, base + size) share a byte. Compared as addresses,
// by differences (nothing wraps); an empty range meets nothing.
inline bool rangesMeet(const void* p, int64_t bytes, const void* base, int64_t size) {
  if (bytes <= 0 || size <= 0) return false;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const auto b = reinterpret_cast<std::uintptr_t>(base);
  return a >= b ? a - b < static_cast<std::uintptr_t>(size) : b - a < static_cast<std::uintptr_t>(bytes);
}

// Arena offsets [a, a + aBytes) and [b, b + bBytes) meet; all four >= 0
// (differences, not sums: nothing can wrap).
inline bool offsetRangesMeet(int64_t a, int64_t aBytes, int64_t b, int64_t bBytes) {
  return a - b < bBytes && b - a < aBytes;
}

// How bytes [low, high) of a region of `size` bytes overrun it, for a refusal's
// message: "N byte(s) before its start", "M byte(s) past its end", both joined
// by "and", or (`wraps`: the end passes 64 bits) "beyond any address past its end".
inline std::string overrunText(int64_t low, int64_t high, int64_t size, bool wraps) {
  std::string text;
  if (low < 0) text = std::to_string(-low) + " byte(s) before its start";
  if (wraps || high > size)
    text += (text.empty() ? "" : " and ") + (wraps ? std::string("beyond any address") : std::to_string(high - size) + " byte(s)") +
            " past its end";
  return text;
}

}  // namespace tide::fabric
