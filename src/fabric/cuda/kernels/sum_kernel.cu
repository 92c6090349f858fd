// Level 1 fp32 sum (SumOp): see reduce_kernels.hpp for the arithmetic.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/kernels/delay_kernel.hpp"
#include "fabric/cuda/kernels/fp32_steps.cuh"
#include "fabric/cuda/kernels/per_device_once.hpp"
#include "fabric/cuda/kernels/sum_pipelined.hpp"
#include "fabric/cuda/kernels/sum_tma.hpp"

namespace tide::fabric::cuda::kernels {

namespace {

// How many chunks a thread keeps in flight: one 16-byte load per source per
// chunk is too little to cover memory latency (about 30 GB/s per CTA), so a
// thread issues the loads of U chunks before it adds and stores any of them.
// Fewer for many sources, to stay in registers.
template <int K>
inline constexpr int kChunksInFlight = K == 0 ? 1 : (K <= 2 ? 4 : (K <= 4 ? 2 : 1));

// U chunks c, c + stride, ..., all in vectorizable pieces. Two phases: first
// every full chunk's raw 16-byte loads (U x K of them, predicated, nothing
// reads their registers yet), then the conversions and adds. Converting a
// bf16 vector right after its load would make the thread wait for each load
// before issuing the next, leaving one load in flight whatever U is. Chunks
// cut by `valid` or the row's end take loadChunk's scalar path in phase two.
// The arithmetic per element is sumChunk's, so the bits do not depend on U.
template <SourceType S, int K, int U, class P>
__device__ __forceinline__ void sumChunksInFlight(const P& p, const SumPieceDesc& pc, int64_t c,
                                                  int64_t stride, int64_t work) {
  using Raw = typename Source<S>::Raw;
  constexpr int V = Source<S>::kVec;
  const SumSourceDesc* src = p.sources + pc.firstSource;
  uint4 raw[U][K];
  int rowOf[U];
  int64_t x0Of[U];
  int widthOf[U];
  bool full[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t cu = c + u * stride;
    const bool live = cu < work;
    const int r = !live || pc.rows == 1 ? 0 : static_cast<int>(cu / pc.chunksPerRow);
    const int64_t x0 = live ? (cu - r * pc.chunksPerRow) * V : 0;
    const int width = pc.elems - x0 < V ? static_cast<int>(pc.elems - x0) : V;
    rowOf[u] = r;
    x0Of[u] = x0;
    widthOf[u] = width;
    const int32_t* valid = p.valid + pc.firstValid + r;
    bool f = live && width == V;
#pragma unroll
    for (int k = 0; k < K; ++k) f = f && valid[k * pc.rows] - x0 >= V;
    full[u] = f;
#pragma unroll
    for (int k = 0; k < K; ++k)
      raw[u][k] = f ? __ldcs(reinterpret_cast<const uint4*>(static_cast<const Raw*>(src[k].ptr) +
                                                             r * src[k].pitch + x0))
                    : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int u = 0; u < U; ++u) {
    if (c + u * stride >= work) break;
    float s[V];
    zeroInit(s);
    if (full[u]) {
#pragma unroll
      for (int k = 0; k < K; ++k) {
        float v[V];
        Source<S>::fromRaw(raw[u][k], v);
#pragma unroll
        for (int i = 0; i < V; ++i) s[i] = __fadd_rn(s[i], v[i]);
      }
    } else {
      const int32_t* valid = p.valid + pc.firstValid + rowOf[u];
#pragma unroll
      for (int k = 0; k < K; ++k) {
        float v[V];
        loadChunk<S, V, false>(static_cast<const Raw*>(src[k].ptr) + rowOf[u] * src[k].pitch, x0Of[u],
                               widthOf[u], valid[k * pc.rows], v);
#pragma unroll
        for (int i = 0; i < V; ++i) s[i] = __fadd_rn(s[i], v[i]);
      }
    }
    writeScaled<V>(pc.dst + rowOf[u] * pc.dstPitch + x0Of[u], true, widthOf[u], s, p.alpha, p.accumulate != 0);
  }
}

// The pieces' chunks form one index space; thread g takes every chunk
// congruent to g modulo the grid, so the grid-stride balance spans pieces.
template <SourceType S, int K, class P>
__global__ void __launch_bounds__(kThreadsPerCta) sumKernel(const __grid_constant__ P p) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  constexpr int U = kChunksInFlight<K>;
  for (int i = 0; i < p.numPieces; ++i) {
    const SumPieceDesc& pc = p.pieces[i];
    const int64_t work = pc.rows * pc.chunksPerRow;
    int64_t c = g - pc.workBegin % stride;
    if (c < 0) c += stride;
    if (pc.vectorized) {
      if constexpr (U > 1) {
        for (; c < work; c += U * stride) sumChunksInFlight<S, K, U>(p, pc, c, stride, work);
      } else {
        for (; c < work; c += stride) sumChunk<S, K, true>(p, pc, c);
      }
    } else {
      for (; c < work; c += stride) sumChunk<S, K, false>(p, pc, c);
    }
  }
}

template <SourceType S, class P>
void launchTyped(const P& p, unsigned grid, cudaStream_t stream) {
  switch (p.sourcesPerPiece) {
#define TIDE_SUM_CASE(K) \
  case K:                \
    sumKernel<S, K, P><<<grid, kThreadsPerCta, 0, stream>>>(p); break;
    TIDE_SUM_CASE(1)
    TIDE_SUM_CASE(2)
    TIDE_SUM_CASE(3)
    TIDE_SUM_CASE(4)
    TIDE_SUM_CASE(5)
    TIDE_SUM_CASE(6)
    TIDE_SUM_CASE(7)
    TIDE_SUM_CASE(8)
#undef TIDE_SUM_CASE
    default:
      sumKernel<S, 0, P><<<grid, kThreadsPerCta, 0, stream>>>(p);
  }
}

template <SourceType S, class P, int... Ks>
void preloadTyped(std::integer_sequence<int, Ks...>) {
  cudaFuncAttributes a{};
  const auto load = [&a](auto* kernel) { TIDE_CUDA_CHECK(cudaFuncGetAttributes(&a, kernel)); };
  (load(sumKernel<S, Ks, P>), ...);  // 0: any count; 1..8 as launchTyped
}

template <class P>
void launchTable(const P& p, SourceType type, unsigned grid, cudaStream_t stream) {
  if (type == SourceType::kBF16) {
    launchTyped<SourceType::kBF16>(p, grid, stream);
  } else {
    launchTyped<SourceType::kFP32>(p, grid, stream);
  }
}

}  // namespace

