// Several ranks of one topology as threads of one process on one GPU, so the
// CUDA fabric's multi-rank protocols (counters across ranks, copy-engine
// rails, Level 1 staging and sums, Level 2 landings) run for every (M, L) of a
// few ranks on a machine with a single GPU. Every rank's arena is plain device
// memory of that GPU (cudaMalloc), a peer reaches it by its address, rails are
// copy-engine copies, and the host barrier is the group's.
//
// A test configuration, not a fast one: the ranks share one GPU's SMs and copy
// engines. Each rank's streams count against CUDA_DEVICE_MAX_CONNECTIONS;
// past it, streams share hardware queues, where a blocked stream wait can hold
// up another rank's producer (the wait's deadline then fails the run). Below
// it too, the ranks share the context's channels and copy-engine queues: three
// ranks' all-gathers on unordered caller streams stalled at random, which one
// process per rank (ipc_ranks) never did (BENCHMARKS, session 27).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "fabric/cuda/device_arena.hpp"
#include "fabric/cuda/local_group.hpp"

namespace tide::fabric::cuda {

class CoResidentGroup final : public LocalGroup {
 public:
  CoResidentGroup(int ranks, int device, double barrierTimeoutSeconds = 120);
  ~CoResidentGroup() override;
  CoResidentGroup(const CoResidentGroup&) = delete;
  CoResidentGroup& operator=(const CoResidentGroup&) = delete;

  int ranks() const override { return ranks_; }
  int device() const override { return device_; }
  double timeoutSeconds() const { return timeout_; }
  // Drawn when the group is made: its arenas' tag nonce (device_arena.hpp).
  uint64_t arenaNonce() const { return nonce_; }
  // One stream for every rank's control work (arena setup, counter reads,
  // graph uploads: synchronous and rare). A stream per rank would take a
  // hardware queue per rank: four ranks' queues and control streams fill all
  // 32, and a stream wait sharing a hardware queue with another stream's
  // producer stalls it (seen on an H200: a wait stuck with its counter met).
  cudaStream_t sharedControlStream() const override { return control_; }
  // Host barrier of the group's ranks, one thread each. Throws
  // FabricError(kTimeout) when not every rank arrives within the deadline;
  // the group is broken from then on (every later barrier throws at once).
  void barrier(int rank) override;
  std::vector<uint64_t> gatherWords(int rank, const std::vector<uint64_t>& mine) override;
  // Publishes `rank`'s arena base and waits for every rank's: the bases by rank.
  std::vector<std::byte*> exchangeBases(int rank, std::byte* base);
  std::unique_ptr<DeviceArena> makeArena(int rank, int64_t userBytes, int numCounters, cudaStream_t stream) override;
  std::string description() const override { return "co-resident ranks on one GPU"; }
  // An arena setup of some rank timed out: its copies may still read any
  // rank's arena (they share the control stream and every peer address), so
  // every rank's arena is kept allocated from then on, not only that rank's.
  void noteArenaSetupTimeout() noexcept { arenaSetupTimedOut_ = true; }
  bool arenaSetupTimedOut() const noexcept { return arenaSetupTimedOut_; }

 private:
  const int ranks_;
  const int device_;
  const double timeout_;
  const uint64_t nonce_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
  std::vector<std::byte*> bases_;
  std::vector<std::vector<uint64_t>> words_;  // gatherWords' slots, by rank
  cudaStream_t control_ = nullptr;
  std::atomic<bool> arenaSetupTimedOut_{false};
};

// A co-resident rank's arena: cudaMalloc memory; every rank of the group is
// load/store reachable. Collective over the group (exchanges the bases and
// checks every peer's tag).
class CoResidentArena final : public DeviceArena {
 public:
  CoResidentArena(CoResidentGroup& group, int rank, int64_t userBytes, int numCounters, cudaStream_t stream);
  ~CoResidentArena() override;

 private:
  // Frees the memory unless this rank's setup or any other rank's timed out.
  void release() noexcept;

  CoResidentGroup& group_;  // outlives its ranks' arenas
};

}  // namespace tide::fabric::cuda
