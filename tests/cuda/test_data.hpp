// Fresh random test data: bf16 and fp32 values with NaN, +-Inf, -0 and
// denormals sprinkled in, and byte patterns that name their writer.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace tide::test {

inline uint16_t floatToBf16(float f) {  // round to nearest even
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// One in `specialEvery` values is special (NaN, +-Inf, -0, denormal).
class ValueGen {
 public:
  explicit ValueGen(uint64_t seed, int specialEvery = 512) : rng_(seed), specialEvery_(specialEvery) {}

  float fp32() {
    if (special()) return specialFloat();
    return normal_(rng_) * std::ldexp(1.0f, static_cast<int>(rng_() % 24) - 12);
  }
  uint16_t bf16() {
    if (special()) {
      switch (rng_() % 5) {
        case 0: return 0x7fc1;  // NaN
        case 1: return 0x7f80;  // +Inf
        case 2: return 0xff80;  // -Inf
        case 3: return 0x8000;  // -0
        default: return static_cast<uint16_t>(1 + rng_() % 0x7f);  // denormal
      }
    }
    return floatToBf16(normal_(rng_) * std::ldexp(1.0f, static_cast<int>(rng_() % 16) - 8));
  }
  std::vector<uint16_t> bf16s(size_t n) {
    std::vector<uint16_t> v(n);
    for (auto& x : v) x = bf16();
    return v;
  }
  std::vector<float> fp32s(size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = fp32();
    return v;
  }
  uint64_t next() { return rng_(); }

 private:
  bool special() { return specialEvery_ > 0 && rng_() % static_cast<uint64_t>(specialEvery_) == 0; }
  float specialFloat() {
    switch (rng_() % 5) {
      case 0: return std::nanf("");
      case 1: return INFINITY;
      case 2: return -INFINITY;
      case 3: return -0.0f;
      default: return std::ldexp(1.0f, -140);  // denormal
    }
  }
  std::mt19937_64 rng_;
  std::normal_distribution<float> normal_{0.0f, 1.0f};
  int specialEvery_;
};

// The run's seed, set once by a test's main before its ranks start (forked ranks inherit it):
// the patterns below and the value streams seeded from it differ from run to run. Printed, so
// that a failing run can be replayed with it.
inline uint64_t& runSeed() {
  static uint64_t seed = 0;
  return seed;
}

// Byte i of what `writer` sends in test `tag` in this run: anything that tells writers apart.
inline uint8_t patternByte(int writer, int tag, int64_t i) {
  uint64_t h = static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull ^
               (static_cast<uint64_t>(writer + 1) << 40) ^ (static_cast<uint64_t>(tag) << 52) ^
               runSeed() * 0xd6e8feb86659fd93ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return static_cast<uint8_t>(h);
}

inline std::vector<uint8_t> pattern(int writer, int tag, int64_t bytes) {
  std::vector<uint8_t> v(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < bytes; ++i) v[static_cast<size_t>(i)] = patternByte(writer, tag, i);
  return v;
}

}  // namespace tide::test