bool fitsCompactSumLaunch(const SumLaunch& p) {
  return p.numPieces <= SumLaunchCompact::kMaxPieces && p.numSources <= SumLaunchCompact::kMaxSources &&
         p.numValid <= SumLaunchCompact::kMaxValid;
}

SumLaunchCompact compactSumLaunch(const SumLaunch& p) {
  SumLaunchCompact c;
  c.numPieces = p.numPieces;
  c.accumulate = p.accumulate;
  c.alpha = p.alpha;
  c.sourcesPerPiece = p.sourcesPerPiece;
  c.totalWork = p.totalWork;
  c.numSources = p.numSources;
  c.numValid = p.numValid;
  std::copy_n(p.pieces, p.numPieces, c.pieces);
  std::copy_n(p.sources, p.numSources, c.sources);
  std::copy_n(p.valid, p.numValid, c.valid);
  return c;
}

bool sumPieceVectorizable(const float* dst, int64_t dstPitch, int64_t rows, int numSources,
                          const void* const* srcPtrs, const int64_t* srcPitches, SourceType type) {
  const int64_t itemBytes = type == SourceType::kBF16 ? 2 : 4;
  if (!aligned16(dst) || (rows > 1 && (dstPitch * 4) % 16 != 0)) return false;
  for (int k = 0; k < numSources; ++k) {
    if (!aligned16(srcPtrs[k])) return false;
    if (rows > 1 && (srcPitches[k] * itemBytes) % 16 != 0) return false;
  }
  return true;
}

SumLaunchBuilder::SumLaunchBuilder(SourceType type, float alpha, bool accumulate) : type_(type) {
  launch_.alpha = alpha;
  launch_.accumulate = accumulate ? 1 : 0;
}

void SumLaunchBuilder::clear() {
  const float alpha = launch_.alpha;
  const int32_t accumulate = launch_.accumulate;
  launch_ = SumLaunch{};
  launch_.alpha = alpha;
  launch_.accumulate = accumulate;
  sources_ = 0;
  valid_ = 0;
}

