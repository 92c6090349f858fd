// Host fabric: every rank's arena, counters and queues in host memory, so the
// whole protocol runs on CPUs. Ranks are threads of one process (HostWorld) or
// processes that map each other's memory (SharedWorld, shm_world.hpp); both
// hand a HostEndpoint the same RankMemory table.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fabric/host/protocol_checker.hpp"
#include "fabric/host/host_rails.hpp"
#include "fabric/host/rail_mailbox.hpp"
#include "fabric/host/rma_signal_board.hpp"
#include "fabric/rma_rendezvous.hpp"
#include "fabric/host/work_queue.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric::host {

inline constexpr int kCountersPerRank = 16384;

// Wakes the waiters of one rank's counters (threads mode). Processes have
// none and poll.
struct Doorbell {
  std::mutex mu;
  std::condition_variable cv;
};

// Where the ranks' memory lives. Pointers for every rank of the node (others
// null in multi-process mode across nodes; the host fabric maps all ranks).
struct RankMemory {
  std::vector<std::byte*> arenas;
  std::vector<std::atomic<uint64_t>*> counters;
  std::vector<Doorbell*> doorbells;  // empty: poll
  int64_t arenaBytes = 0;
  RailMailbox* mailbox = nullptr;      // send/recv rails (threads mode)
  RmaSignalBoard* rma = nullptr;       // RMA rails (threads mode); both null: one-sided puts
  std::atomic<int>* failed = nullptr;  // set by the first rank that fails
  char* failure = nullptr;             // first failure message (kFailureBytes)
  static constexpr size_t kFailureBytes = 1024;
  // Per rank, for the message of a wait that times out (which names the peer
  // it waited for, often itself stuck behind the rank at fault): the calls
  // each rank has entered (setCallContext) and its process id (0: this
  // process, or one of another pid namespace, which is not asked about).
  // Empty: no such summary.
  std::vector<std::atomic<uint64_t>*> callsEntered;
  std::vector<int> pids;
};


struct HostOptions {
  int queues = 4;
  double timeoutSeconds = 5.0;
  bool checkProtocol = false;            // HostWorld: run the protocol checker
  HostRails rails = HostRails::kPut;     // HostWorld: how rails travel
  ProtocolChecker* checker = nullptr;    // set by the world that owns it
};

class HostEndpoint final : public Endpoint {
 public:
  HostEndpoint(plan::Topology topo, int rank, RankMemory memory, HostOptions options);
  // Throws FabricError(kUsage) for options no endpoint takes (the constructor checks them too).
  static void checkOptions(const HostOptions& options);
  ~HostEndpoint() override;
  // Tear-down in two steps (the destructor does both): every queue stops
  // taking work and its waits give up; then every worker is joined.
  void requestStop();
  void joinQueues();

  int rank() const override { return rank_; }
  const plan::Topology& topology() const override { return topo_; }
  std::byte* arena() override { return mem_.arenas[static_cast<size_t>(rank_)]; }
  int64_t arenaBytes() const override { return mem_.arenaBytes; }
  std::byte* peerArena(int peerRank) override;
  bool railsByCopy() const override { return !railsTwoSided(); }
  bool railsTwoSided() const override { return mem_.mailbox != nullptr || mem_.rma != nullptr; }
  bool railSourcesInArena() const override { return mem_.rma != nullptr; }
  std::string railsDescription() const override;
  int numQueues() const override { return static_cast<int>(queues_.size()); }
  void setCallContext(const std::string& call) override;

  void copy(int q, const std::vector<CopyOp>& ops) override;
  void sum(int q, const SumOp& op) override;
  void land(int q, const LandOp& op) override;
  void zero(int q, void* dst, int64_t bytes) override;
  void railPut(int q, int dstRank, int64_t dstOffset, const void* src, int64_t bytes, int signalId,
               uint64_t signalValue) override;
  void railPuts(int q, int dstRank, const std::vector<RailPiece>& pieces, int signalId,
                uint64_t signalValue) override;
  void railRecv(int q, int srcRank, int64_t dstOffset, int64_t bytes, int signalId, uint64_t signalValue) override;
  void signal(int q, int dstRank, int id, uint64_t value) override;
  void delay(int q, double seconds) override;
  void annotateInbox(int64_t offset, int64_t bytes) override;
  void wait(int q, int id, uint64_t value, int peer, const char* what) override;
  uint64_t record(int q) override;
  void waitEvent(int q, int srcQueue, uint64_t event) override;
  bool eventLive(int q, uint64_t event) const override;
  void synchronize(int q) override;
  void synchronizeAll() override;
  std::string failureOfIssuedWork() const override;
  void discardDeferredRails() override;
  void recordCallFailure(const std::string& message) override;
  void synchronizeEvent(int q, uint64_t event) override;
  uint64_t counterValue(int id) override;
  Stats stats() const override;
  void resetStats() override;
  void setFabricFaults(const FabricFaults& f) override;
  int64_t fabricFaultFirings() const override { return faultFirings_.load(); }

