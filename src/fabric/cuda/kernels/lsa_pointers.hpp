// Load/store addresses of a symmetric NCCL window at every rank of the LSA
// team: a one-thread kernel over ncclGetLsaPointer on NCCL 2.28 headers (only
// with that release loaded), the host query ncclGetLsaDevicePointer on NCCL
// >= 2.29 headers (looked up in the loaded NCCL). Either refuses, naming both
// versions, when the loaded NCCL cannot serve it.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <vector>

namespace tide::fabric::cuda {

// Base address (offset 0) of `window` at LSA ranks 0..lsaSize-1; the 2.28
// kernel is awaited under `deadlineSeconds` (FabricError past it).
std::vector<void*> resolveLsaBases(ncclWindow_t window, int lsaSize, cudaStream_t stream, double deadlineSeconds);

// True when `window` is a real symmetric window (device-resident handle), not
// the local-registration handle NCCL 2.28 returns when symmetric memory is
// unsupported.
bool isSymmetricWindow(ncclWindow_t window);

}  // namespace tide::fabric::cuda
