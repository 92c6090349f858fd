// RMA rails of the host fabric (HostRails::kRma): the two-sided rail
// contract carried by one-sided puts and counted signals (RmaRendezvous),
// over RmaSignalBoard's counts, so that the translation the CUDA fabric runs
// on NCCL's host RMA runs, and fails, on CPUs first.
#include <cstring>
#include <string>

#include "fabric/host/failure_record.hpp"
#include "fabric/host/host_fabric.hpp"
#include "fabric/host/protocol_checker.hpp"
#include "fabric/seconds_text.hpp"

namespace tide::fabric::host {

namespace {
using Access = ProtocolChecker::Access;

// Happens-before edges of the signal counts for the checker, under ids no
// counter (or the mailbox's edges) uses.
constexpr int kRmaDataId = 3 * kCountersPerRank;    // + sender rank: data signals counted at the receiver
constexpr int kRmaCreditId = 4 * kCountersPerRank;  // + receiver rank: credits counted at the sender
}  // namespace

void HostEndpoint::joinRmaGroup(int q) {
  if (rmaQueue_ < 0) rmaQueue_ = q;
  if (q != rmaQueue_)
    throw FabricError(FabricError::Kind::kUsage,
                      "rank " + std::to_string(rank_) + ": RMA rail transfer on queue " + std::to_string(q) +
                          " after queue " + std::to_string(rmaQueue_) +
                          ": signal counts are per peer, so rails must stay on one queue");
  if (rmaTaken_.empty()) rmaTaken_.assign(static_cast<size_t>(topo_.ranks()) * 2, 0);
}

void HostEndpoint::flushRmaRails() {
  if (!rmaGroup_.pending()) return;
  RmaRendezvous group;
  std::swap(group, rmaGroup_);
  std::string call;
  {
    std::lock_guard<std::mutex> lock(callMu_);
    call = call_;
  }
  submit(rmaQueue_, "RMA rail group", [this, group = std::move(group), call](int task) mutable {
    // The ops of one group, run in this task: waits block it (deadline,
    // stop), puts land in reverse order at the end of the put phase.
    class Ops final : public RmaRailOps {
     public:
      Ops(HostEndpoint& ep, int task, const std::string& call) : ep_(ep), task_(task), call_(call) {}
      void grantCredit(int peer) override { raiseCount(peer, RmaSignalBoard::kCredit, kRmaCreditId); }
      void awaitCredits(const std::vector<PeerCount>& from) override {
        await(from, RmaSignalBoard::kCredit, kRmaCreditId, "credits for rail puts");
      }
      void putWithSignal(const RmaPut& put) override { pending_.push_back(put); }
      void awaitPuts(const std::vector<PeerCount>& from) override {
        land();
        await(from, RmaSignalBoard::kData, kRmaDataId, "rail puts");
      }
      void setCounter(int id, uint64_t value) override {
        land();
        if (ep_.checker_) ep_.checker_->signal(task_, ep_.rank_, id, value);
        ep_.raise(ep_.rank_, id, value);
      }
      // The puts issued so far, last first: a data signal may overtake the
      // bytes of an earlier put, never its own.
      void land() {
        for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
          std::byte* dst = ep_.peerArena(it->peer) + it->dstOffset;
          if (ep_.checker_) {
            ep_.checker_->access(task_, it->src, it->bytes, Access::kRead);
            ep_.checker_->access(task_, dst, it->bytes, Access::kWrite);
          }
          std::memcpy(dst, it->src, static_cast<size_t>(it->bytes));
          if (ep_.dropThisSignal()) continue;  // injected: the put's signal is lost
          raiseCount(it->peer, RmaSignalBoard::kData, kRmaDataId);
        }
        pending_.clear();
      }

     private:
      RmaSignalBoard& board() { return *ep_.mem_.rma; }
      // The checker hears of the signal before the peer can see the count
      // (this rank is the count's only writer, so the next value is known).
      void raiseCount(int peer, RmaSignalBoard::Class cls, int edgeBase) {
        if (ep_.checker_)
          ep_.checker_->signal(task_, peer, edgeBase + ep_.rank_, board().count(peer, ep_.rank_, cls) + 1);
        board().add(peer, ep_.rank_, cls);
      }
      void await(const std::vector<PeerCount>& from, RmaSignalBoard::Class cls, int edgeBase, const char* what) {
        const auto end = ep_.deadline();
        auto stop = [this] { return ep_.stopRequested(); };
        for (const PeerCount& pc : from) {
          uint64_t& taken = ep_.rmaTaken_[static_cast<size_t>(pc.peer) * 2 + cls];
          const uint64_t total = taken + static_cast<uint64_t>(pc.count);
          if (!board().awaitTotal(ep_.rank_, pc.peer, cls, total, end, stop)) {
            const std::string state = " (" + std::to_string(board().count(ep_.rank_, pc.peer, cls)) + " of " +
                                      std::to_string(total) + " signals arrived)";
            if (ep_.stopRequested())
              throw FabricError(FabricError::Kind::kPeerFailure, "rank " + std::to_string(ep_.rank_) + " in " +
                                                                     call_ + ": stopped while waiting for " + what +
                                                                     " from rank " + std::to_string(pc.peer));
            ep_.fail(FabricError::Kind::kTimeout, "rank " + std::to_string(ep_.rank_) + " in " + call_ +
                                                      ": timed out after " +
                                                      secondsText(ep_.options_.timeoutSeconds) + " waiting for " +
                                                      std::to_string(pc.count) + " " + what + " from rank " +
                                                      std::to_string(pc.peer) + state);
          }
          taken = total;
          if (ep_.checker_) ep_.checker_->waited(task_, ep_.rank_, edgeBase + pc.peer, total);
        }
      }
      HostEndpoint& ep_;
      int task_;
      const std::string& call_;
      std::vector<RmaPut> pending_;
    };
    Ops ops(*this, task, call);
    group.flush(ops);
    ops.land();
  });
}

}  // namespace tide::fabric::host
