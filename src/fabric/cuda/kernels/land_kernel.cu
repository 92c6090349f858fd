// Level 2 landing (LandOp): see reduce_kernels.hpp for the arithmetic. Sources
// are fp32, local or a peer's (unicast pull through LSA addresses).
#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/kernels/fp32_steps.cuh"

namespace tide::fabric::cuda::kernels {

namespace {

template <int V>
__device__ __forceinline__ void clearChunk(float* p, bool vec, int width) {
  const float zero[V] = {};
  storeDst<V>(p, vec, width, zero);
}

// The sources are read before any is cleared, then the result is stored.
template <int K, bool kVec>
__global__ void __launch_bounds__(kThreadsPerCta) landKernel(const __grid_constant__ LandLaunch p) {
  constexpr int V = kVec ? 4 : 1;
  const int64_t chunks = (p.elems + V - 1) / V;
  const bool accumulate = p.accumulate != 0;
  const int n = K > 0 ? K : p.numSources;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t x0 = c * V;
    const int width = p.elems - x0 < V ? static_cast<int>(p.elems - x0) : V;
    float s[V];
    zeroInit(s);
    if constexpr (K > 0) {
      float v[K][V];
#pragma unroll
      for (int k = 0; k < K; ++k)
        loadChunk<SourceType::kFP32, V, kVec>(p.src[k], x0, width, p.elems, v[k]);
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
    if (p.clearSources)
      for (int k = 0; k < n; ++k) clearChunk<V>(p.src[k] + x0, kVec, width);

    writeScaled<V>(p.dst + x0, kVec, width, s, p.alpha, accumulate);
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

}  // namespace

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
