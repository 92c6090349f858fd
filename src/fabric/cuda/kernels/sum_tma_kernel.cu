// Level 1 fp32 sum, warp-specialized TMA pipeline: the default where it
// applies (TIDE_SUM_KERNEL=registers or cp-async chooses the others).
//
// The register kernel keeps about 64 KB in flight per CTA, bounded by its
// registers, and reached 53 GB/s per CTA on an H200; the cp.async kernel 38.
// Here one producer thread moves whole tiles (16 KB of each source row, plus
// the destination tile when accumulating) into a ring of shared-memory
// stages with bulk copies (cp.async.bulk, executed by the TMA unit), each
// stage completing an mbarrier by its bytes; eight consumer warps wait on a
// stage, sum it and store fp32 to global (a warp's stores cover 512
// contiguous bytes), and every consumer thread then arrives on the stage's
// second mbarrier, which frees it for the producer. About 200 KB stay in flight per CTA for
// a handful of instructions, and the consumers never wait on global loads:
// 98 GB/s per CTA with two bf16 sources, 115 with four.
//
// Tiles that are not whole (row ends, sources cut by `valid`) skip the bulk
// copy: the consumers read them from global memory as the register kernel
// does. The arithmetic and order per element are sumChunk's (sources in
// order from +0, then alpha, then the destination), so the bits equal the
// other kernels'. Built for 1..8 sources (a node's GPUs) on vectorizable
// pieces; everything else is left to the register kernel (launchSumTma
// returns false).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/kernels/fp32_steps.cuh"
#include "fabric/cuda/kernels/per_device_once.hpp"
#include "fabric/cuda/kernels/sum_tma.hpp"

namespace tide::fabric::cuda::kernels {

namespace {

constexpr int kMaxStages = 16;
constexpr int kSmemBudget = 200 * 1024;  // of the 227 KB an H200 CTA may take

// 16 KB of each source row per stage and eight consumer warps (warp 0
// produces): on one H200, tiles of 8 KB reached 66 GB/s per CTA with two bf16
// sources, 16 KB 98, 32 KB and 64 KB no more; sixteen consumer warps were
// slower, four no faster (BENCHMARKS.md, session 8).
struct Config {
  static constexpr int kTileBytes = 16384;
  static constexpr int kConsumerWarps = 8;
  static constexpr int kConsumerThreads = kConsumerWarps * 32;
  static constexpr int kThreads = kConsumerThreads + 32;
};

// The stage of a kernel: K source tiles (and the destination tile when
// accumulating), as many stages as kSmemBudget holds; the tile shrinks
// from the configured size until two stages fit in shared memory.
template <SourceType S, int K, bool kAcc>
struct StageShape {
  static constexpr int kItem = static_cast<int>(sizeof(typename Source<S>::Raw));
  static constexpr int stageBytesFor(int tile) { return K * tile + (kAcc ? tile / kItem * 4 : 0); }
  static constexpr int fittingTile(int tile) {
    return 2 * stageBytesFor(tile) <= kSmemBudget || tile <= 1024 ? tile : fittingTile(tile / 2);
  }
  static constexpr int kTileBytes = fittingTile(Config::kTileBytes);
  static constexpr int64_t kTileElems = kTileBytes / kItem;
  static constexpr int kSourceBytes = K * kTileBytes;
  static constexpr int kDstBytes = kAcc ? static_cast<int>(kTileElems) * 4 : 0;
  static constexpr int kBytes = kSourceBytes + kDstBytes;
  static constexpr int kCount = std::clamp(kSmemBudget / kBytes, 2, kMaxStages);
  static constexpr int kSmemBytes = kCount * kBytes;
  static_assert(kSmemBytes <= kSmemBudget, "two stages must fit in shared memory");
};

// ---- mbarrier and bulk-copy primitives (sm_90 PTX)

__device__ __forceinline__ uint32_t smemAddress(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void barrierInit(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smemAddress(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ void barrierArrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smemAddress(bar)) : "memory");
}

// The producer's arrival, announcing the bytes its bulk copies will complete.
__device__ __forceinline__ void barrierArriveExpectBytes(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smemAddress(bar)), "r"(bytes)
               : "memory");
}

// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void barrierWait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smemAddress(bar)), "r"(parity)
        : "memory");
  } while (done == 0);
}

// Global -> shared, `bytes` (a multiple of 16, both addresses 16-byte aligned),
// completing `bar` by its byte count.
__device__ __forceinline__ void bulkLoad(void* smemDst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          smemAddress(smemDst)),
      "l"(src), "r"(bytes), "r"(smemAddress(bar))
      : "memory");
}

// ---- the tiles of one CTA

struct Tile {
  const SumPieceDesc* piece;
  int row;
  int64_t x0;
  bool whole;  // T elements of the row, every source valid over all of them: bulk-copied
};

// Calls f(tile) for every tile of this CTA, in the same order in every warp:
// tiles are numbered over the pieces in order and dealt round-robin to CTAs.
template <class Shape, int K, class P, class F>
__device__ __forceinline__ void forEachTile(const P& p, F&& f) {
  constexpr int64_t T = Shape::kTileElems;
  const int64_t grid = gridDim.x;
  int64_t begin = 0;
  for (int i = 0; i < p.numPieces; ++i) {
    const SumPieceDesc& pc = p.pieces[i];
    const int64_t perRow = (pc.elems + T - 1) / T;
    const int64_t tiles = perRow * pc.rows;
    int64_t t = (static_cast<int64_t>(blockIdx.x) - begin % grid + grid) % grid;
    // Walk rows and offsets incrementally: no 64-bit division per tile.
    int64_t row = t / perRow;
    int64_t col = t - row * perRow;
    const int64_t rowStep = grid / perRow, colStep = grid - rowStep * perRow;
    for (; t < tiles; t += grid) {
      Tile tile;
      tile.piece = &pc;
      tile.row = static_cast<int>(row);
      tile.x0 = col * T;
      tile.whole = tile.x0 + T <= pc.elems;
      const int32_t* valid = p.valid + pc.firstValid + tile.row;
#pragma unroll
      for (int k = 0; k < K; ++k) tile.whole = tile.whole && valid[k * pc.rows] >= tile.x0 + T;
      f(tile);
      row += rowStep;
      col += colStep;
      if (col >= perRow) {
        col -= perRow;
        ++row;
      }
    }
    begin += tiles;
  }
}

template <SourceType S, int K, bool kAcc, class P>
__device__ __forceinline__ void produce(const P& p, uint8_t* ring, uint64_t* full, uint64_t* empty) {
  using Raw = typename Source<S>::Raw;
  using Shape = StageShape<S, K, kAcc>;
  int stage = 0;
  uint32_t parity = 0;  // of the phase of empty[stage] this tile waits for
  bool firstRound = true;
  forEachTile<StageShape<S, K, kAcc>, K>(p, [&](const Tile& tile) {
    if (!firstRound) barrierWait(&empty[stage], parity);
    if (tile.whole) {
      uint8_t* buf = ring + static_cast<size_t>(stage) * Shape::kBytes;
      barrierArriveExpectBytes(&full[stage], Shape::kBytes);
      const SumSourceDesc* src = p.sources + tile.piece->firstSource;
#pragma unroll
      for (int k = 0; k < K; ++k)
        bulkLoad(buf + k * Shape::kTileBytes,
                 static_cast<const Raw*>(src[k].ptr) + tile.row * src[k].pitch + tile.x0, Shape::kTileBytes,
                 &full[stage]);
      if constexpr (kAcc)
        bulkLoad(buf + Shape::kSourceBytes, tile.piece->dst + tile.row * tile.piece->dstPitch + tile.x0,
                 Shape::kDstBytes, &full[stage]);
    } else {
      barrierArrive(&full[stage]);  // the consumers read this tile from global memory
    }
    if (++stage == Shape::kCount) {
      stage = 0;
      parity ^= firstRound ? 0u : 1u;
      firstRound = false;
    }
  });
}

