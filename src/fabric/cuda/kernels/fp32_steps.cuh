// Device helpers shared by the sum and landing kernels: source loads (16-byte
// vectors where aligned, scalars at the edges) and the round-to-nearest fp32
// steps that keep every fabric's arithmetic identical.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "fabric/cuda/kernels/reduce_kernels.hpp"

namespace tide::fabric::cuda::kernels {

// bf16 -> fp32 is exact: the bf16 bits are the high half of the fp32 bits.
__device__ __forceinline__ float bf16BitsToFloat(uint32_t bits) { return __uint_as_float(bits << 16); }

template <SourceType S>
struct Source;

template <>
struct Source<SourceType::kBF16> {
  using Raw = uint16_t;
  static constexpr int kVec = 8;  // 16 bytes
  __device__ __forceinline__ static float scalar(const Raw* p) { return bf16BitsToFloat(*p); }
  __device__ __forceinline__ static void fromRaw(const uint4& v, float (&out)[kVec]) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      out[2 * i] = __uint_as_float(w[i] << 16);
      out[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
    }
  }
  __device__ __forceinline__ static void vector(const Raw* p, float (&out)[kVec]) {
    fromRaw(__ldcs(reinterpret_cast<const uint4*>(p)), out);
  }
};

template <>
struct Source<SourceType::kFP32> {
  using Raw = float;
  static constexpr int kVec = 4;
  __device__ __forceinline__ static float scalar(const Raw* p) { return *p; }
  __device__ __forceinline__ static void fromRaw(const uint4& v, float (&out)[kVec]) {
    out[0] = __uint_as_float(v.x);
    out[1] = __uint_as_float(v.y);
    out[2] = __uint_as_float(v.z);
    out[3] = __uint_as_float(v.w);
  }
  __device__ __forceinline__ static void vector(const Raw* p, float (&out)[kVec]) {
    fromRaw(__ldcs(reinterpret_cast<const uint4*>(p)), out);
  }
};

// Loads elements [x0, x0 + V) of one source row; elements at or past `valid`
// (or past the row's end, `width` < V) read as 0.
template <SourceType S, int V, bool kVecLoad>
__device__ __forceinline__ void loadChunk(const typename Source<S>::Raw* row, int64_t x0, int width,
                                          int64_t valid, float (&out)[V]) {
  const int64_t avail = valid - x0;
  const int n = avail <= 0 ? 0 : (avail < width ? static_cast<int>(avail) : width);
  if constexpr (kVecLoad) {
    if (n == V) {
      Source<S>::vector(row + x0, out);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = i < n ? Source<S>::scalar(row + x0 + i) : 0.0f;
}

// dst = accumulate ? dst + alpha*s : alpha*s   (SumOp and LandOp alike)
__device__ __forceinline__ float scaleInto(float dst, float s, float alpha, bool accumulate) {
  const float scaled = __fmul_rn(alpha, s);
  return accumulate ? __fadd_rn(dst, scaled) : scaled;
}

template <int V>
__device__ __forceinline__ void loadDst(const float* p, bool vec, int width, float (&out)[V]) {
  if constexpr (V % 4 == 0) {
    if (vec && width == V) {
#pragma unroll
      for (int i = 0; i < V; i += 4) {
        const float4 v = *reinterpret_cast<const float4*>(p + i);
        out[i] = v.x;
        out[i + 1] = v.y;
        out[i + 2] = v.z;
        out[i + 3] = v.w;
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) out[i] = i < width ? p[i] : 0.0f;
}

template <int V>
__device__ __forceinline__ void storeDst(float* p, bool vec, int width, const float (&v)[V]) {
  if constexpr (V % 4 == 0) {
    if (vec && width == V) {
#pragma unroll
      for (int i = 0; i < V; i += 4)
        *reinterpret_cast<float4*>(p + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i)
    if (i < width) p[i] = v[i];
}

// out[i] = accumulate ? out[i] + alpha*s[i] : alpha*s[i] for the chunk's
// `width` elements: the epilogue of both SM steps.
template <int V>
__device__ __forceinline__ void writeScaled(float* out, bool vec, int width, const float (&s)[V], float alpha,
                                            bool accumulate) {
  float d[V];
  if (accumulate) loadDst<V>(out, vec, width, d);
#pragma unroll
  for (int i = 0; i < V; ++i) d[i] = scaleInto(accumulate ? d[i] : 0.0f, s[i], alpha, accumulate);
  storeDst<V>(out, vec, width, d);
}

inline unsigned gridFor(int64_t work, int ctas) {
  const int64_t needed = (work + kThreadsPerCta - 1) / kThreadsPerCta;
  const int64_t cap = ctas > 0 ? ctas : 1;
  const int64_t grid = needed < cap ? needed : cap;
  return static_cast<unsigned>(grid > 0 ? grid : 1);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

template <int V>
__device__ __forceinline__ void zeroInit(float (&s)[V]) {
#pragma unroll
  for (int i = 0; i < V; ++i) s[i] = 0.0f;
}

// One chunk (V elements of one row) of one piece of a sum launch (SumTable):
// the Level 1 sum per element, which every sum kernel shares. K > 0: K sources, all loads
// issued before the adds; K == 0: the piece's count, one source at a time.
template <SourceType S, int K, bool kVec, class P>
__device__ __forceinline__ void sumChunk(const P& p, const SumPieceDesc& pc, int64_t c) {
  using Raw = typename Source<S>::Raw;
  constexpr int V = kVec ? Source<S>::kVec : 1;
  const int r = pc.rows == 1 ? 0 : static_cast<int>(c / pc.chunksPerRow);
  const int64_t x0 = (c - r * pc.chunksPerRow) * V;
  const int width = pc.elems - x0 < V ? static_cast<int>(pc.elems - x0) : V;
  const SumSourceDesc* src = p.sources + pc.firstSource;
  const int32_t* valid = p.valid + pc.firstValid + r;

  // Elements past `valid` load as 0 and add +0, which changes no bit: s starts
  // at +0 and a round-to-nearest sum is never -0 unless both terms are.
  float s[V];
  zeroInit(s);
  if constexpr (K > 0) {
    float v[K][V];
#pragma unroll
    for (int k = 0; k < K; ++k)
      loadChunk<S, V, kVec>(static_cast<const Raw*>(src[k].ptr) + r * src[k].pitch, x0, width,
                            valid[k * pc.rows], v[k]);
#pragma unroll
    for (int k = 0; k < K; ++k)
#pragma unroll
      for (int i = 0; i < V; ++i) s[i] = __fadd_rn(s[i], v[k][i]);
  } else {
    for (int k = 0; k < pc.numSources; ++k) {
      float v[V];
      loadChunk<S, V, kVec>(static_cast<const Raw*>(src[k].ptr) + r * src[k].pitch, x0, width,
                            valid[k * pc.rows], v);
#pragma unroll
      for (int i = 0; i < V; ++i) s[i] = __fadd_rn(s[i], v[i]);
    }
  }

  writeScaled<V>(pc.dst + r * pc.dstPitch + x0, kVec, width, s, p.alpha, p.accumulate != 0);
}

}  // namespace tide::fabric::cuda::kernels
