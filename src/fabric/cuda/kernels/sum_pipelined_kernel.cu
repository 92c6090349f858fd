// Level 1 fp32 sum, cp.async pipeline (opt-in: TIDE_SUM_KERNEL=cp-async).
//
// The register kernel (sum_kernel.cu) keeps U x K 16-byte loads in flight per
// thread, bounded by registers (~64 KB per CTA at 512 threads), which caps it
// near 53 GB/s per CTA on an H200. Here each thread streams its chunks
// through a private ring of STAGES shared-memory slots with cp.async: up to
// STAGES chunks of K sources in flight per thread (128 KB per CTA), no
// registers held, no __syncthreads (a thread reads back only the slots it
// filled, which cp.async.wait_group makes visible to it). Arithmetic and
// order per element are sumChunk's, so the bits equal the register kernel's.
// Built for K = 1..4 sources on vectorizable pieces; everything else is left
// to the register kernel (launchSumPipelined returns false).
#include <atomic>
#include <cstdint>
#include <utility>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/kernels/fp32_steps.cuh"
#include "fabric/cuda/kernels/per_device_once.hpp"
#include "fabric/cuda/kernels/sum_pipelined.hpp"

namespace tide::fabric::cuda::kernels {

namespace {

// Stages per source count: 128 KB of slots per CTA at 512 threads.
template <int K>
inline constexpr int kStages = K == 1 ? 16 : (K == 2 ? 8 : (K == 3 ? 5 : 4));

template <int K>
inline constexpr int kSmemBytes = kStages<K> * K * kThreadsPerCta * 16;

__device__ __forceinline__ void cpAsync16(uint4* slot, const void* src, bool copy) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(slot));
  // src-size 0 fills the slot with zeros and reads nothing.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(copy ? 16 : 0)
               : "memory");
}
__device__ __forceinline__ void cpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

struct ChunkAt {
  int row;
  int64_t x0;
  int width;
  bool full;  // every source holds V valid elements here: the slots carry it
};

template <SourceType S, int K>
__device__ __forceinline__ ChunkAt locate(const SumLaunch& p, const SumPieceDesc& pc, int64_t c) {
  constexpr int V = Source<S>::kVec;
  ChunkAt a;
  a.row = pc.rows == 1 ? 0 : static_cast<int>(c / pc.chunksPerRow);
  a.x0 = (c - a.row * pc.chunksPerRow) * V;
  a.width = pc.elems - a.x0 < V ? static_cast<int>(pc.elems - a.x0) : V;
  const int32_t* valid = p.valid + pc.firstValid + a.row;
  a.full = a.width == V;
#pragma unroll
  for (int k = 0; k < K; ++k) a.full = a.full && valid[k * pc.rows] - a.x0 >= V;
  return a;
}

// Slot s of this thread, source k: ring[(s * K + k) * blockDim.x + threadIdx.x].
template <SourceType S, int K>
__device__ __forceinline__ void issue(const SumLaunch& p, const SumPieceDesc& pc, int64_t c, int64_t work,
                                      uint4* ring, int slot) {
  using Raw = typename Source<S>::Raw;
  const SumSourceDesc* src = p.sources + pc.firstSource;
  const bool live = c < work;
  const ChunkAt a = live ? locate<S, K>(p, pc, c) : ChunkAt{0, 0, 0, false};
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const Raw* row = static_cast<const Raw*>(src[k].ptr) + a.row * src[k].pitch;
    cpAsync16(ring + (slot * K + k) * blockDim.x + threadIdx.x, a.full ? row + a.x0 : src[k].ptr, a.full);
  }
  cpAsyncCommit();  // one group per chunk, empty or not, so the wait counts stay aligned
}

