// FNV-1a, 64 bits: a digest for telling values apart (host identities,
// unique ids, plans compared across ranks), not a defence against forgery.
#pragma once

#include <cstdint>
#include <string_view>

namespace tide::fabric {

inline constexpr uint64_t kFnv1aOffset = 0xcbf29ce484222325ull;

// The digest of `bytes`, continuing from `h` (chain several values through it).
inline uint64_t fnv1a(std::string_view bytes, uint64_t h = kFnv1aOffset) {
  for (const unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace tide::fabric
