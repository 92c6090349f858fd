#include <memory>
#include <string>
#include <vector>

#include "capi/fabric_factory.hpp"
#include "fabric/host/file_store.hpp"
#include "fabric/host/shm_world.hpp"
#include "fabric/host_deadline.hpp"

namespace tide::capi {

FabricHandle makeHostFabric(const tideCommConfig_t& config, const char* storeDir, int queues) {
  struct Owner {
    fabric::host::FileStore store;
    std::unique_ptr<fabric::host::SharedWorld> world;
  };
  auto owner = std::make_shared<Owner>(Owner{fabric::host::FileStore(storeDir), nullptr});
  fabric::host::HostOptions opt;
  opt.queues = queues;
  fabric::host::SharedWorldOptions shm;
  if (config.timeoutSeconds > 0) {
    opt.timeoutSeconds = config.timeoutSeconds;
    // Peers that never arrive fail the bootstrap on the caller's deadline too
    // (as the CUDA fabric's), not on the default's.
    shm.bootstrapTimeoutSeconds = fabric::hostDeadlineSeconds(config.timeoutSeconds);
  }
  owner->world = std::make_unique<fabric::host::SharedWorld>(
      plan::Topology::make(config.nodes, config.gpusPerNode), config.rank, config.arenaBytes, owner->store, opt, shm);
  FabricHandle h;
  h.endpoint = &owner->world->endpoint();
  h.owner = owner;
  h.bindStream = [](void*) {};
  h.releaseStream = [] {};
  fabric::Endpoint* ep = h.endpoint;
  h.callerWait = [ep](int q, uint64_t event) { ep->synchronizeEvent(q, event); };
  const double gatherTimeout = shm.bootstrapTimeoutSeconds;
  Owner* raw = owner.get();
  h.gatherWords = [raw, gatherTimeout, rank = config.rank](const std::vector<uint64_t>& mine, const std::string& what) {
    try {
      return raw->world->gatherWords(mine, gatherTimeout);
    } catch (const fabric::FabricError& e) {
      throw fabric::FabricError(e.kind(), "rank " + std::to_string(rank) + ": " + what + ": " + e.what());
    }
  };
  h.reservedBytes = owner->world->segmentBytes();
  h.name = "host";
  return h;
}

}  // namespace tide::capi
