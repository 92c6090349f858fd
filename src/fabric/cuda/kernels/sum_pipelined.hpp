// The cp.async variant of the Level 1 sum (sum_pipelined_kernel.cu).
#pragma once

#include <cuda_runtime.h>

#include "fabric/cuda/kernels/reduce_kernels.hpp"

namespace tide::fabric::cuda::kernels {

// Launches the pipelined sum when every piece is vectorizable and has 1..4
// sources; false (nothing launched) otherwise.
bool launchSumPipelined(const SumLaunch& p, SourceType type, int ctas, cudaStream_t stream);
// Loads every instantiation into the current device's context (reduce_kernels.hpp, preloadKernels).
void preloadSumPipelinedKernels();

}  // namespace tide::fabric::cuda::kernels
