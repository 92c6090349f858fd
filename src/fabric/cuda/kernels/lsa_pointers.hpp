// Load/store addresses of a symmetric NCCL window at every rank of the LSA
// team: a one-thread kernel over ncclGetLsaPointer on NCCL 2.28, the host
// query ncclGetLsaDevicePointer on NCCL >= 2.29.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <vector>

namespace tide::fabric::cuda {

// Base address (offset 0) of `window` at LSA ranks 0..lsaSize-1.
std::vector<void*> resolveLsaBases(ncclWindow_t window, int lsaSize, cudaStream_t stream);

// True when `window` is a real symmetric window (device-resident handle), not
// the local-registration handle NCCL 2.28 returns when symmetric memory is
// unsupported.
bool isSymmetricWindow(ncclWindow_t window);

}  // namespace tide::fabric::cuda
