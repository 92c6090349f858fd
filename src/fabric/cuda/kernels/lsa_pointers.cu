#include "fabric/cuda/kernels/lsa_pointers.hpp"

#include <nccl.h>
#include <nccl_device.h>

#include "fabric/cuda/cuda_check.hpp"

namespace tide::fabric::cuda {

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
namespace {
// One thread: NCCL 2.28 exposes peer addresses to device code only.
__global__ void lsaBasesKernel(ncclWindow_t window, int lsaSize, void** out) {
  for (int peer = 0; peer < lsaSize; ++peer) out[peer] = ncclGetLsaPointer(window, 0, peer);
}
}  // namespace
#endif

std::vector<void*> resolveLsaBases(ncclWindow_t window, int lsaSize, cudaStream_t stream) {
  std::vector<void*> bases(static_cast<size_t>(lsaSize), nullptr);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  (void)stream;
  for (int peer = 0; peer < lsaSize; ++peer)
    TIDE_NCCL_CHECK(ncclGetLsaDevicePointer(window, 0, peer, &bases[static_cast<size_t>(peer)]));
#else
  void** dev = nullptr;
  TIDE_CUDA_CHECK(cudaMalloc(&dev, bases.size() * sizeof(void*)));
  lsaBasesKernel<<<1, 1, 0, stream>>>(window, lsaSize, dev);
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess)
    err = cudaMemcpyAsync(bases.data(), dev, bases.size() * sizeof(void*), cudaMemcpyDeviceToHost,
                          stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  cudaFree(dev);
  TIDE_CUDA_CHECK(err);
#endif
  return bases;
}

bool isSymmetricWindow(ncclWindow_t window) {
  if (window == nullptr) return false;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, window) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error of a host pointer query
    return false;
  }
  return attr.type == cudaMemoryTypeDevice;
}

}  // namespace tide::fabric::cuda
