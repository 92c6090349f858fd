// Protocol checker of the host fabric (tests; off by default). It follows
// happens-before through the fabric's own ordering (queue order, events,
// counter signal -> wait, host submission and synchronisation) with vector
// clocks, one per queue and one per rank's host, and checks every byte
// range a copy, put, sum, landing or zero touches against earlier accesses:
//   I2/I3  two accesses of one byte, at least one a write, with no
//          happens-before between them: a source released before it was
//          read, a region reused before its previous consumer completed;
//   I1     a landing that reads inbox bytes an earlier landing already
//          consumed (a stale block not zeroed), or a put into inbox bytes
//          no landing has consumed yet (a contributor landing twice).
// Races are found from the ordering the protocol establishes, not from the
// interleaving that happened, so a report is deterministic. Each rank's host
// has its own clock, as each rank is its own process: it is ordered after
// what it synchronised with (its own queues, and through their waits what
// other ranks signalled), never after another rank's host. A test's one
// thread that synchronises rank 0 and then submits rank 1's work orders
// nothing between them; where a harness stands for a real host barrier of
// every rank (a store barrier, a benchmark's iteration barrier), it says so
// with hostBarrier(). I4 (every wait has a producer) is what the deadlines
// enforce.
//   I5     issue order: a wait on a counter the rank signals to itself is
//          issued only after the signal that satisfies it. A GPU stream
//          blocked on a signal the host has not issued yet can stall the
//          host's own issue (a full command queue, streams sharing a
//          hardware queue), and then the signal is never issued; the host
//          fabric's unbounded queues would hide that.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tide::fabric::host {

class ProtocolChecker {
 public:
  using Clock = std::vector<uint32_t>;
  enum class Access { kRead, kWrite, kZero, kLandRead };

  ProtocolChecker(int ranks, int queuesPerRank);

  int tid(int rank, int queue) const { return rank * queues_ + queue; }
  int hostTid(int rank) const { return ranks_ * queues_ + rank; }

  // Memory the checker watches; accesses elsewhere are ignored, and one that
  // crosses a watched buffer's edge is a violation.
  void watch(const void* base, int64_t bytes, const std::string& name);
  // Bytes a landing consumes (the inbox): the I1 state machine applies.
  void watchInbox(const void* base, int64_t bytes);

  // ---- a rank's host thread (the one that submits its work)
  Clock hostClock(int rank);
  void hostSynchronized(int tid);  // the host of queue `tid`'s rank waited for the queue to drain
  void hostJoinEvent(int srcTid, uint64_t event);  // the host of `srcTid`'s rank waited for one event of that queue
  void hostAccess(int rank, const void* p, int64_t bytes, Access kind, const std::string& what);
  // Every rank's host passed one barrier: each host clock joins all of them.
  // Only where a multi-process run has a real host barrier at that point.
  void hostBarrier();
  // I5: the host issued a signal from `rank` to itself / a wait of `rank` on
  // a counter that it signals itself.
  void selfSignalIssued(int rank, int id, uint64_t value);
  void selfWaitIssued(int rank, int id, uint64_t value, const std::string& what);

  // ---- tasks. begin() returns a task handle used by the calls below.
  int begin(int tid, const Clock& submittedAt, const std::string& label);
  void end(int task);
  void access(int task, const void* p, int64_t bytes, Access kind);
  void access2d(int task, const void* p, int64_t width, int64_t rows, int64_t pitch, Access kind);
  // I6: signals to one counter of different values follow each other in
  // happens-before and in value order (the CUDA fabric writes the value: out
  // of order, the counter goes back, and a wait for the larger value that
  // starts after that stalls for ever).
  void signal(int task, int rank, int id, uint64_t value);
  void waited(int task, int rank, int id, uint64_t value);
  void mark(int task, uint64_t event);              // an event completes with this task
  void joinEvent(int task, int srcTid, uint64_t event);

 private:
  struct Range {
    int64_t begin, end;
    uint32_t tid, clock;
    bool write;
    int label;
  };
  struct Buffer {
    std::string name;
    const std::byte* base;
    int64_t bytes;
    std::vector<Range> ranges;
    std::vector<uint8_t> inbox;  // per 4-byte word: 0 clean, 1 pending, 2 consumed
  };
  struct Task {
    int tid;
    Clock clock;
    int label;
  };

  // The watched buffer that holds [p, p + bytes); nullptr where the range
  // meets none. A range that meets a buffer but leaves it is a violation
  // (kProtocol) naming `who`, the access.
  Buffer* find(const void* p, int64_t bytes, const std::string& who);
  void check(Buffer& b, int64_t begin, int64_t end, const Clock& c, uint32_t tid, bool write, int label);
  void inboxStep(Buffer& b, int64_t begin, int64_t end, Access kind, int label);
  [[noreturn]] void violation(const std::string& what);
  static void join(Clock& a, const Clock& b);

  int ranks_, queues_;
  std::mutex mu_;
  std::vector<Clock> queueClock_;
  std::vector<Clock> hostClock_;  // by rank
  std::vector<Buffer> buffers_;
  std::vector<std::string> labels_;
  std::map<int, Task> tasks_;
  int nextTask_ = 0;
  std::map<std::pair<int, int>, std::vector<std::pair<uint64_t, Clock>>> signals_;
  // The largest-valued signal to each (rank, counter) so far: the next signal
  // of another value must happen after it, with a larger value.
  struct LastSignal {
    uint64_t value;
    uint32_t tid, clock;
    int label;
  };
  std::map<std::pair<int, int>, LastSignal> lastSignal_;
  std::map<std::pair<int, uint64_t>, Clock> events_;
  std::map<std::pair<int, int>, uint64_t> selfIssued_;  // (rank, counter) -> largest self-signal issued
};

}  // namespace tide::fabric::host
