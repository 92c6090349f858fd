#include "fabric/cuda/kernels/lsa_pointers.hpp"

#include <nccl.h>
#include <nccl_device.h>

#include <string>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/host_poll.hpp"
#include "fabric/cuda/nccl_runtime.hpp"

namespace tide::fabric::cuda {

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 29, 0)
namespace {
// One thread: NCCL 2.28 exposes peer addresses to device code only.
__global__ void lsaBasesKernel(ncclWindow_t window, int lsaSize, void** out) {
  for (int peer = 0; peer < lsaSize; ++peer) out[peer] = ncclGetLsaPointer(window, 0, peer);
}
}  // namespace
#endif

std::vector<void*> resolveLsaBases(ncclWindow_t window, int lsaSize, cudaStream_t stream, double deadlineSeconds) {
  std::vector<void*> bases(static_cast<size_t>(lsaSize), nullptr);
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 29, 0)
  (void)stream;
  (void)deadlineSeconds;
  // Looked up, not linked: an NCCL older than these headers (PyTorch's 2.28.9)
  // lacks it, and a link would keep libtide from loading at all there, host
  // fabric included. The 2.28 device-side query cannot stand in: its window
  // layout is that release's, not these headers'.
  static const auto getLsaDevicePointer =
      reinterpret_cast<decltype(&ncclGetLsaDevicePointer)>(loadedNcclSymbol("ncclGetLsaDevicePointer"));
  if (getLsaDevicePointer == nullptr)
    throw FabricError(kDeviceErrorKind,
                      "cuda fabric: libtide was built against NCCL " + ncclVersionString(NCCL_VERSION_CODE) +
                          " headers, which take peer addresses from ncclGetLsaDevicePointer, but the NCCL "
                          "loaded in this process (" + loadedNcclVersion() +
                          ") lacks it (NCCL < 2.29): build libtide against the NCCL this process loads "
                          "(NCCL_HOME), or load an NCCL >= 2.29 first (LD_PRELOAD)");
  for (int peer = 0; peer < lsaSize; ++peer)
    TIDE_NCCL_CHECK(getLsaDevicePointer(window, 0, peer, &bases[static_cast<size_t>(peer)]));
#else
  // The device-side query is inlined from these headers and reads the window
  // as this release lays it out: with another release loaded it would hand
  // back wrong peer addresses, so it runs only with the release it was built for.
  int loaded = 0;
  TIDE_NCCL_CHECK(ncclGetVersion(&loaded));
  if (loaded / 100 != NCCL_VERSION_CODE / 100)
    throw FabricError(kDeviceErrorKind,
                      "cuda fabric: libtide was built against NCCL " + ncclVersionString(NCCL_VERSION_CODE) +
                          " headers, whose device-side ncclGetLsaPointer reads that release's window layout, but "
                          "the NCCL loaded in this process is " + ncclVersionString(loaded) +
                          ": build libtide against the NCCL this process loads (NCCL_HOME)");
  void** dev = nullptr;
  TIDE_CUDA_CHECK(cudaMalloc(&dev, bases.size() * sizeof(void*)));
  lsaBasesKernel<<<1, 1, 0, stream>>>(window, lsaSize, dev);
  cudaError_t err = cudaGetLastError();
  // Awaited under the deadline before the copy into pageable memory, which
  // would block inside the CUDA call. Past it the kernel may still run: `dev`
  // is left allocated (cudaFree would wait for the device).
  if (err == cudaSuccess)
    pollStreamUntilDone(stream, deadlineSeconds, [] {
      return std::string("cuda fabric: the kernel reading the LSA peer addresses did not finish");
    });
  if (err == cudaSuccess)
    err = cudaMemcpyAsync(bases.data(), dev, bases.size() * sizeof(void*), cudaMemcpyDeviceToHost,
                          stream);
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