 private:
  // The bytes an access touches, as offsets from its first address: the
  // lowest and one past the highest (rows that go down, a negative pitch,
  // reach below the first address). `wraps`: an offset passes int64_t, which
  // no memory is large enough for.
  struct Extent {
    int64_t low = 0;
    int64_t high = 0;
    bool empty = true;
    bool wraps = false;
    // Row `row`: `width` items at row * pitch items, `item` bytes each. A row of no item adds nothing.
    void addRow(int64_t row, int64_t pitch, int64_t width, int64_t item = 1);
    // Rows 0 .. rows-1 (rows >= 1) of `width` items at `pitch` items apart.
    static Extent ofRows(int64_t rows, int64_t pitch, int64_t width, int64_t item = 1);
  };
  // A range that meets some rank's arena must lie inside it, at either end: a
  // plan or descriptor bug (or a fault) would otherwise read or write past
  // the arena, into whatever the heap holds next. Memory that meets no arena
  // (the caller's shards and gradients) has no bounds the fabric knows, but
  // no range may wrap. Refused at issue, as a usage error naming `what`.
  void checkArenaExtent(const void* p, const Extent& extent, const char* what) const;
  // `rows` rows of `width` bytes, `pitch` bytes apart (either sign).
  void checkArenaSpan(const void* p, int64_t width, int64_t rows, int64_t pitch, const char* what) const;
  // A rail put's source: bounded like any range, and for RMA rails inside this rank's arena.
  void checkRailSource(const void* src, int64_t bytes) const;
  // For a wait's timeout message: the ranks that entered fewer calls than this
  // one, and those whose process has exited ("" when none, or not tracked).
  std::string peersProgress() const;
  WorkQueue& queue(int q);
  // Every op goes through here: stall injection and, when on, the checker
  // (body gets the checker's task handle, -1 without a checker).
  uint64_t submit(int q, const char* op, std::function<void(int)> body);
  uint64_t submit(int q, const std::string& op, std::function<void(int)> body);
  std::atomic<uint64_t>& counter(int rank, int id);
  // Counter `id` of `rank` := max(value, itself); a value below it fails the job (kProtocol).
  void raise(int rank, int id, uint64_t value);
  void checkCounter(int id) const;
  [[noreturn]] void fail(FabricError::Kind kind, const std::string& message);
  // Holds the calling queue task for `seconds` (an injected delay or stall),
  // but gives up as this fabric's waits do, with a peer failure naming
  // `what`: once the endpoint stops, so that tear-down does not sit out the
  // rest, or once the job has failed, whose ranks must all stop promptly.
  void idle(double seconds, const std::string& what);
  // This endpoint is shutting down or some rank of the job has failed: every
  // wait and idle of this rank ends early.
  bool stopRequested() const;
  // Ends a wait or an idle early (kPeerFailure, `where` first) on stopRequested.
  void throwIfStopped(const std::string& where) const;
  void stallOnce(int q);
  void failTaskOnce();  // FabricFaults::failTaskAfter
  template <typename F>
  void failStopOnError(F&& body);
  std::chrono::steady_clock::time_point deadline() const;
  // How long a host wait on a queue may see no task finish (2 T + 1 s).
  std::chrono::steady_clock::duration drainStallLimit() const;
  // Waits until `wq` has completed task `seq`; false once no queue of this
  // endpoint finished a task for drainStallLimit() (or `wq` is stopping). Any
  // queue's progress counts: a queue whose task waits for a phase of another
  // (waitEvent) completes nothing while that one works through the phase.
  bool waitWhileProgressing(const WorkQueue& wq, uint64_t seq) const;
  uint64_t tasksCompleted() const;  // over every queue
  std::string drainStallText() const;  // drainStallLimit() as messages print it
  std::string callText() const;        // " (in CALL)" for the last call context, or 
  void checkRailPeer(int peer, int64_t dstOffset, int64_t bytes, const char* what) const;
  // Two-sided rails: the rail puts and receives enqueued back to back run as
  // one queue task (an NCCL group): all sends posted, every receive taken in
  // order, then every send awaited until delivered. Any other call ends it.
  struct RailTransfer {
    bool send = false;
    int peer = 0;
    int64_t offset = 0;           // receive: into this rank's arena
    const void* src = nullptr;    // send: from here
    int64_t bytes = 0;
    int signalId = -1;            // receive: this rank's counter, after the bytes
    uint64_t signalValue = 0;
  };
  void flushRails();
  // RMA rails: the same group through RmaRendezvous, as one queue task
  // (rma_rails.cpp); puts of a group land in reverse order, as one-sided
  // puts may, so that nothing relies on their order.
  void flushRmaRails();
  // Rail transfers of the RMA group go on queue q: the first such queue is
  // the only one (a second would mix its signals into the same per-peer
  // counts), and a group ends where another queue's call begins.
  void joinRmaGroup(int q);
  int railQueue_ = -1;
  std::vector<RailTransfer> railGroup_;
  RmaRendezvous rmaGroup_;
  int rmaQueue_ = -1;  // the one queue RMA rails use (their counts are per peer, not per queue)
  std::vector<uint64_t> rmaTaken_;  // per (peer, class): signals the waits before took

