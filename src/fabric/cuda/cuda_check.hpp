// Error checks for CUDA runtime, driver and NCCL calls in the CUDA fabric.
// A failed call becomes a FabricError naming the call, the file and the line.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "tide/fabric.hpp"

namespace tide::fabric::cuda {

// Device and NCCL failures.
inline constexpr FabricError::Kind kDeviceErrorKind = FabricError::Kind::kDevice;

[[noreturn]] void throwCudaError(cudaError_t err, const char* expr, const char* file, int line);
[[noreturn]] void throwDriverError(CUresult err, const char* expr, const char* file, int line);
[[noreturn]] void throwNcclError(ncclResult_t err, const char* expr, const char* file, int line);
[[noreturn]] void throwUsage(const std::string& message);

}  // namespace tide::fabric::cuda

#define TIDE_CUDA_CHECK(expr)                                                    \
  do {                                                                           \
    const cudaError_t tide_err_ = (expr);                                        \
    if (tide_err_ != cudaSuccess)                                                \
      ::tide::fabric::cuda::throwCudaError(tide_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define TIDE_CU_CHECK(expr)                                                        \
  do {                                                                             \
    const CUresult tide_err_ = (expr);                                             \
    if (tide_err_ != CUDA_SUCCESS)                                                 \
      ::tide::fabric::cuda::throwDriverError(tide_err_, #expr, __FILE__, __LINE__); \
  } while (0)

// For calls on a nonblocking communicator: ncclInProgress means issued, the
// caller then awaits the communicator (awaitCommReady, nccl_bootstrap.hpp).
#define TIDE_NCCL_ISSUE(expr)                                                     \
  do {                                                                            \
    const ncclResult_t tide_err_ = (expr);                                        \
    if (tide_err_ != ncclSuccess && tide_err_ != ncclInProgress)                  \
      ::tide::fabric::cuda::throwNcclError(tide_err_, #expr, __FILE__, __LINE__); \
  } while (0)

#define TIDE_NCCL_CHECK(expr)                                                    \
  do {                                                                           \
    const ncclResult_t tide_err_ = (expr);                                       \
    if (tide_err_ != ncclSuccess)                                                \
      ::tide::fabric::cuda::throwNcclError(tide_err_, #expr, __FILE__, __LINE__); \
  } while (0)
