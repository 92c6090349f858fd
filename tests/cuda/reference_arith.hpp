// CPU reference of the fabric's fp32 steps, written as the plain loops
// fabric.hpp documents. Built with -ffp-contract=off (tests/cuda/CMakeLists.txt)
// so that no fused multiply-add changes a bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace tide::test {

inline float bf16ToFloat(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline uint32_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// Any NaN as the GPU writes it (fabric.hpp's kCanonicalNanBits).
inline float canonical(float v) { return v == v ? v : bitsToFloat(0x7FFFFFFFu); }

// One source of a sum: `data` holds rows of `pitch` elements (bf16 bits or fp32).
struct RefSource {
  const void* data = nullptr;
  bool bf16 = true;
  int64_t pitch = 0;
  std::vector<int64_t> valid;
};

// SumOp, one piece: s = 0; s += src_k for x < valid[k][r] (in order);
// dst = accumulate ? dst + alpha*s : alpha*s.
inline void referenceSum(std::vector<float>& dst, int64_t dstPitch, int64_t rows, int64_t elems,
                         const std::vector<RefSource>& sources, float alpha, bool accumulate) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t x = 0; x < elems; ++x) {
      float s = 0.0f;
      for (const RefSource& src : sources) {
        if (x >= src.valid[static_cast<size_t>(r)]) continue;
        const int64_t i = r * src.pitch + x;
        s += src.bf16 ? bf16ToFloat(static_cast<const uint16_t*>(src.data)[i])
                      : static_cast<const float*>(src.data)[i];
      }
      const float scaled = alpha * s;
      float& d = dst[static_cast<size_t>(r * dstPitch + x)];
      d = canonical(accumulate ? d + scaled : scaled);
    }
}

// LandOp: s = sum of the sources in order; dst = accumulate ? dst + alpha*s : alpha*s.
inline void referenceLand(std::vector<float>& dst, const std::vector<const float*>& sources,
                          int64_t elems, float alpha, bool accumulate) {
  for (int64_t x = 0; x < elems; ++x) {
    float s = 0.0f;
    for (const float* src : sources) s += src[x];
    const float scaled = alpha * s;
    float& d = dst[static_cast<size_t>(x)];
    d = canonical(accumulate ? d + scaled : scaled);
  }
}

// Bit-identical, NaN included (every fabric writes the canonical NaN).
inline bool sameFloat(float a, float b) { return floatBits(a) == floatBits(b); }

}  // namespace tide::test