bool SumLaunchBuilder::add(float* dst, int64_t dstPitch, int64_t rows, int64_t elems, int numSources,
                           const void* const* srcPtrs, const int64_t* srcPitches,
                           const int64_t* const* valid) {
  if (rows == 0 || elems == 0) return true;  // nothing to sum (and no CTA may divide by an empty row)
  const int64_t validCount = rows * numSources;
  if (launch_.numPieces == kMaxPiecesPerLaunch || sources_ + numSources > kMaxSourcesPerLaunch ||
      valid_ + validCount > kMaxValidPerLaunch)
    return false;
  SumPieceDesc& pc = launch_.pieces[launch_.numPieces];
  pc.dst = dst;
  pc.dstPitch = dstPitch;
  pc.elems = elems;
  pc.rows = static_cast<int32_t>(rows);
  pc.firstSource = sources_;
  pc.numSources = numSources;
  pc.firstValid = valid_;
  pc.vectorized = sumPieceVectorizable(dst, dstPitch, rows, numSources, srcPtrs, srcPitches, type_) ? 1 : 0;
  const int v = !pc.vectorized ? 1 : (type_ == SourceType::kBF16 ? 8 : 4);
  pc.chunksPerRow = (elems + v - 1) / v;
  pc.workBegin = launch_.totalWork;
  launch_.totalWork += pc.chunksPerRow * rows;
  for (int k = 0; k < numSources; ++k) {
    launch_.sources[sources_ + k] = SumSourceDesc{srcPtrs[k], srcPitches[k]};
    for (int64_t r = 0; r < rows; ++r)
      launch_.valid[valid_ + k * rows + r] = static_cast<int32_t>(std::clamp<int64_t>(valid[k][r], 0, elems));
  }
  sources_ += numSources;
  valid_ += static_cast<int>(validCount);
  launch_.numSources = sources_;
  launch_.numValid = valid_;
  launch_.sourcesPerPiece =
      launch_.numPieces == 0 || launch_.sourcesPerPiece == numSources ? numSources : 0;
  ++launch_.numPieces;
  return true;
}

// TIDE_SUM_KERNEL: "tma" (default; sum_tma_kernel.cu, where it applies, else
// this file's register kernel), "registers" or "cp-async"
// (sum_pipelined_kernel.cu). Read once per process; a choice other than the
// default is said once.
enum class SumKernelChoice { kRegisters, kCpAsync, kTma };

SumKernelChoice sumKernelChoice() {
  static const SumKernelChoice chosen = [] {
    const char* v = std::getenv("TIDE_SUM_KERNEL");
    if (v == nullptr || *v == '\0' || std::strcmp(v, "tma") == 0) return SumKernelChoice::kTma;
    if (std::strcmp(v, "registers") == 0) {
      std::fprintf(stderr, "[tide] sum kernel: registers (TIDE_SUM_KERNEL=registers)\n");
      return SumKernelChoice::kRegisters;
    }
    if (std::strcmp(v, "cp-async") == 0) {
      std::fprintf(stderr, "[tide] sum kernel: cp.async pipeline (TIDE_SUM_KERNEL=cp-async)\n");
      return SumKernelChoice::kCpAsync;
    }
    throw std::invalid_argument(std::string("TIDE_SUM_KERNEL=") + v + ": expected tma, registers or cp-async");
  }();
  return chosen;
}

void preloadKernels() {
  // A bad TIDE_SUM_KERNEL is refused when an endpoint is made, not at the
  // first sum, which comes after the call's copies and signals went out.
  (void)sumKernelChoice();
  // The first endpoint on a device pays (tens of milliseconds).
  static std::atomic<uint64_t> loaded{0};
  oncePerDevice(loaded, [] {
    using Ks = std::make_integer_sequence<int, 9>;
    preloadTyped<SourceType::kBF16, SumLaunch>(Ks{});
    preloadTyped<SourceType::kFP32, SumLaunch>(Ks{});
    preloadTyped<SourceType::kBF16, SumLaunchCompact>(Ks{});
    preloadTyped<SourceType::kFP32, SumLaunchCompact>(Ks{});
    preloadSumTmaKernels();
    preloadSumPipelinedKernels();
    preloadLandKernels();
    preloadDelayKernel();
  });
}

void launchSum(const SumLaunch& p, SourceType type, int ctas, cudaStream_t stream) {
  if (p.numPieces == 0 || p.totalWork == 0) return;
  switch (sumKernelChoice()) {
    case SumKernelChoice::kCpAsync:
      if (launchSumPipelined(p, type, ctas, stream)) return;
      break;
    case SumKernelChoice::kTma:
      if (launchSumTma(p, type, ctas, stream)) return;
      break;
    case SumKernelChoice::kRegisters:
      break;
  }
  const unsigned grid = gridFor(p.totalWork, ctas);
  if (fitsCompactSumLaunch(p)) {
    launchTable(compactSumLaunch(p), type, grid, stream);
  } else {
    launchTable(p, type, grid, stream);
  }
  TIDE_CUDA_CHECK(cudaGetLastError());
}

}  // namespace tide::fabric::cuda::kernels
