// Fault-injection delay: one thread that sleeps on the GPU timer, so a queue
// idles for a while before its next op (Endpoint::delay).
#pragma once

#include <cuda_runtime.h>

namespace tide::fabric::cuda::kernels {

void launchDelay(double seconds, cudaStream_t stream);
// Loads the delay kernel into the current device's context (preloadKernels).
void preloadDelayKernel();

}  // namespace tide::fabric::cuda::kernels
