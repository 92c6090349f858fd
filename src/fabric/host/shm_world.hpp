// Multi-process mode of the host fabric: one process per rank (as under
// torchrun). Each rank puts its arena and counters in a POSIX shared-memory
// segment, rank 0's segment also holds the job-wide failure flag and message,
// and every rank maps every other rank's segment; the HostEndpoint then works
// from those mappings exactly as in threads mode, polling its counters
// (processes share no condition variables).
//
// Bootstrap through a KeyValueStore, all waits bounded by
// bootstrapTimeoutSeconds (the C API: the host deadline of its timeoutSeconds, when given):
//   1. rank 0 draws a random job id and publishes it;
//   2. each rank creates and initialises its segment, named
//      "/tide-<job>-<rank>-p<pid>-n<pidns>" (shmSegmentName) after the job and
//      the process that creates it, then publishes the name;
//   3. each rank maps every published segment and checks its header (same
//      job, same topology, same arena size);
//   4. a store barrier: everyone has mapped everything; each rank then unlinks
//      every name. From here on nothing is left in /dev/shm, whoever crashes.
// A rank whose bootstrap fails (a peer never came, or died) unlinks every
// name of the job before it throws (those it mapped, and the rest found in
// /dev/shm by the job id), so a segment whose owner died before step 4 does
// not outlive the job, as long as some rank lives to fail. Where none does
// (every rank killed during its bootstrap, e.g. a launcher's SIGKILL before
// step 4; a library cannot run code in a process that is killed), the next
// bootstrap on the host removes the segments, saying so on stderr: before it
// creates its own, each rank unlinks every name of that exact format, owned
// by its user, whose creator is gone and was of its own pid namespace. Names
// of another namespace (a container sharing /dev/shm) are that namespace's to
// sweep; names without one (an older build's, or no /proc) once older than
// max(kStaleSegmentAgeSeconds, its own bootstrap deadline) (shm_names.hpp).
// Until a bootstrap runs in the creator's namespace, or for a creator's pid
// that a live process took over, the segments stay; `rm /dev/shm/tide-*`
// with no TIDE job running removes them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fabric/host/host_fabric.hpp"
#include "fabric/host/kv_store.hpp"
#include "fabric/host/shm_names.hpp"
#include "fabric/host/shm_segment.hpp"

namespace tide::fabric::host {

struct SharedWorldOptions {
  // Namespace of this world's keys. Ranks that share one store but form
  // different worlds (different process groups) need different prefixes;
  // worlds built one after another by the same ranks need not, they are
  // numbered.
  std::string keyPrefix = "tide/shm/";
  double bootstrapTimeoutSeconds = 60.0;
};

// This process's rank of a multi-process host-fabric job: owns the mappings
// of every rank's segment and the rank's HostEndpoint. Every rank of the
// topology must construct one (a collective call); the constructor returns
// when all have, or throws FabricError naming the rank and what it waited
// for (std::system_error where the OS refuses shared memory).
class SharedWorld {
 public:
  SharedWorld(plan::Topology topo, int rank, int64_t arenaBytes, KeyValueStore& store,
              HostOptions options = {}, SharedWorldOptions shm = {});
  ~SharedWorld();
  SharedWorld(const SharedWorld&) = delete;
  SharedWorld& operator=(const SharedWorld&) = delete;

  Endpoint& endpoint() { return *endpoint_; }
  int rank() const { return rank_; }
  const std::string& jobId() const { return jobId_; }
  // Every rank's `mine` (the same length on every rank, at most
  // kMaxGatherWords), rank-major, through a board in each rank's segment
  // header, under `timeoutSeconds`: a collective over the world's ranks,
  // host-blocking, polled (FabricError: kTimeout naming the ranks never heard
  // from, kPeerFailure once the job's failure record is set).
  static constexpr size_t kMaxGatherWords = 4;
  std::vector<uint64_t> gatherWords(const std::vector<uint64_t>& mine, double timeoutSeconds);
  // Bytes of this rank's shared-memory segment (header, counters, arena).
  int64_t segmentBytes() const { return static_cast<int64_t>(segments_.at(static_cast<size_t>(rank_)).size()); }

 private:
  void bootstrap(KeyValueStore& store, const std::string& keys, int64_t arenaBytes, double timeoutSeconds);
  void unlinkAllNames() const noexcept;
  // Writes `message` as the job's first failure, where rank 0's segment is trusted.
  void recordJobFailure(const std::string& message) noexcept;
  RankMemory rankMemory(int64_t arenaBytes) const;

  plan::Topology topo_;
  int rank_;
  std::string jobId_;
  uint64_t gathers_ = 0;  // gatherWords calls so far
  std::vector<ShmSegment> segments_;  // indexed by rank
  // Rank 0's segment (it holds the job's failure record) was made here or
  // passed checkPeerSegment: only then may a failure be written into it.
  bool rank0Checked_ = false;
  // Declared last so it is destroyed first: its queues may still touch the
  // segments while they drain.
  std::unique_ptr<HostEndpoint> endpoint_;
};

}  // namespace tide::fabric::host
