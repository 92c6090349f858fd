// This build has no CUDA fabric (no nvcc or no NCCL when it was configured).
#include "capi/fabric_factory.hpp"

namespace tide::capi {

bool cudaFabricBuilt() { return false; }

FabricHandle makeCudaFabric(const tideCommConfig_t&, const tideUniqueId_t&, int, int) {
  throw fabric::FabricError(fabric::FabricError::Kind::kUsage,
                            "this build of libtide has no CUDA fabric (built without nvcc or NCCL)");
}

FabricHandle makeCudaIpcFabric(const tideCommConfig_t&, const char*, int, int) {
  throw fabric::FabricError(fabric::FabricError::Kind::kUsage,
                            "this build of libtide has no CUDA fabric (built without nvcc or NCCL)");
}

void makeCudaUniqueId(tideUniqueId_t*) {
  throw fabric::FabricError(fabric::FabricError::Kind::kUsage,
                            "this build of libtide has no CUDA fabric (built without nvcc or NCCL)");
}

}  // namespace tide::capi
