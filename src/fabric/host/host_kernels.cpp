#include "fabric/host/host_kernels.hpp"

#include <cstring>

namespace tide::fabric::host {

float bf16ToFloat(uint16_t bits) {
  uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t floatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

namespace {

// The value written: any NaN as the GPU writes it (fabric.hpp).
inline float asWritten(float v) {
  if (v == v) return v;
  float nan;
  std::memcpy(&nan, &kCanonicalNanBits, sizeof nan);
  return nan;
}

inline float load(const void* base, int64_t index, plan::DType t) {
  if (t == plan::DType::kBF16) return bf16ToFloat(static_cast<const uint16_t*>(base)[index]);
  return static_cast<const float*>(base)[index];
}

}  // namespace

int64_t runSum(const SumOp& op) {
  int64_t written = 0;
  for (const SumPiece& pc : op.pieces) {
    for (int64_t r = 0; r < pc.rows; ++r) {
      float* dst = pc.dst + r * pc.dstPitch;
      for (int64_t x = 0; x < pc.elems; ++x) {
        float s = 0.0f;
        for (const SumSource& src : pc.sources) {
          if (x < src.valid[static_cast<size_t>(r)]) s += load(src.ptr, r * src.pitch + x, op.srcType);
        }
        const float scaled = op.alpha * s;
        dst[x] = asWritten(op.accumulate ? dst[x] + scaled : scaled);
      }
      written += pc.elems;
    }
  }
  return written;
}

int64_t runLand(const LandOp& op) {
  for (int64_t x = 0; x < op.elems; ++x) {
    float s = 0.0f;
    for (float* src : op.sources) s += src[x];
    const float scaled = op.alpha * s;
    op.dst[x] = asWritten(op.accumulate ? op.dst[x] + scaled : scaled);
  }
  if (op.clearSources)
    for (float* src : op.sources) std::memset(src, 0, static_cast<size_t>(op.elems) * sizeof(float));
  return op.elems;
}

}  // namespace tide::fabric::host
