// Builds a rank's fabric endpoint for the C API. The CUDA half lives in
// fabric_factory_cuda.cpp and is only compiled with the CUDA fabric.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tide/fabric.hpp"
#include "tide/tide.h"

namespace tide::capi {

struct FabricHandle {
  std::shared_ptr<void> owner;                   // whatever keeps the endpoint alive
  fabric::Endpoint* endpoint = nullptr;
  std::function<void(void* stream)> bindStream;  // queue 0 := the caller's stream
  // Queue 0 := the fabric's own stream again, fenced after the caller's (CUDA;
  // a no-op on the host fabric): each call binds and releases, so that
  // Synchronize and Destroy wait for every call's stream without querying a
  // stream after its call returned. Never throws.
  std::function<void()> releaseStream;
  // Orders the caller after `event` of queue `q`: queue 0, which the caller
  // bound to its stream (bindStream), waits (CUDA), or the host blocks where
  // there are no streams (host fabric).
  std::function<void(int q, uint64_t event)> callerWait;
  // Every rank's `mine` (the same length on every rank), rank-major: a
  // host-blocking all-gather over the communicator's ranks under the
  // bootstrap's deadline, outside the collectives' protocol (for checks that
  // the ranks agree). `what` names it in errors.
  std::function<std::vector<uint64_t>(const std::vector<uint64_t>& mine, const std::string& what)> gatherWords;
  int64_t reservedBytes = 0;  // memory the fabric holds for the arena, outside any framework allocator
  const char* name = "";
};

bool cudaFabricBuilt();
// Both throw FabricError / std::invalid_argument on failure.
FabricHandle makeCudaFabric(const tideCommConfig_t& config, const tideUniqueId_t& id, int queues,
                            int counters);
void makeCudaUniqueId(tideUniqueId_t* id);
FabricHandle makeHostFabric(const tideCommConfig_t& config, const char* storeDir, int queues);
// The CUDA fabric over CUDA IPC ranks (fabric/cuda/ipc_ranks.hpp), bootstrapped through `storeDir`.
FabricHandle makeCudaIpcFabric(const tideCommConfig_t& config, const char* storeDir, int queues, int counters);

}  // namespace tide::capi
