// The CUDA fabric for the C API: NCCL bootstrap from a unique id.
#include <cstring>
#include <memory>

#include "capi/fabric_factory.hpp"
#include "fabric/cuda/cuda_endpoint.hpp"

namespace tide::capi {

static_assert(sizeof(ncclUniqueId) <= TIDE_UNIQUE_ID_BYTES, "tideUniqueId_t too small for ncclUniqueId");

bool cudaFabricBuilt() { return true; }

void makeCudaUniqueId(tideUniqueId_t* id) {
  ncclUniqueId nid;
  if (ncclGetUniqueId(&nid) != ncclSuccess)
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "ncclGetUniqueId failed");
  std::memset(id, 0, sizeof *id);
  std::memcpy(id->internal, &nid, sizeof nid);
}

FabricHandle makeCudaFabric(const tideCommConfig_t& config, const tideUniqueId_t& id, int queues, int counters) {
  fabric::cuda::CudaFabricOptions opt;
  opt.topology = plan::Topology::make(config.nodes, config.gpusPerNode);
  opt.rank = config.rank;
  opt.device = config.device;
  opt.arenaBytes = config.arenaBytes;
  opt.numQueues = queues;
  opt.numCounters = counters;
  if (config.timeoutSeconds > 0) opt.waitTimeoutSeconds = config.timeoutSeconds;
  ncclUniqueId nid;
  std::memcpy(&nid, id.internal, sizeof nid);
  auto ep = std::make_shared<fabric::cuda::CudaEndpoint>(opt, nid);
  FabricHandle h;
  h.endpoint = ep.get();
  fabric::cuda::CudaEndpoint* raw = ep.get();
  h.bindStream = [raw](void* stream) { raw->setCallerStream(static_cast<cudaStream_t>(stream)); };
  // Queue 0 becomes `stream`, which then waits for the event (recorded on
  // whatever stream queue 0 was when the collective ran); the host does not block.
  h.callerWait = [raw](void* stream, int q, uint64_t event) {
    raw->setCallerStream(static_cast<cudaStream_t>(stream));
    raw->waitEvent(0, q, event);
  };
  h.reservedBytes = raw->windowBytes();
  h.owner = ep;
  h.name = "cuda";
  return h;
}

}  // namespace tide::capi
