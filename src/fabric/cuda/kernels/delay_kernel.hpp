// Fault-injection delay: one thread that sleeps on the GPU timer, so a queue
// idles for a while before its next op (Endpoint::delay).
#pragma once

#include <cuda_runtime.h>

namespace tide::fabric::cuda::kernels {

void launchDelay(double seconds, cudaStream_t stream);

}  // namespace tide::fabric::cuda::kernels
