#include "fabric/cuda/stream_memops.hpp"

#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "fabric/cuda/cuda_check.hpp"

namespace tide::fabric::cuda {

namespace {

void* entryPoint(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  // 12000: the ABI version of cuStreamWriteValue64/cuStreamWaitValue64 we call.
  TIDE_CUDA_CHECK(cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &status));
  if (status != cudaDriverEntryPointSuccess || fn == nullptr)
    throw FabricError(kDeviceErrorKind, std::string("cuda fabric: driver has no ") + name);
  return fn;
}

}  // namespace

StreamMemOps::StreamMemOps()
    : write_(entryPoint("cuStreamWriteValue64")), wait_(entryPoint("cuStreamWaitValue64")) {}

const StreamMemOps& StreamMemOps::get() {
  static const StreamMemOps ops;
  return ops;
}

void StreamMemOps::write(cudaStream_t stream, uint64_t* addr, uint64_t value) const {
  auto fn = reinterpret_cast<PFN_cuStreamWriteValue64_v11070>(write_);
  TIDE_CU_CHECK(fn(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(addr), value,
                   CU_STREAM_WRITE_VALUE_DEFAULT));
}

void StreamMemOps::waitGeq(cudaStream_t stream, const uint64_t* addr, uint64_t value) const {
  auto fn = reinterpret_cast<PFN_cuStreamWaitValue64_v11070>(wait_);
  TIDE_CU_CHECK(fn(reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(addr), value,
                   CU_STREAM_WAIT_VALUE_GEQ));
}

}  // namespace tide::fabric::cuda