// Four elements of source k at quad q of a whole tile in shared memory.
template <SourceType S>
__device__ __forceinline__ void quadOf(const uint8_t* tile, int q, float (&v)[4]) {
  if constexpr (S == SourceType::kBF16) {
    const uint2 w = reinterpret_cast<const uint2*>(tile)[q];
    v[0] = __uint_as_float(w.x << 16);
    v[1] = __uint_as_float(w.x & 0xffff0000u);
    v[2] = __uint_as_float(w.y << 16);
    v[3] = __uint_as_float(w.y & 0xffff0000u);
  } else {
    const uint4 w = reinterpret_cast<const uint4*>(tile)[q];
    v[0] = __uint_as_float(w.x);
    v[1] = __uint_as_float(w.y);
    v[2] = __uint_as_float(w.z);
    v[3] = __uint_as_float(w.w);
  }
}

// One consumer thread's quads (four elements) of a whole tile, from shared
// memory; a warp's stores cover 512 contiguous bytes.
template <SourceType S, int K, bool kAcc>
__device__ __forceinline__ void sumWholeTile(const Tile& tile, const uint8_t* buf, int tid, float alpha) {
  using Shape = StageShape<S, K, kAcc>;
  constexpr int kQuads = static_cast<int>(Shape::kTileElems) / 4;
  const float4* dstTile = reinterpret_cast<const float4*>(buf + Shape::kSourceBytes);
  float4* out = reinterpret_cast<float4*>(tile.piece->dst + tile.row * tile.piece->dstPitch + tile.x0);
#pragma unroll 4
  for (int q = tid; q < kQuads; q += Config::kConsumerThreads) {
    float s[4];
    zeroInit(s);
#pragma unroll
    for (int k = 0; k < K; ++k) {
      float v[4];
      quadOf<S>(buf + k * Shape::kTileBytes, q, v);
#pragma unroll
      for (int i = 0; i < 4; ++i) s[i] = __fadd_rn(s[i], v[i]);
    }
    float4 d = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if constexpr (kAcc) d = dstTile[q];
    out[q] = make_float4(scaleInto(d.x, s[0], alpha, kAcc), scaleInto(d.y, s[1], alpha, kAcc),
                         scaleInto(d.z, s[2], alpha, kAcc), scaleInto(d.w, s[3], alpha, kAcc));
  }
}

// One consumer thread's chunks of a cut tile, from global memory: the
// register kernel's per-chunk sum (sumChunk), in the piece's chunk numbering.
template <SourceType S, int K, bool kAcc, class P>
__device__ __forceinline__ void sumCutTile(const P& p, const Tile& tile, int tid) {
  constexpr int V = Source<S>::kVec;
  constexpr int64_t T = StageShape<S, K, kAcc>::kTileElems;
  const SumPieceDesc& pc = *tile.piece;
  const int64_t left = pc.elems - tile.x0;
  const int64_t chunks = ((left < T ? left : T) + V - 1) / V;
  const int64_t first = tile.row * pc.chunksPerRow + tile.x0 / V;
  for (int64_t j = tid; j < chunks; j += Config::kConsumerThreads) sumChunk<S, K, true>(p, pc, first + j);
}

