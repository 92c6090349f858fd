// Communicators of one rank of the CUDA fabric: the world communicator from an
// NCCL unique id, the rail communicator (color = local rank, key = node) where
// NCCL carries the rails, and
// the load/store-accessible (LSA) team NCCL builds windows over.
#pragma once

#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

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
  NcclComms(const ncclUniqueId& id, const plan::Topology& topo, int rank, int device);
  ~NcclComms();
  NcclComms(const NcclComms&) = delete;
  NcclComms& operator=(const NcclComms&) = delete;

  ncclComm_t world() const { return world_; }
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

  // Host-side barrier over the world communicator (a one-int all-reduce).
  void barrier();
  // Sum of `value` over every rank (a one-int all-reduce on the world communicator).
  int sumOverWorld(int value);

 private:
  void release() noexcept;

  int rank_ = 0;
  int ranks_ = 1;
  int device_ = 0;
  int ncclVersion_ = 0;
  ncclComm_t world_ = nullptr;
  ncclComm_t rail_ = nullptr;
  ncclComm_t railCredit_ = nullptr;
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;  // device scratch for bootstrap collectives
  LsaTeam lsa_;
};

// Multicast is off unless TIDE_ENABLE_MULTICAST=1 (DESIGN §2): forces
// NCCL_NVLS_ENABLE=0 before the first communicator is created.
void keepMulticastOff();

// The LSA team of `rank` in `comm`: the contiguous run of ranks on this host
// (collective: an all-gather of host identities).
LsaTeam discoverLsaTeam(ncclComm_t comm, int rank, int ranks, cudaStream_t stream);

// 64-bit identity of this host: NCCL_HOSTID if set, else hostname + boot id
// (what NCCL uses to group ranks by host).
uint64_t hostIdentity();

}  // namespace tide::fabric::cuda
