// Communicators of one rank of the CUDA fabric: the world communicator from an
// NCCL unique id, the rail communicator (color = local rank, key = node) where
// NCCL carries the rails, and
// the load/store-accessible (LSA) team NCCL builds windows over.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "fabric/gather_frames.hpp"
#include "tide/plan.hpp"

namespace tide::fabric::cuda {

// Contiguous world ranks on this rank's host; NCCL 2.28 maps a window across
// exactly this team (and across none when the host's ranks are not contiguous).
struct LsaTeam {
  int first = 0;
  int size = 1;
  bool contains(int worldRank) const { return worldRank >= first && worldRank < first + size; }
  int lsaRank(int worldRank) const { return worldRank - first; }
};

class NcclComms {
 public:
  // `deadlineSeconds` bounds every host wait on the world communicator's
  // work: its creation, splits, window registration, bootstrap collectives,
  // barriers and finalization. The world communicator is nonblocking, so that
  // a rank that never joins (or is gone) fails the wait with a kTimeout
  // FabricError and the communicators are aborted, instead of hanging the
  // caller in NCCL. The rail communicators split from it are blocking: their
  // sends and receives are enqueued on the data path, where a nonblocking
  // group would cost a host thread per call; their waits are the in-stream
  // watchdog's.
  NcclComms(const ncclUniqueId& id, const plan::Topology& topo, int rank, int device, double deadlineSeconds);
  ~NcclComms();
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  ncclComm_t world() const { return world_; }
  // The communicator the arena's symmetric window is registered on: the
  // world's where it lives on one host (one LSA team), else this host's
  // ranks, split from it at construction. NCCL >= 2.29 makes symmetric
  // windows on a communicator across hosts only with GPU-initiated
  // networking (GIN) and otherwise returns none, without an error (2.30.7
  // across two hosts over sockets: BENCHMARKS.md, session 18); 2.28 mapped
  // the host's part. The window only ever maps this host's peers.
  ncclComm_t windowComm() const { return host_ != nullptr ? host_ : world_; }
  // Collective over the world communicator, once, after construction: the
  // rail communicator of this rank (color = local rank, key = node) when
  // `join`, none (rail() stays null) otherwise. With `rma` (NCCL >= 2.29
  // only), the rail communicator has RMA contexts and a second one,
  // railCredit(), joins the same ranks for the credits of RMA rails. A
  // split is collective: `creditSplit` (the second split, joined only with
  // `rma`) must be the same on every rank.
  void splitRails(const plan::Topology& topo, bool join, bool rma = false, bool creditSplit = false);
  ncclComm_t rail() const { return rail_; }
  ncclComm_t railCredit() const { return railCredit_; }
  // Collective over the world communicator, after splitRails(..., rma):
  // whether NCCL grants host RMA on every rank's rail communicator
  // (ncclCommQueryProperties' hostRmaSupport where the library has it; NCCL
  // also wants symmetric memory, and across hosts its RMA proxy). Empty when
  // every rank's does; else why not, as this rank sees it.
  std::string railRmaUnsupported();
  // Collective over the world communicator: the RMA rail communicators are
  // replaced by a plain one for send/recv rails (joined when `join`).
  void resplitRailsForSendRecv(const plan::Topology& topo, bool join);
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  int device() const { return device_; }
  const LsaTeam& lsaTeam() const { return lsa_; }
  int ncclVersion() const { return ncclVersion_; }
  // A digest of the unique id the communicators were made from: the same on
  // every rank, different for every other communicator (the arena's tag nonce).
  uint64_t idDigest() const { return idDigest_; }

  // Every rank's `mine` (the same length on every rank, else every rank
  // fails alike; at most kMaxGatherWords), rank-major: an all-gather on the world communicator,
  // under the deadline, through a buffer allocated at construction (no
  // cudaFree while collectives run). On failure (`what` names it) the
  // communicators are marked broken.
  static constexpr size_t kMaxGatherWords = kGatherFrameWords - 1;
  std::vector<uint64_t> gatherWords(const std::vector<uint64_t>& mine, const std::string& what);
  // Host-side barrier over the world communicator (a one-int all-reduce).
  // Past the deadline, or on an NCCL error, it throws and marks the
  // communicators broken.
  void barrier();
  // Waits under the deadline until the world communicator's last call is done
  // (awaitCommReady); on failure marks the communicators broken and throws.
  void awaitWorld(const std::string& what);
  // The same for another of these communicators (the window's).
  void awaitComm(ncclComm_t comm, const std::string& what);
  // Sum of `value` over every rank (a one-int all-reduce on the world communicator).
  int sumOverWorld(int value);
  // Throws, on every rank alike, unless every rank passes the same `value`
  // (two sums: all equal exactly when ranks * sum(v^2) == sum(v)^2). `what`
  // names what the value stands for, and `mine` this rank's side of it.
  void requireSameOnEveryRank(int value, const std::string& what, const std::string& mine);

