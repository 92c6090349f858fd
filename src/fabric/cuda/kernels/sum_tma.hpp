// The TMA variant of the Level 1 sum (sum_tma_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include "fabric/cuda/kernels/reduce_kernels.hpp"

namespace tide::fabric::cuda::kernels {

// Launches the TMA sum when every piece is vectorizable and has 1..8 sources;
// false (nothing launched) otherwise.
bool launchSumTma(const SumLaunch& p, SourceType type, int ctas, cudaStream_t stream);
// Loads every instantiation into the current device's context (reduce_kernels.hpp, preloadKernels).
void preloadSumTmaKernels();

}  // namespace tide::fabric::cuda::kernels