template <SourceType S, int K>
__global__ void __launch_bounds__(kThreadsPerCta) sumPipelinedKernel(const __grid_constant__ SumLaunch p) {
  using Raw = typename Source<S>::Raw;
  constexpr int V = Source<S>::kVec;
  constexpr int STAGES = kStages<K>;
  extern __shared__ uint4 ring[];
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int i = 0; i < p.numPieces; ++i) {
    const SumPieceDesc& pc = p.pieces[i];
    const SumSourceDesc* src = p.sources + pc.firstSource;
    const int64_t work = pc.rows * pc.chunksPerRow;
    int64_t c0 = g - pc.workBegin % stride;
    if (c0 < 0) c0 += stride;
#pragma unroll
    for (int s = 0; s < STAGES; ++s) issue<S, K>(p, pc, c0 + s * stride, work, ring, s);
    int slot = 0;
    for (int64_t c = c0; c < work; c += stride) {
      cpAsyncWait<STAGES - 1>();  // chunk c's group (the oldest) has landed
      // Located again rather than kept from issue(): a per-stage array indexed by a
      // run-time slot would live in local memory; this is a few integer ops.
      const ChunkAt a = locate<S, K>(p, pc, c);
      float s[V];
      zeroInit(s);
#pragma unroll
      for (int k = 0; k < K; ++k) {
        float v[V];
        if (a.full) {
          Source<S>::fromRaw(ring[(slot * K + k) * blockDim.x + threadIdx.x], v);
        } else {
          const int32_t* valid = p.valid + pc.firstValid + a.row;
          loadChunk<S, V, false>(static_cast<const Raw*>(src[k].ptr) + a.row * src[k].pitch, a.x0, a.width,
                                 valid[k * pc.rows], v);
        }
#pragma unroll
        for (int e = 0; e < V; ++e) s[e] = __fadd_rn(s[e], v[e]);
      }
      writeScaled<V>(pc.dst + a.row * pc.dstPitch + a.x0, true, a.width, s, p.alpha, p.accumulate != 0);
      issue<S, K>(p, pc, c + STAGES * stride, work, ring, slot);  // refill the slot just read
      slot = slot + 1 == STAGES ? 0 : slot + 1;
    }
    cpAsyncWait<0>();  // the next piece reuses the slots
  }
}

// More than 48 KB of dynamic shared memory needs an opt-in, per device. The
// first call on a device also loads the kernel there (preloadSumPipelinedKernels).
template <SourceType S, int K>
void configureTyped() {
  static std::atomic<uint64_t> configured{0};
  oncePerDevice(configured, [] {
    TIDE_CUDA_CHECK(cudaFuncSetAttribute(sumPipelinedKernel<S, K>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         kSmemBytes<K>));
  });
}

template <SourceType S, int... Ks>
void configureAll(std::integer_sequence<int, Ks...>) {
  (configureTyped<S, Ks + 1>(), ...);
}

template <SourceType S, int K>
void launchTyped(const SumLaunch& p, unsigned grid, cudaStream_t stream) {
  configureTyped<S, K>();
  sumPipelinedKernel<S, K><<<grid, kThreadsPerCta, kSmemBytes<K>, stream>>>(p);
}

template <SourceType S>
bool launchForSources(const SumLaunch& p, unsigned grid, cudaStream_t stream) {
  switch (p.sourcesPerPiece) {
    case 1: launchTyped<S, 1>(p, grid, stream); return true;
    case 2: launchTyped<S, 2>(p, grid, stream); return true;
    case 3: launchTyped<S, 3>(p, grid, stream); return true;
    case 4: launchTyped<S, 4>(p, grid, stream); return true;
    default: return false;
  }
}

}  // namespace

void preloadSumPipelinedKernels() {
  using Ks = std::make_integer_sequence<int, 4>;  // sources per piece 1..4, as launchForSources
  configureAll<SourceType::kBF16>(Ks{});
  configureAll<SourceType::kFP32>(Ks{});
}

bool launchSumPipelined(const SumLaunch& p, SourceType type, int ctas, cudaStream_t stream) {
  for (int i = 0; i < p.numPieces; ++i)
    if (!p.pieces[i].vectorized) return false;
  if (p.numPieces == 0 || p.totalWork == 0) return true;
  const unsigned grid = gridFor(p.totalWork, ctas);
  const bool launched = type == SourceType::kBF16 ? launchForSources<SourceType::kBF16>(p, grid, stream)
                                                  : launchForSources<SourceType::kFP32>(p, grid, stream);
  if (launched) TIDE_CUDA_CHECK(cudaGetLastError());
  return launched;
}

}  // namespace tide::fabric::cuda::kernels