  // A wait on these communicators failed (a peer gone, a deadline passed):
  // work may be outstanding that will never complete, so they are released
  // with ncclCommAbort instead of ncclCommFinalize, which would wait for it,
  // and no collective call (a window's deregistration) is made on them.
  void markBroken() { broken_ = true; }
  // The first asynchronous error NCCL reports on any of these communicators
  // (ncclCommGetAsyncError, with ncclGetLastError's text), or "" when none.
  // Any thread may ask (the watchdog does, while waits are pending).
  std::string asyncError() const;
  bool broken() const { return broken_; }
  // Broken: aborts every communicator now, all abort flags set before any
  // cleanup runs (one NCCL group). An NCCL kernel of a gone peer's collective
  // spins until its flag is set, and a cudaFree or cudaFreeHost anywhere
  // would wait for that kernel: so this comes before freeing any memory.
  void abortIfBroken() noexcept;
  double deadlineSeconds() const { return deadlineSeconds_; }

 private:
  void release() noexcept;
  void splitHost();  // host_ (see windowComm)
  // Throws when NCCL reports NVLink multicast on `comm` (multicastRefusalForComm):
  // NCCL may have read NCCL_NVLS_ENABLE before it was set.
  void refuseMulticastComm(ncclComm_t comm, const char* which) const;
  // Waits for stream_ under the deadline (awaitNcclStream); marks broken on failure.
  void awaitStream(const std::string& what);

  int rank_ = 0;
  int ranks_ = 1;
  int device_ = 0;
  int ncclVersion_ = 0;
  uint64_t idDigest_ = 0;
  double deadlineSeconds_ = 60;
  bool broken_ = false;
  ncclComm_t world_ = nullptr;
  ncclComm_t host_ = nullptr;  // null on one host
  ncclComm_t rail_ = nullptr;
  ncclComm_t railCredit_ = nullptr;
  cudaStream_t stream_ = nullptr;
  // Device scratch for bootstrap collectives and gatherWords: (ranks + 1) x kGatherFrameWords words.
  uint64_t* scratch_ = nullptr;
  size_t scratchWords_ = 0;
  LsaTeam lsa_;
};

// Multicast is off unless TIDE_ENABLE_MULTICAST=1 (DESIGN §2): throws a
// usage FabricError unless NCCL_NVLS_ENABLE=0 is in the environment
// (fabric/multicast_policy says why TIDE refuses rather than sets it).
void requireMulticastOff();

// Waits until the nonblocking `comm` has finished its last call (init, split,
// window registration, finalization, or a collective's enqueue: ncclInProgress
// until then). Throws FabricError: kDevice on an NCCL error, kTimeout once
// `deadlineSeconds` have passed, naming `what`. Stream work that must follow a
// collective is enqueued only after this returns: until then NCCL may not
// have put the collective on the stream.
void awaitCommReady(ncclComm_t comm, double deadlineSeconds, const std::string& what);

// Releases the nonblocking `comm`: ncclCommFinalize awaited under
// `deadlineSeconds`, then ncclCommDestroy; ncclCommAbort where finalization
// fails or does not complete in time (said on stderr).
void finalizeOrAbort(ncclComm_t comm, double deadlineSeconds) noexcept;

// Waits until `stream` has drained while watching `comms`' asynchronous
// errors (null entries are skipped; one still in progress counts as not
// drained). Throws FabricError: kDevice on a CUDA or NCCL error, kTimeout once
// `deadlineSeconds` have passed, naming `what`. A host wait on NCCL work that
// a peer may never join goes through this, never through
// cudaStreamSynchronize, so a peer that is gone fails the wait.
void awaitNcclStream(cudaStream_t stream, std::initializer_list<ncclComm_t> comms, double deadlineSeconds,
                     const std::string& what);

// Every rank's `mine` (the same length on every rank), rank-major: a
// collective all-gather on `comm` through `dev` (device memory of `devWords`
// words: (ranks + 1) x kGatherFrameWords at least), awaited under
// `deadlineSeconds` (FabricError as awaitNcclStream's, naming `what`). Ranks
// that bring different counts fail alike with a usage error (gather_frames.hpp). On failure the
// gather may still be in flight: the caller aborts `comm` before freeing `dev`.
std::vector<uint64_t> allGatherWords(ncclComm_t comm, int ranks, const std::vector<uint64_t>& mine, uint64_t* dev,
                                     size_t devWords, cudaStream_t stream, double deadlineSeconds,
                                     const std::string& what);

// The LSA team of `rank` in `comm`: the contiguous run of ranks on this host
// (collective: an all-gather of host identities, awaited under `deadlineSeconds`).
LsaTeam discoverLsaTeam(ncclComm_t comm, int rank, int ranks, uint64_t* dev, size_t devWords, cudaStream_t stream,
                        double deadlineSeconds);

// 64-bit identity of this host: NCCL_HOSTID if set, else hostname + boot id
// (what NCCL uses to group ranks by host).
uint64_t hostIdentity();

}  // namespace tide::fabric::cuda
