// Launch API of the fabric's two SM steps (host code, no device code here):
//   sum  — Level 1, per piece: dst[r][x] = acc ? dst + alpha*s : alpha*s,
//          s = 0 + src_0[r][x] + src_1[r][x] + ...  (sources past valid[k][r]
//          contribute nothing)
//   land — Level 2: dst[x] = acc ? dst + alpha*s : alpha*s, s = the fp32
//          sources in order; optionally zeroes what it read.
// fp32 in exactly that order with no contraction (__fadd_rn / __fmul_rn), so
// results equal the host fabric's loops bit for bit (NaN payloads aside). The
// piece table travels as kernel parameters; CTAs sweep all pieces grid-stride
// and exit; they never poll peers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tide::fabric::cuda::kernels {

inline constexpr int kThreadsPerCta = 512;
inline constexpr int kMaxSourcesPerPiece = 16;
// Capacity of one sum launch (the parameter table stays under CUDA's 32 KiB
// kernel-parameter limit); the fabric splits larger ops between pieces.
inline constexpr int kMaxPiecesPerLaunch = 96;
inline constexpr int kMaxSourcesPerLaunch = 512;
inline constexpr int kMaxValidPerLaunch = 2048;

enum class SourceType : int { kBF16 = 0, kFP32 = 1 };

struct SumPieceDesc {
  float* dst = nullptr;
  int64_t dstPitch = 0;      // elements
  int64_t elems = 0;         // per row
  int64_t chunksPerRow = 0;  // elems / vector width, rounded up
  int64_t workBegin = 0;     // chunks of the earlier pieces of this launch
  int32_t rows = 0;
  int32_t firstSource = 0;   // into SumLaunch::sources
  int32_t numSources = 0;
  int32_t firstValid = 0;    // valid of source k, row r: SumLaunch::valid[firstValid + k*rows + r]
  int32_t vectorized = 0;    // 16-byte loads and stores
  int32_t reserved = 0;
};

struct SumSourceDesc {
  const void* ptr = nullptr;
  int64_t pitch = 0;  // elements
};

template <int kPieces, int kSources, int kValid>
struct SumTable {
  static constexpr int kMaxPieces = kPieces, kMaxSources = kSources, kMaxValid = kValid;
  int32_t numPieces = 0;
  int32_t accumulate = 0;
  float alpha = 1.0f;
  int32_t sourcesPerPiece = 0;  // same count in every piece, or 0
  int64_t totalWork = 0;        // chunks over all pieces
  int32_t numSources = 0;       // entries of `sources` in use
  int32_t numValid = 0;         // entries of `valid` in use
  SumPieceDesc pieces[kPieces];
  SumSourceDesc sources[kSources];
  int32_t valid[kValid];
};
using SumLaunch = SumTable<kMaxPiecesPerLaunch, kMaxSourcesPerLaunch, kMaxValidPerLaunch>;
static_assert(sizeof(SumLaunch) <= 32764, "CUDA kernel parameters are limited to 32764 bytes");
// The host copies a kernel's whole parameter table at every launch (about
// 9.5 us for SumLaunch's 22 KB on an H200 host). Most launches (a pass's
// chunk of one group: a piece per parameter, L sources each) fit this one's
// 3 KB, and go out in it.
using SumLaunchCompact = SumTable<16, 64, 256>;
bool fitsCompactSumLaunch(const SumLaunch& p);
SumLaunchCompact compactSumLaunch(const SumLaunch& p);  // the entries in use; the caller checked they fit

// Builds a SumLaunch piece by piece. add() returns false when the piece does
// not fit (the caller launches and starts a new one).
class SumLaunchBuilder {
 public:
  SumLaunchBuilder(SourceType type, float alpha, bool accumulate);
  bool add(float* dst, int64_t dstPitch, int64_t rows, int64_t elems, int numSources,
           const void* const* srcPtrs, const int64_t* srcPitches,
           const int64_t* const* valid /* [k][r] */);
  bool empty() const { return launch_.numPieces == 0; }
  const SumLaunch& launch() const { return launch_; }
  void clear();

 private:
  SourceType type_;
  SumLaunch launch_;
  int sources_ = 0;
  int valid_ = 0;
};

struct LandLaunch {
  float* dst = nullptr;
  float* src[kMaxSourcesPerPiece] = {};
  int64_t elems = 0;
  int numSources = 0;
  float alpha = 1.0f;
  int accumulate = 0;
  int clearSources = 0;
};

// `ctas` caps the grid (the CTA budget); fewer launch when the work is small.
void launchSum(const SumLaunch& p, SourceType type, int ctas, cudaStream_t stream);
void launchLand(const LandLaunch& p, int ctas, cudaStream_t stream);

// Loads every kernel of the fabric into the current device's context, once per
// device (every endpoint calls it before its first call). Under CUDA's lazy
// module loading (the default), a kernel's first launch loads it, and loading
// may synchronize the context: behind a stream blocked on a counter wait that
// only work this thread has yet to enqueue, the launch would never return.
void preloadKernels();
// The parts (land_kernel.cu; delay_kernel.hpp has the delay kernel's).
void preloadLandKernels();

// Whether a piece / landing takes the 16-byte vector path.
bool sumPieceVectorizable(const float* dst, int64_t dstPitch, int64_t rows, int numSources,
                          const void* const* srcPtrs, const int64_t* srcPitches, SourceType type);
bool landIsVectorized(const LandLaunch& p);

}  // namespace tide::fabric::cuda::kernels
