// Level 2 landing (LandOp): see reduce_kernels.hpp for the arithmetic. Sources
// are fp32, local or a peer's (unicast pull through LSA addresses).
#include <utility>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/kernels/fp32_steps.cuh"

namespace tide::fabric::cuda::kernels {

namespace {

template <int V>
__device__ __forceinline__ void clearChunk(float* p, bool vec, int width) {
  const float zero[V] = {};
  storeDst<V>(p, vec, width, zero);
}

// Chunks a thread handles per step in the vectorized kernel with K sources,
// all loads issued before any add (see sumChunksInFlight in sum_kernel.cu).
template <int K>
inline constexpr int kLandChunksInFlight = K == 0 ? 1 : (K <= 2 ? 4 : (K <= 4 ? 2 : 1));

// One chunk's sum from its sources' values, then the sources cleared (when
// asked) and the result stored: each chunk's sources are read before any of
// them is cleared.
template <int V>
__device__ __forceinline__ void finishChunk(const LandLaunch& p, int n, int64_t x0, int width, bool vec,
                                            const float (&s)[V]) {
  if (p.clearSources)
    for (int k = 0; k < n; ++k) clearChunk<V>(p.src[k] + x0, vec, width);
  writeScaled<V>(p.dst + x0, vec, width, s, p.alpha, p.accumulate != 0);
}

template <int K, bool kVec>
__global__ void __launch_bounds__(kThreadsPerCta) landKernel(const __grid_constant__ LandLaunch p) {
  constexpr int V = kVec ? 4 : 1;
  constexpr int U = kVec ? kLandChunksInFlight<K> : 1;
  const int64_t chunks = (p.elems + V - 1) / V;
  const int n = K > 0 ? K : p.numSources;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += U * stride) {
    if constexpr (K > 0 && U > 1) {
      // Phase 1: the raw loads of every full chunk; phase 2: adds, clears, stores.
      uint4 raw[U][K];
      bool full[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t x0 = (c + u * stride) * V;
        full[u] = c + u * stride < chunks && p.elems - x0 >= V;
#pragma unroll
        for (int k = 0; k < K; ++k)
          raw[u][k] = full[u] ? __ldcs(reinterpret_cast<const uint4*>(p.src[k] + x0)) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < U; ++u) {
        const int64_t cu = c + u * stride;
        if (cu >= chunks) break;
        const int64_t x0 = cu * V;
        const int width = p.elems - x0 < V ? static_cast<int>(p.elems - x0) : V;
        float s[V];
        zeroInit(s);
#pragma unroll
        for (int k = 0; k < K; ++k) {
          float v[V];
          if (full[u]) {
            Source<SourceType::kFP32>::fromRaw(raw[u][k], v);
          } else {
            loadChunk<SourceType::kFP32, V, false>(p.src[k], x0, width, p.elems, v);
          }
#pragma unroll
          for (int i = 0; i < V; ++i) s[i] = __fadd_rn(s[i], v[i]);
        }
        finishChunk<V>(p, n, x0, width, kVec, s);
      }
    } else {
      const int64_t x0 = c * V;
      const int width = p.elems - x0 < V ? static_cast<int>(p.elems - x0) : V;
      float s[V];
      zeroInit(s);
      if constexpr (K > 0) {
        float v[K][V];
#pragma unroll
        for (int k = 0; k < K; ++k) loadChunk<SourceType::kFP32, V, kVec>(p.src[k], x0, width, p.elems, v[k]);
#pragma unroll
        for (int k = 0; k < K; ++k)
#pragma unroll
          for (int i = 0; i < V; ++i) s[i] = __fadd_rn(s[i], v[k][i]);
      } else {
        for (int k = 0; k < n; ++k) {
          float v[V];
          loadChunk<SourceType::kFP32, V, kVec>(p.src[k], x0, width, p.elems, v);
#pragma unroll
          for (int i = 0; i < V; ++i) s[i] = __fadd_rn(s[i], v[i]);
        }
      }
      finishChunk<V>(p, n, x0, width, kVec, s);
    }
  }
}

template <bool kVec>
void launchTyped(const LandLaunch& p, unsigned grid, cudaStream_t stream) {
  switch (p.numSources) {
#define TIDE_LAND_CASE(K) \
  case K:                 \
    landKernel<K, kVec><<<grid, kThreadsPerCta, 0, stream>>>(p); break;
    TIDE_LAND_CASE(1)
    TIDE_LAND_CASE(2)
    TIDE_LAND_CASE(3)
    TIDE_LAND_CASE(4)
    TIDE_LAND_CASE(5)
    TIDE_LAND_CASE(6)
    TIDE_LAND_CASE(7)
    TIDE_LAND_CASE(8)
#undef TIDE_LAND_CASE
    default:
      landKernel<0, kVec><<<grid, kThreadsPerCta, 0, stream>>>(p);
  }
}

template <bool kVec, int... Ks>
void preloadTyped(std::integer_sequence<int, Ks...>) {
  cudaFuncAttributes a{};
  const auto load = [&a](auto* kernel) { TIDE_CUDA_CHECK(cudaFuncGetAttributes(&a, kernel)); };
  (load(landKernel<Ks, kVec>), ...);
}

}  // namespace

void preloadLandKernels() {
  preloadTyped<false>(std::make_integer_sequence<int, 9>{});  // 0: any count; 1..8 as launchTyped
  preloadTyped<true>(std::make_integer_sequence<int, 9>{});
}

bool landIsVectorized(const LandLaunch& p) {
  if (!aligned16(p.dst)) return false;
  for (int k = 0; k < p.numSources; ++k)
    if (!aligned16(p.src[k])) return false;
  return true;
}

void launchLand(const LandLaunch& p, int ctas, cudaStream_t stream) {
  if (p.elems <= 0) return;
  const bool vec = landIsVectorized(p);
  const unsigned grid = gridFor((p.elems + (vec ? 3 : 0)) / (vec ? 4 : 1), ctas);
  vec ? launchTyped<true>(p, grid, stream) : launchTyped<false>(p, grid, stream);
  TIDE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tide::fabric::cuda::kernels
