// Copy-engine copies for one queue: flat copies go out as one
// cudaMemcpyBatchAsync, strided ones as cudaMemcpy2DAsync. Copies of one call
// may run in any order relative to each other (batch semantics), so they must
// not overlap; calls on one stream run in order.
//
// A call's copy list that recurs with the same addresses, as every FSDP2
// all-gather and reduce-scatter of one group does from step to step, goes out
// as one launch of a graph of memcpy nodes built for exactly those addresses,
// from the first sighting after the owner's next buildWanted() that follows
// its second sighting (building waits for the device to idle, so the owner
// builds only where nothing of TIDE's waits: fabric/device_quiescence.hpp).
// The driver then costs the issuing thread about 1.2 us per copy instead of
// 4.5-8 (tide_copy_launch_probe, BENCHMARKS.md),
// and the nodes still run on copy engines. Only the arenas (this rank's and
// its peers', which live as long as the endpoint) and device memory of this
// GPU enter graphs; lists with memory outside the arenas only while their
// graphs are launched often enough to pay for their builds (a caching
// allocator need not hand gradients out at the same addresses every step).
// An engine keeps at most 1024 graphs (the least recently launched goes
// first; the policy is fabric/copy_list_cache.hpp). TIDE_COPY_GRAPHS=0 turns
// them off.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "fabric/copy_list_cache.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric::cuda {

// Enqueues `ops` on `stream` without graphs; returns the bytes they move.
// Throws on a bad copy before enqueuing any.
int64_t issueCopies(cudaStream_t stream, const std::vector<CopyOp>& ops);

class CopyEngine {
 public:
  struct Window {
    const void* base = nullptr;
    int64_t bytes = 0;
  };
  struct GraphStats {
    int64_t launches = 0;  // calls that went out as one graph launch
    int64_t built = 0;     // graphs built (distinct recurring copy lists)
    int64_t dropped = 0;   // least recently used graphs destroyed to stay under the cap
  };

  // `stable`: address ranges that outlive this engine (the arenas), known
  // graphable without asking the driver; `device`: this rank's GPU; `upload`:
  // an idle stream of the owner's for graph uploads (another stream would take
  // a hardware queue of its own, and ranks sharing a GPU have few to spare).
  CopyEngine(int device, std::vector<Window> stable, cudaStream_t upload);
  ~CopyEngine();
  CopyEngine(const CopyEngine&) = delete;
  CopyEngine& operator=(const CopyEngine&) = delete;

  // A list is built from the addresses of its sightings, calls later; memory
  // outside the arenas may have gone back to the driver since and been handed
  // out again with other bounds (an allocator under memory pressure empties
  // its cache), and the driver then refuses a copy that no longer lies in one
  // allocation (on an H100 with CUDA 13 it accepts one across two mappings of
  // one reserved range, as an expandable segment lays a block out; see
  // tests/cuda/copy_graph_refusal_test.cpp). That is the list's fault, not the
  // graphs': one refusal declines that list only. (A copy outside the arenas
  // whose first or last byte is no longer this GPU's memory is declined
  // before the driver is asked, uncounted: graphable.)
  // Refusals that keep coming say something else is wrong, and each costs a
  // build's host time: then graphs go off.
  static constexpr int kRefusalsBeforeGraphsOff = 8;

  // As issueCopies, through a cached graph where the list qualifies.
  int64_t issue(cudaStream_t stream, const std::vector<CopyOp>& ops);
  // Lists sighted twice and not yet built.
  bool hasWanted() const { return enabled_ && cache_.hasWanted(); }
  // Builds (and uploads) their graphs; only where the device is quiescent
  // (fabric/device_quiescence.hpp): building may wait for the whole device to idle.
  void buildWanted();
  GraphStats graphStats() const;

 private:
  bool inStable(const void* p, int64_t bytes) const;
  // Both sides of `op` lie in the arenas (an empty copy does too).
  bool inArenas(const CopyOp& op) const;
  // In the arenas, or this GPU's device memory at both ends (asked of the driver).
  bool graphable(const void* p, int64_t bytes) const;
  // One line on stderr whenever building lists outside the arenas pauses or resumes.
  void reportVolatilePolicy();
  // Null when the list holds memory that stays out, or when the driver refuses
  // it: that list then goes out as batches from then on (the cache declines it),
  // and after kRefusalsBeforeGraphsOff refusals graphs go off, each step logged.
  cudaGraphExec_t build(const std::vector<CopyOp>& ops);

  int device_ = 0;
  cudaStream_t upload_ = nullptr;  // a graph's upload at its build, off every queue (the owner's)
  std::vector<Window> stable_;
  bool enabled_ = true;
  int refusedBuilds_ = 0;  // lists whose graph the driver refused
  bool volatileBuildsPay_ = true;  // as last reported
  CopyListCache<cudaGraphExec_t> cache_;
  // Graphs uploaded but not yet launched: the event their first launch waits for.
  std::unordered_map<cudaGraphExec_t, cudaEvent_t> uploads_;
};

}  // namespace tide::fabric::cuda