  plan::Topology topo_;
  int rank_;
  RankMemory mem_;
  HostOptions options_;
  ProtocolChecker* checker_ = nullptr;
  std::vector<std::unique_ptr<WorkQueue>> queues_;
  // Endpoint::kEventWindow, kept as the CUDA fabric's event ring keeps it: the
  // events recorded so far (all queues), and per queue its recent events as
  // (sequence number, index among all records).
  uint64_t eventsRecorded_ = 0;
  std::vector<std::deque<std::pair<uint64_t, uint64_t>>> recentEvents_;
  // Throws a usage FabricError unless `event` of queue q is one of the last
  // kEventWindow events recorded (0, no event, passes).
  void requireLiveEvent(int q, uint64_t event) const;
  mutable std::mutex callMu_;
  std::string call_ = "(no call)";
  mutable std::mutex statsMu_;
  Stats stats_;
  FabricFaults faults_;
  std::atomic<int> signalsSent_{0};
  std::atomic<int> putsIssued_{0};
  std::atomic<uint64_t> stalledQueues_{0};
  std::atomic<int> tasksStarted_{0};  // failTaskAfter's count
  std::atomic<int64_t> faultFirings_{0};  // fabricFaultFirings()
  // loseSignalAfter: true (and counted as fired) for the one remote signal to drop.
  bool dropThisSignal() {
    if (faults_.loseSignalAfter < 0 || signalsSent_.fetch_add(1) != faults_.loseSignalAfter) return false;
    ++faultFirings_;
    return true;
  }  // bit q: queue q has taken its injected stall
  std::atomic<bool> stopping_{false};  // destructor running: waits give up
  // Injected duplicate put: the old bytes, replayed after the next put there.
  std::mutex replayMu_;
  std::byte* replayDst_ = nullptr;
  std::vector<std::byte> replayData_;
};

// N ranks as threads of one process: owns the arenas and counters.
class HostWorld {
 public:
  HostWorld(plan::Topology topo, int64_t arenaBytes, HostOptions options = {});
  ~HostWorld();
  Endpoint& endpoint(int rank) { return *endpoints_.at(static_cast<size_t>(rank)); }
  ProtocolChecker* checker() { return checker_.get(); }  // null unless checkProtocol
  // The caller stands in for a host barrier of every rank here (one that a
  // multi-process run has at this point: a store barrier, a benchmark's
  // iteration barrier): the checker joins every rank's host clock. Without
  // it, one thread driving all ranks orders nothing between them.
  void hostBarrier() {
    if (checker_) checker_->hostBarrier();
  }
  int ranks() const { return topo_.ranks(); }
  const plan::Topology& topology() const { return topo_; }

 private:
  plan::Topology topo_;
  std::vector<std::unique_ptr<std::byte[]>> arenas_;
  std::vector<std::unique_ptr<std::atomic<uint64_t>[]>> counters_;
  std::unique_ptr<std::atomic<uint64_t>[]> callsEntered_;  // RankMemory::callsEntered, by rank
  std::vector<std::unique_ptr<Doorbell>> doorbells_;
  std::unique_ptr<ProtocolChecker> checker_;
  std::unique_ptr<RailMailbox> mailbox_;
  std::unique_ptr<RmaSignalBoard> rma_;
  std::atomic<int> failed_{0};
  std::vector<char> failure_;
  std::vector<std::unique_ptr<HostEndpoint>> endpoints_;
};

}  // namespace tide::fabric::host
