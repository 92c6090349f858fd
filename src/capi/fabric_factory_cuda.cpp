// The CUDA fabric for the C API: NCCL bootstrap from a unique id, or (tests)
// CUDA IPC ranks bootstrapped through a file store.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "capi/fabric_factory.hpp"
#include "fabric/cuda/cuda_endpoint.hpp"
#include "fabric/cuda/ipc_ranks.hpp"
#include "fabric/host/file_store.hpp"

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

namespace {

fabric::cuda::CudaFabricOptions optionsFor(const tideCommConfig_t& config, int queues, int counters) {
  fabric::cuda::CudaFabricOptions opt;
  opt.topology = plan::Topology::make(config.nodes, config.gpusPerNode);
  opt.rank = config.rank;
  opt.device = config.device;
  opt.arenaBytes = config.arenaBytes;
  opt.numQueues = queues;
  opt.numCounters = counters;
  if (config.timeoutSeconds > 0) opt.waitTimeoutSeconds = config.timeoutSeconds;
  return opt;
}

// The handle's calls on `raw`; `owner` keeps it (and what it needs) alive.
FabricHandle handleFor(fabric::cuda::CudaEndpoint* raw, std::shared_ptr<void> owner, const char* name) {
  FabricHandle h;
  h.endpoint = raw;
  h.bindStream = [raw](void* stream) { raw->setCallerStream(static_cast<cudaStream_t>(stream)); };
  h.releaseStream = [raw] { raw->clearCallerStream(); };
  // Queue 0, the caller's stream by now, waits for the event (recorded on
  // whatever stream queue 0 was when the collective ran); the host does not block.
  h.callerWait = [raw](int q, uint64_t event) { raw->waitEvent(0, q, event); };
  h.gatherWords = [raw](const std::vector<uint64_t>& mine, const std::string& what) {
    return raw->gatherWords(mine, what);
  };
  h.reservedBytes = raw->windowBytes();
  h.owner = std::move(owner);
  h.name = name;
  return h;
}

// An IPC rank's store, group and endpoint; members are destroyed in reverse
// order of declaration, so the endpoint goes first and the store last.
struct IpcRank {
  std::unique_ptr<fabric::host::FileStore> store;
  std::unique_ptr<fabric::cuda::IpcGroup> group;
  std::unique_ptr<fabric::cuda::CudaEndpoint> endpoint;
};

}  // namespace

FabricHandle makeCudaFabric(const tideCommConfig_t& config, const tideUniqueId_t& id, int queues, int counters) {
  ncclUniqueId nid;
  std::memcpy(&nid, id.internal, sizeof nid);
  auto ep = std::make_shared<fabric::cuda::CudaEndpoint>(optionsFor(config, queues, counters), nid);
  fabric::cuda::CudaEndpoint* raw = ep.get();
  return handleFor(raw, ep, "cuda");
}

FabricHandle makeCudaIpcFabric(const tideCommConfig_t& config, const char* storeDir, int queues, int counters) {
  int device = config.device;
  if (device < 0 && cudaGetDevice(&device) != cudaSuccess)
    throw fabric::FabricError(fabric::FabricError::Kind::kDevice, "CUDA IPC ranks: no current CUDA device");
  auto rank = std::make_shared<IpcRank>();
  rank->store = std::make_unique<fabric::host::FileStore>(storeDir);
  const double timeout = config.timeoutSeconds > 0 ? config.timeoutSeconds : 120;
  rank->group = std::make_unique<fabric::cuda::IpcGroup>(*rank->store, "tide", config.rank,
                                                         config.nodes * config.gpusPerNode, device, timeout);
  rank->endpoint = std::make_unique<fabric::cuda::CudaEndpoint>(optionsFor(config, queues, counters), *rank->group);
  fabric::cuda::CudaEndpoint* raw = rank->endpoint.get();
  return handleFor(raw, rank, "cuda-ipc");
}

}  // namespace tide::capi
