#include "fabric/cuda/cuda_check.hpp"

#include <string>

namespace tide::fabric::cuda {

namespace {
std::string where(const char* expr, const char* file, int line) {
  return std::string(expr) + " at " + file + ":" + std::to_string(line);
}
}  // namespace

void throwCudaError(cudaError_t err, const char* expr, const char* file, int line) {
  throw FabricError(kDeviceErrorKind, std::string("CUDA error ") + cudaGetErrorName(err) + " (" +
                                          cudaGetErrorString(err) + ") in " +
                                          where(expr, file, line));
}

void throwDriverError(CUresult err, const char* expr, const char* file, int line) {
  throw FabricError(kDeviceErrorKind, "CUDA driver error " + std::to_string(static_cast<int>(err)) +
                                          " in " + where(expr, file, line));
}

void throwNcclError(ncclResult_t err, const char* expr, const char* file, int line) {
  throw FabricError(kDeviceErrorKind, std::string("NCCL error ") + ncclGetErrorString(err) + " (" +
                                          ncclGetLastError(nullptr) + ") in " +
                                          where(expr, file, line));
}

void throwUsage(const std::string& message) {
  throw FabricError(FabricError::Kind::kUsage, "cuda fabric: " + message);
}

}  // namespace tide::fabric::cuda