template <SourceType S, int K, bool kAcc, class P>
__global__ void __launch_bounds__(Config::kThreads) sumTmaKernel(const __grid_constant__ P p) {
  using Shape = StageShape<S, K, kAcc>;
  extern __shared__ __align__(128) uint8_t ring[];
  __shared__ __align__(8) uint64_t full[Shape::kCount];
  __shared__ __align__(8) uint64_t empty[Shape::kCount];
  if (threadIdx.x == 0) {
    for (int s = 0; s < Shape::kCount; ++s) {
      barrierInit(&full[s], 1);
      barrierInit(&empty[s], Config::kConsumerThreads);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  const int warp = static_cast<int>(threadIdx.x) / 32;
  if (warp == 0) {
    if (threadIdx.x == 0) produce<S, K, kAcc>(p, ring, full, empty);
    return;
  }
  const int tid = static_cast<int>(threadIdx.x) - 32;
  int stage = 0;
  uint32_t parity = 0;
  forEachTile<StageShape<S, K, kAcc>, K>(p, [&](const Tile& tile) {
    barrierWait(&full[stage], parity);
    if (tile.whole) {
      sumWholeTile<S, K, kAcc>(tile, ring + static_cast<size_t>(stage) * Shape::kBytes, tid, p.alpha);
    } else {
      sumCutTile<S, K, kAcc>(p, tile, tid);
    }
    // Every consumer thread releases its own reads of the stage (an arrival
    // orders only the arriving thread's accesses) before the producer
    // bulk-copies the next tile over it.
    barrierArrive(&empty[stage]);
    if (++stage == Shape::kCount) {
      stage = 0;
      parity ^= 1u;
    }
  });
}

// More than 48 KB of dynamic shared memory needs an opt-in, per device. The
// first call on a device also loads the kernel there (preloadSumTmaKernels).
template <SourceType S, int K, bool kAcc, class P>
void configureShaped() {
  static std::atomic<uint64_t> configured{0};
  oncePerDevice(configured, [] {
    TIDE_CUDA_CHECK(cudaFuncSetAttribute(sumTmaKernel<S, K, kAcc, P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         StageShape<S, K, kAcc>::kSmemBytes));
  });
}

template <SourceType S, int K, bool kAcc, class P>
void launchShaped(const P& p, int ctas, cudaStream_t stream) {
  using Shape = StageShape<S, K, kAcc>;
  int64_t tiles = 0;
  for (int i = 0; i < p.numPieces; ++i)
    tiles += p.pieces[i].rows * ((p.pieces[i].elems + Shape::kTileElems - 1) / Shape::kTileElems);
  if (tiles == 0) return;
  const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>(tiles, 1, ctas > 0 ? ctas : 1));
  configureShaped<S, K, kAcc, P>();
  sumTmaKernel<S, K, kAcc, P><<<grid, Config::kThreads, Shape::kSmemBytes, stream>>>(p);
}

template <SourceType S, class P, int... Ks>
void configureAll(std::integer_sequence<int, Ks...>) {
  (configureShaped<S, Ks + 1, false, P>(), ...);
  (configureShaped<S, Ks + 1, true, P>(), ...);
}

template <SourceType S, class P>
bool launchForSources(const P& p, int ctas, cudaStream_t stream) {
  const bool acc = p.accumulate != 0;
  switch (p.sourcesPerPiece) {
#define TIDE_TMA_CASE(K)                                                                                \
  case K:                                                                                               \
    acc ? launchShaped<S, K, true>(p, ctas, stream) : launchShaped<S, K, false>(p, ctas, stream); \
    return true;
    TIDE_TMA_CASE(1)
    TIDE_TMA_CASE(2)
    TIDE_TMA_CASE(3)
    TIDE_TMA_CASE(4)
    TIDE_TMA_CASE(5)
    TIDE_TMA_CASE(6)
    TIDE_TMA_CASE(7)
    TIDE_TMA_CASE(8)
#undef TIDE_TMA_CASE
    default:
      return false;
  }
}

bool launchAll(const SumLaunch& p, SourceType type, int ctas, cudaStream_t stream) {
  if (fitsCompactSumLaunch(p)) {
    const SumLaunchCompact c = compactSumLaunch(p);
    return type == SourceType::kBF16 ? launchForSources<SourceType::kBF16>(c, ctas, stream)
                                     : launchForSources<SourceType::kFP32>(c, ctas, stream);
  }
  return type == SourceType::kBF16 ? launchForSources<SourceType::kBF16>(p, ctas, stream)
                                   : launchForSources<SourceType::kFP32>(p, ctas, stream);
}

}  // namespace

void preloadSumTmaKernels() {
  using Ks = std::make_integer_sequence<int, 8>;  // sources per piece 1..8, as launchForSources
  configureAll<SourceType::kBF16, SumLaunch>(Ks{});
  configureAll<SourceType::kFP32, SumLaunch>(Ks{});
  configureAll<SourceType::kBF16, SumLaunchCompact>(Ks{});
  configureAll<SourceType::kFP32, SumLaunchCompact>(Ks{});
}

bool launchSumTma(const SumLaunch& p, SourceType type, int ctas, cudaStream_t stream) {
  if (p.sourcesPerPiece < 1 || p.sourcesPerPiece > 8) return false;
  for (int i = 0; i < p.numPieces; ++i)
    if (!p.pieces[i].vectorized) return false;
  const bool launched = launchAll(p, type, ctas, stream);
  if (launched) TIDE_CUDA_CHECK(cudaGetLastError());
  return launched;
}

}  // namespace tide::fabric::cuda::kernels
