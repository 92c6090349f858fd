#include "fabric/host/host_fabric.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "fabric/byte_range.hpp"
#include "fabric/byte_row_sweep.hpp"
#include "fabric/copy_batch_overlap.hpp"
#include "fabric/host/failure_record.hpp"
#include "fabric/host/host_kernels.hpp"
#include "fabric/process_liveness.hpp"
#include "fabric/reduce_op_rules.hpp"
#include "fabric/sum_op_overlap.hpp"
#include "fabric/seconds_text.hpp"

namespace tide::fabric::host {
using Access = ProtocolChecker::Access;
}

namespace tide::fabric::host {

using Clock = std::chrono::steady_clock;

// How often a wait on a peer of another process asks whether that process still runs (a /proc read):
// a killed peer then stops its waiters this soon, not at their deadline.
constexpr Clock::duration kLivenessPeriod = std::chrono::milliseconds(100);

const char* hostRailsName(HostRails rails) {
  switch (rails) {
    case HostRails::kPut: return "one-sided";
    case HostRails::kSendRecv: return "two-sided";
    case HostRails::kRma: return "rma";
  }
  return "?";
}

HostEndpoint::HostEndpoint(plan::Topology topo, int rank, RankMemory memory, HostOptions options)
    : topo_(topo), rank_(rank), mem_(std::move(memory)), options_(options), checker_(options.checker) {
  checkOptions(options_);
  for (int q = 0; q < options_.queues; ++q) queues_.push_back(std::make_unique<WorkQueue>());
  recentEvents_.resize(queues_.size());
}

void HostEndpoint::checkOptions(const HostOptions& options) {
  if (options.queues < 1 || options.queues > 64)
    throw FabricError(FabricError::Kind::kUsage,
                      "host fabric needs 1 to 64 queues, not " + std::to_string(options.queues));
  // The drains allow twice the wait deadline: past 1e6 s it no longer bounds anything (NaN never does).
  if (!(options.timeoutSeconds > 0 && options.timeoutSeconds <= 1e6))
    throw FabricError(FabricError::Kind::kUsage, "host fabric's wait deadline must be above 0 and at most 1e6 s, not " +
                                                     std::to_string(options.timeoutSeconds));
}

HostEndpoint::~HostEndpoint() {
  requestStop();
  joinQueues();
}

void HostEndpoint::requestStop() {
  stopping_ = true;
  for (auto& q : queues_) q->requestStop();
}

void HostEndpoint::joinQueues() {
  // Every worker is joined before any queue is destroyed: a running task may
  // be inside waitCompleted() on another queue of this rank, and must have
  // left its mutex before that queue goes.
  for (auto& q : queues_) q->join();
}

std::string HostEndpoint::railsDescription() const {
  if (mem_.rma != nullptr) return "host-rma (emulated NCCL host RMA)";
  if (mem_.mailbox != nullptr) return "host-send-recv (emulated NCCL send/recv)";
  return "host-puts (one-sided puts with signals, as copy engines)";
}

std::byte* HostEndpoint::peerArena(int peerRank) {
  topo_.checkRank(peerRank);
  return mem_.arenas[static_cast<size_t>(peerRank)];
}

void HostEndpoint::setCallContext(const std::string& call) {
  flushRails();
  if (!mem_.callsEntered.empty()) mem_.callsEntered[static_cast<size_t>(rank_)]->fetch_add(1);
  std::lock_guard<std::mutex> lock(callMu_);
  call_ = call;
}

std::string HostEndpoint::peersProgress() const {
  if (mem_.callsEntered.empty()) return "";
  const uint64_t mine = mem_.callsEntered[static_cast<size_t>(rank_)]->load();
  std::string behind, gone;
  for (int r = 0; r < static_cast<int>(mem_.callsEntered.size()); ++r) {
    const uint64_t theirs = mem_.callsEntered[static_cast<size_t>(r)]->load();
    if (theirs < mine) behind += (behind.empty() ? "" : ", ") + std::to_string(r) + " (" + std::to_string(theirs) + ")";
    const int pid = r < static_cast<int>(mem_.pids.size()) ? mem_.pids[static_cast<size_t>(r)] : 0;
    if (pid > 0 && processGone(pid)) gone += (gone.empty() ? "" : ", ") + std::to_string(r);
  }
  std::string out;
  if (!behind.empty())
    out += "; ranks behind this one (calls entered; this rank " + std::to_string(mine) + "): " + behind;
  if (!gone.empty()) out += "; ranks whose process has exited: " + gone;
  return out;
}

WorkQueue& HostEndpoint::queue(int q) {
  if (q < 0 || q >= numQueues())
    throw FabricError(FabricError::Kind::kUsage, "rank " + std::to_string(rank_) + ": no queue " +
                                                     std::to_string(q));
  return *queues_[static_cast<size_t>(q)];
}

void HostEndpoint::checkCounter(int id) const {
  if (id < 0 || id >= kCountersPerRank)
    throw FabricError(FabricError::Kind::kUsage, "counter id " + std::to_string(id) + " out of range");
}

std::atomic<uint64_t>& HostEndpoint::counter(int rank, int id) {
  checkCounter(id);
  topo_.checkRank(rank);
  return mem_.counters[static_cast<size_t>(rank)][id];
}

void HostEndpoint::raise(int rank, int id, uint64_t value) {
  std::atomic<uint64_t>& ctr = counter(rank, id);
  uint64_t cur = ctr.load();
  while (cur < value && !ctr.compare_exchange_weak(cur, value)) {
  }
  if (!mem_.doorbells.empty()) {
    Doorbell* bell = mem_.doorbells[static_cast<size_t>(rank)];
    std::lock_guard<std::mutex> lock(bell->mu);
    bell->cv.notify_all();
  }
  // The counter keeps its larger value here, but the CUDA fabric writes the
  // value (cuStreamWriteValue64): there it would go back, and a wait for the
  // larger value that starts after that would wait for ever (session 29: the
  // landing-free signals on the callers' streams, before session 21). So a
  // signal below the counter's value fails the job on CPU ranks too.
  if (cur > value)
    fail(FabricError::Kind::kProtocol,
         "rank " + std::to_string(rank_) + ": a signal of " + std::to_string(value) + " to counter " +
             std::to_string(id) + " of rank " + std::to_string(rank) + ", which holds " + std::to_string(cur) +
             " already: signals to one counter must come in value order (on GPUs the counter would go back, and "
             "a wait for the larger value could wait for ever)");
}

Clock::time_point HostEndpoint::deadline() const {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(options_.timeoutSeconds));
}

Clock::duration HostEndpoint::drainStallLimit() const {
  // Waits inside the queue carry their own deadline; allow them to expire first.
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(2 * options_.timeoutSeconds + 1.0));
}

std::string HostEndpoint::drainStallText() const {
  return secondsText(std::chrono::duration<double>(drainStallLimit()).count());
}

std::string HostEndpoint::callText() const {
  std::lock_guard<std::mutex> lock(callMu_);
  return call_.empty() ? std::string() : " (in " + call_ + ")";
}

uint64_t HostEndpoint::tasksCompleted() const {
  uint64_t total = 0;
  for (const auto& q : queues_) total += q->completed();
  return total;
}

bool HostEndpoint::waitWhileProgressing(const WorkQueue& wq, uint64_t seq) const {
  uint64_t seen = tasksCompleted();
  for (;;) {
    if (wq.waitCompleted(seq, drainStallLimit())) return true;
    if (wq.stopping() || stopping_) return false;
    const uint64_t now = tasksCompleted();
    if (now == seen) return false;  // a whole stall limit without any queue finishing a task
    seen = now;
  }
}

void HostEndpoint::fail(FabricError::Kind kind, const std::string& message) {
  if (mem_.failed) recordFirstFailure(*mem_.failed, mem_.failure, RankMemory::kFailureBytes, message);
  throw FabricError(kind, message);
}

template <typename F>
void HostEndpoint::failStopOnError(F&& body) {
  try {
    body();
  } catch (const FabricError& e) {
    // The first failure of the job is what every other rank reports.
    if (e.kind() != FabricError::Kind::kPeerFailure && mem_.failed)
      recordFirstFailure(*mem_.failed, mem_.failure, RankMemory::kFailureBytes, e.what());
    throw;
  } catch (const std::exception& e) {
    // Not the fabric's own (an allocation that failed, say): the peers must hear of it too,
    // not wait for it until their deadline.
    if (mem_.failed)
      recordFirstFailure(*mem_.failed, mem_.failure, RankMemory::kFailureBytes,
                         "rank " + std::to_string(rank_) + ": a queue task failed: " + e.what());
    throw;
  }
}

bool HostEndpoint::stopRequested() const { return stopping_.load() || jobFailed(mem_.failed); }

void HostEndpoint::throwIfStopped(const std::string& where) const {
  if (stopping_)
    throw FabricError(FabricError::Kind::kPeerFailure, where + ": the endpoint is shutting down");
  if (jobFailed(mem_.failed))
    throw FabricError(FabricError::Kind::kPeerFailure,
                      where + ": stopped, a peer failed: " + firstFailure(*mem_.failed, mem_.failure));
}

void HostEndpoint::idle(double seconds, const std::string& what) {
  // Slices as short as the other waits' polls: a stop or failure is seen about as soon.
  constexpr Clock::duration kSlice = std::chrono::milliseconds(10);
  const Clock::time_point end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (;;) {
    throwIfStopped("rank " + std::to_string(rank_) + ": " + what + " ended early");
    const Clock::time_point now = Clock::now();
    if (now >= end) return;
    std::this_thread::sleep_for(std::min(kSlice, end - now));
  }
}

// The whole rank stalls (as a hung process would): each of its queues idles
// once, before its first op, so no queue's work goes ahead and every peer
// waiting on any of them meets its deadline.
void HostEndpoint::stallOnce(int q) {
  const uint64_t bit = uint64_t{1} << q;
  if (faults_.stallSeconds > 0 && !(stalledQueues_.fetch_or(bit) & bit)) {
    ++faultFirings_;
    idle(faults_.stallSeconds, "an injected stall");
  }
}

void HostEndpoint::failTaskOnce() {
  if (faults_.failTaskAfter < 0 || tasksStarted_.fetch_add(1) != faults_.failTaskAfter) return;
  ++faultFirings_;
  throw std::runtime_error("an injected task failure (not a fabric error)");
}

uint64_t HostEndpoint::submit(int q, const char* op, std::function<void(int)> body) {
  return submit(q, std::string(op), std::move(body));
}

uint64_t HostEndpoint::submit(int q, const std::string& op, std::function<void(int)> body) {
  WorkQueue& wq = queue(q);
  if (!checker_)
    return wq.submit([this, q, body = std::move(body)] {
      stallOnce(q);
      failStopOnError([&] {
        failTaskOnce();
        body(-1);
      });
    });
  std::string label;
  {
    std::lock_guard<std::mutex> lock(callMu_);
    label = op + " (rank " + std::to_string(rank_) + ", queue " + std::to_string(q) + ", " + call_ + ")";
  }
  ProtocolChecker::Clock at = checker_->hostClock(rank_);
  const int tid = checker_->tid(rank_, q);
  return wq.submit([this, q, body = std::move(body), at = std::move(at), label = std::move(label), tid] {
    stallOnce(q);
    failStopOnError([&] {
      failTaskOnce();
      const int task = checker_->begin(tid, at, label);
      body(task);
      checker_->end(task);
    });
  });
}

void HostEndpoint::annotateInbox(int64_t offset, int64_t bytes) {
  if (checker_) checker_->watchInbox(arena() + offset, bytes);
}

void HostEndpoint::Extent::addRow(int64_t row, int64_t pitch, int64_t width, int64_t item) {
  if (width <= 0) return;
  int64_t at = 0, bytes = 0, end = 0;
  if (__builtin_mul_overflow(row, pitch, &at) || __builtin_mul_overflow(at, item, &at) ||
      __builtin_mul_overflow(width, item, &bytes) || __builtin_add_overflow(at, bytes, &end)) {
    wraps = true;
    return;
  }
  low = empty ? at : std::min(low, at);
  high = empty ? end : std::max(high, end);
  empty = false;
}

HostEndpoint::Extent HostEndpoint::Extent::ofRows(int64_t rows, int64_t pitch, int64_t width, int64_t item) {
  // The first and the last row bound the rest, whichever way the pitch goes.
  Extent extent;
  extent.addRow(0, pitch, width, item);
  extent.addRow(rows - 1, pitch, width, item);
  return extent;
}

void HostEndpoint::checkArenaExtent(const void* p, const Extent& extent, const char* what) const {
  if (extent.empty && !extent.wraps) return;
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  for (size_t r = 0; r < mem_.arenas.size(); ++r) {
    // The extent relative to this arena, by the addresses' difference: p need
    // not point into it (a first row just before an arena, a pitch that goes down).
    const int64_t offset = static_cast<int64_t>(at - reinterpret_cast<std::uintptr_t>(mem_.arenas[r]));
    const bool starts = offset >= 0 && offset < mem_.arenaBytes;
    int64_t low = 0, high = 0;
    const bool wraps = extent.wraps || __builtin_add_overflow(offset, extent.low, &low) ||
                       __builtin_add_overflow(offset, extent.high, &high);
    if (!wraps && (high <= 0 || low >= mem_.arenaBytes)) continue;  // meets no byte of this arena
    if (wraps && !starts) continue;  // no arena named: refused below
    if (!wraps && low >= 0 && high <= mem_.arenaBytes) return;
    // A wrapped extent's low and high mean nothing: only "beyond any address" is said of it.
    const std::string overrun = wraps ? overrunText(0, 0, mem_.arenaBytes, true)
                                      : overrunText(low, high, mem_.arenaBytes, false);
    throw FabricError(FabricError::Kind::kUsage,
                      "rank " + std::to_string(rank_) + ": " + what + " at offset " + std::to_string(offset) +
                          " of rank " + std::to_string(r) + "'s arena runs " + overrun + " (" +
                          std::to_string(mem_.arenaBytes) + " bytes)");
  }
  if (extent.wraps)
    throw FabricError(FabricError::Kind::kUsage, "rank " + std::to_string(rank_) + ": " + what +
                                                     " runs beyond any address (its extent passes 64 bits)");
}

void HostEndpoint::checkArenaSpan(const void* p, int64_t width, int64_t rows, int64_t pitch, const char* what) const {
  if (rows <= 0) return;
  checkArenaExtent(p, Extent::ofRows(rows, pitch, width), what);
}

void HostEndpoint::copy(int q, const std::vector<CopyOp>& ops) {
  for (const CopyOp& op : ops) {
    // Refused here, at issue: a negative extent would reach memmove as a huge size_t.
    // The CUDA fabric's rules too (copy_engine.cpp), so that CPU runs refuse what a GPU would: at least one
    // row, and addresses wherever there are bytes to copy.
    if (op.width < 0 || op.rows < 1)
      throw FabricError(FabricError::Kind::kUsage, "rank " + std::to_string(rank_) + ": copy of width " +
                                                       std::to_string(op.width) + " and " + std::to_string(op.rows) +
                                                       " rows: the width may not be negative, and a copy has a row");
    if (op.width > 0 && (op.src == nullptr || op.dst == nullptr))
      throw FabricError(FabricError::Kind::kUsage,
                        "rank " + std::to_string(rank_) + ": copy of width " + std::to_string(op.width) +
                            " with a null " + (op.src == nullptr ? "source" : "destination"));
    // cudaMemcpy2D's rule, which the CUDA fabric keeps too: a pitch below the
    // width overlaps rows (or, negative, runs them backwards), which no
    // collective means; CPU runs refuse what GPU runs cannot do.
    if (op.rows > 1 && (op.srcPitch < op.width || op.dstPitch < op.width))
      throw FabricError(FabricError::Kind::kUsage,
                        "rank " + std::to_string(rank_) + ": strided copy of " + std::to_string(op.rows) +
                            " rows of " + std::to_string(op.width) + " bytes with source pitch " +
                            std::to_string(op.srcPitch) + " and destination pitch " + std::to_string(op.dstPitch) +
                            ": a pitch below the width (rows > 1 need both pitches >= the width)");
    checkArenaSpan(op.src, op.width, op.rows, op.srcPitch, "copy source");
    checkArenaSpan(op.dst, op.width, op.rows, op.dstPitch, "copy destination");
  }
  // Here the ops run in order; on GPUs in any order or at once.
  const std::string overlap = findCopyBatchOverlap(ops);
  if (!overlap.empty())
    throw FabricError(FabricError::Kind::kUsage, "rank " + std::to_string(rank_) + ": copy of " +
                                                     std::to_string(ops.size()) + " ops: " + overlap);
  flushRails();
  int64_t bytes = 0;
  for (const CopyOp& op : ops) bytes += op.width * op.rows;
  {
    std::lock_guard<std::mutex> lock(statsMu_);
    stats_.copyBytes += bytes;
    stats_.copyOps += static_cast<int64_t>(ops.size());
  }
  submit(q, "copy", [this, ops](int task) {
    for (const CopyOp& op : ops) {
      if (checker_) {
        checker_->access2d(task, op.src, op.width, op.rows, op.srcPitch,
                           op.consumesSource ? Access::kLandRead : Access::kRead);
        checker_->access2d(task, op.dst, op.width, op.rows, op.dstPitch, Access::kWrite);
      }
    }
    for (const CopyOp& op : ops)
      for (int64_t r = 0; r < op.rows; ++r)
        std::memmove(static_cast<std::byte*>(op.dst) + r * op.dstPitch,
                     static_cast<const std::byte*>(op.src) + r * op.srcPitch,
                     static_cast<size_t>(op.width));
  });
}

void HostEndpoint::sum(int q, const SumOp& op) {
  const int64_t item = plan::itemSize(op.srcType);
  for (size_t i = 0; i < op.pieces.size(); ++i) {
    const SumPiece& pc = op.pieces[i];
    // Shape first, as the CUDA fabric (reduce_op_rules.hpp): valid[r] is read for every row r.
    if (const std::string why = sumPieceShapeProblem(pc); !why.empty())
      throw FabricError(FabricError::Kind::kUsage,
                        "rank " + std::to_string(rank_) + ": sum piece " + std::to_string(i) + ": " + why);
    if (pc.rows == 0 || pc.elems == 0) continue;  // writes and reads nothing
    checkArenaExtent(pc.dst, Extent::ofRows(pc.rows, pc.dstPitch, pc.elems, sizeof(float)), "sum destination");
    for (const SumSource& src : pc.sources) {
      // Row r reads its valid elements only (the rest are padding, read as
      // zero): a source may end where its last row's data does.
      Extent read;
      for (int64_t r = 0; r < pc.rows; ++r)
        read.addRow(r, src.pitch, std::min(src.valid[static_cast<size_t>(r)], pc.elems), item);
      checkArenaExtent(src.ptr, read, "sum source");
    }
    // After the bounds, whose messages say more about a range outside an arena.
    if (const std::string why = sumPieceLayoutProblem(pc, item); !why.empty())
      throw FabricError(FabricError::Kind::kUsage,
                        "rank " + std::to_string(rank_) + ": sum piece " + std::to_string(i) + ": " + why);
  }
  if (const std::string why = findSumOpOverlap(op); !why.empty())
    throw FabricError(FabricError::Kind::kUsage, "rank " + std::to_string(rank_) + ": sum of " +
                                                     std::to_string(op.pieces.size()) + " piece(s): " + why);
  flushRails();
  submit(q, "sum", [this, op](int task) {
    if (checker_) {
      const int64_t b = plan::itemSize(op.srcType);
      for (const SumPiece& pc : op.pieces) {
        for (int64_t r = 0; r < pc.rows; ++r) {
          for (const SumSource& src : pc.sources)
            checker_->access(task, static_cast<const std::byte*>(src.ptr) + r * src.pitch * b,
                             std::min(src.valid[static_cast<size_t>(r)], pc.elems) * b, Access::kRead);
          // Accumulating reads the destination too; a write already conflicts with all a read does.
          checker_->access(task, pc.dst + r * pc.dstPitch, pc.elems * 4, Access::kWrite);
        }
      }
    }
    const int64_t n = runSum(op);
    std::lock_guard<std::mutex> lock(statsMu_);
    stats_.sumElems += n;
  });
}

void HostEndpoint::land(int q, const LandOp& op) {
  // Shape first (reduce_op_rules.hpp): a negative count would reach the clearing memset as a huge size_t.
  if (const std::string why = landShapeProblem(op); !why.empty())
    throw FabricError(FabricError::Kind::kUsage, "rank " + std::to_string(rank_) + ": landing: " + why);
  Extent floats;  // relative to the destination and to each source alike
  floats.addRow(0, 0, op.elems, sizeof(float));
  checkArenaExtent(op.dst, floats, "landing destination");
  // Clearing writes the very bytes the landing read: one bound covers both.
  for (const float* src : op.sources)
    checkArenaExtent(src, floats, op.clearSources ? "landing source (read, then cleared)" : "landing source");
  if (const std::string why = landLayoutProblem(op); op.elems > 0 && !why.empty())
    throw FabricError(FabricError::Kind::kUsage, "rank " + std::to_string(rank_) + ": landing: " + why);
  flushRails();
  submit(q, "land", [this, op](int task) {
    if (checker_) {
      for (float* src : op.sources) checker_->access(task, src, op.elems * 4, Access::kLandRead);
      checker_->access(task, op.dst, op.elems * 4, Access::kWrite);
      if (op.clearSources)
        for (float* src : op.sources) checker_->access(task, src, op.elems * 4, Access::kZero);
    }
    const int64_t n = runLand(op);
    std::lock_guard<std::mutex> lock(statsMu_);
    stats_.landElems += n;
  });
}

void HostEndpoint::zero(int q, void* dst, int64_t bytes) {
  if (bytes < 0)
    throw FabricError(FabricError::Kind::kUsage,
                      "rank " + std::to_string(rank_) + ": zeroing " + std::to_string(bytes) + " bytes (negative)");
  checkArenaSpan(dst, bytes, 1, 0, "zeroed range");
  flushRails();
  submit(q, "zero", [this, dst, bytes](int task) {
    if (checker_) checker_->access(task, dst, bytes, Access::kZero);
    std::memset(dst, 0, static_cast<size_t>(bytes));
  });
}

void HostEndpoint::checkRailPeer(int peer, int64_t dstOffset, int64_t bytes, const char* what) const {
  topo_.checkRank(peer);
  if (topo_.localOf(peer) != topo_.localOf(rank_))
    throw FabricError(FabricError::Kind::kUsage, "rank " + std::to_string(rank_) + ": " + what + " rank " +
                                                     std::to_string(peer) + " on another rail");
  // Compared without the sum dstOffset + bytes, which can wrap past the check.
  if (dstOffset < 0 || bytes < 0 || dstOffset > mem_.arenaBytes || bytes > mem_.arenaBytes - dstOffset)
    throw FabricError(FabricError::Kind::kUsage, std::string(what) + " rank " + std::to_string(peer) +
                                                     " outside the arena");
}

void HostEndpoint::checkRailSource(const void* src, int64_t bytes) const {
  checkArenaSpan(src, bytes, 1, 0, "rail put source");
  // Like NCCL's host RMA, an RMA put reads only from a registered window: the arena.
  if (mem_.rma != nullptr && bytes > 0 && !liesWithin(src, bytes, mem_.arenas[static_cast<size_t>(rank_)], mem_.arenaBytes))
    throw FabricError(FabricError::Kind::kUsage, "rank " + std::to_string(rank_) +
                                                     ": RMA rail put from outside the arena (host RMA reads "
                                                     "only from a registered window)");
}

void HostEndpoint::railPut(int q, int dstRank, int64_t dstOffset, const void* src, int64_t bytes,
                           int signalId, uint64_t signalValue) {
  checkRailPeer(dstRank, dstOffset, bytes, "rail put to");
  checkRailSource(src, bytes);
  {
    std::lock_guard<std::mutex> lock(statsMu_);
    stats_.railBytes += bytes;
    stats_.railPuts += 1;
  }
  if (mem_.rma != nullptr) {
    // The receiver's railRecv grants the credit this put waits for, and sets its own counter.
    joinRmaGroup(q);
    rmaGroup_.deferSend(dstRank, dstOffset, src, bytes);
    return;
  }
  if (mem_.mailbox != nullptr) {
    // Two-sided: the receiver's railRecv lands the bytes and sets its own counter.
    if (railQueue_ >= 0 && railQueue_ != q) flushRails();
    railQueue_ = q;
    if (bytes > 0) railGroup_.push_back({.send = true, .peer = dstRank, .src = src, .bytes = bytes});
    return;
  }
  const bool duplicate = putsIssued_.fetch_add(1) == faults_.duplicatePutAfter;
  std::byte* dst = peerArena(dstRank) + dstOffset;
  if (signalId >= 0) checkCounter(signalId);  // refused here, at issue, not in the queue
  submit(q, "rail put to rank " + std::to_string(dstRank),
         [this, dst, src, bytes, signalValue, duplicate, dstRank, signalId](int task) {
    if (checker_) {
      checker_->access(task, src, bytes, Access::kRead);
      checker_->access(task, dst, bytes, Access::kWrite);
    }
    std::memcpy(dst, src, static_cast<size_t>(bytes));
    {
      // A retransmitted RDMA write: the old bytes land again after the next
      // put to the same place.
      std::lock_guard<std::mutex> lock(replayMu_);
      if (replayDst_ == dst && !duplicate) {
        // Counted only where the old bytes differ from the new: replaying a
        // put of the same bytes (e.g. a shard of padding only) changes nothing.
        if (std::memcmp(dst, replayData_.data(), replayData_.size()) != 0) ++faultFirings_;
        std::memcpy(dst, replayData_.data(), replayData_.size());
        replayDst_ = nullptr;
      }
      if (duplicate) {
        replayDst_ = dst;
        replayData_.assign(dst, dst + bytes);
      }
    }
    if (signalId >= 0 && !dropThisSignal()) {
      if (checker_) checker_->signal(task, dstRank, signalId, signalValue);
      raise(dstRank, signalId, signalValue);
    }
  });
}

void HostEndpoint::railPuts(int q, int dstRank, const std::vector<RailPiece>& pieces, int signalId,
                            uint64_t signalValue) {
  // Every piece is checked before the first goes: a list refused midway would
  // leave its first pieces issued, or deferred into the rail group, without the
  // signal that ends it (the CUDA fabric's copy-engine rails check theirs whole too).
  for (const RailPiece& p : pieces) {
    checkRailPeer(dstRank, p.dstOffset, p.bytes, "rail put to");
    checkRailSource(p.src, p.bytes);
  }
  // Here the pieces go in order; the CUDA fabric's copy-engine rails issue them as one batch in
  // any order (fabric.hpp): two pieces onto the same bytes would race there.
  std::vector<ByteRow> spans;  // each piece's destination offsets (bounded above: no wrap)
  for (size_t i = 0; i < pieces.size(); ++i) {
    const auto at = static_cast<std::uintptr_t>(pieces[i].dstOffset);
    spans.push_back({at, at + static_cast<std::uintptr_t>(std::max<int64_t>(pieces[i].bytes, 0)), i, 0, -1, true});
  }
  if (const auto hit = firstWriteConflict(std::move(spans)))
    throw FabricError(FabricError::Kind::kUsage,
                      "rank " + std::to_string(rank_) + ": rail puts to rank " + std::to_string(dstRank) +
                          " onto overlapping bytes: pieces " + std::to_string(hit->first.op) + " [" +
                          std::to_string(hit->first.lo) + ", " + std::to_string(hit->first.hi) + ") and " +
                          std::to_string(hit->second.op) + " [" + std::to_string(hit->second.lo) + ", " +
                          std::to_string(hit->second.hi) + ") of its arena");
  Endpoint::railPuts(q, dstRank, pieces, signalId, signalValue);
}

void HostEndpoint::railRecv(int q, int srcRank, int64_t dstOffset, int64_t bytes, int signalId,
                            uint64_t signalValue) {
  if (!railsTwoSided()) Endpoint::railRecv(q, srcRank, dstOffset, bytes, signalId, signalValue);
  checkRailPeer(srcRank, dstOffset, bytes, "rail receive from");
  if (signalId >= 0) checkCounter(signalId);
  if (mem_.rma != nullptr) {
    joinRmaGroup(q);
    rmaGroup_.deferRecv(srcRank, bytes, signalId, signalValue);
    return;
  }
  // Zero bytes: no message (the sender's zero-byte put sends none), only the
  // counter, set in the group's order; it must not end the group, or a group
  // whose sends are received by the rest of the round would wait on itself.
  if (railQueue_ >= 0 && railQueue_ != q) flushRails();
  railQueue_ = q;
  railGroup_.push_back({.send = false, .peer = srcRank, .offset = dstOffset, .bytes = bytes, .signalId = signalId,
                        .signalValue = signalValue});
}

// Happens-before edges of the mailbox for the checker, under ids no counter uses.
namespace {
constexpr int kMailboxSentId = kCountersPerRank;      // + sender rank: message seq posted
constexpr int kMailboxAckId = 2 * kCountersPerRank;   // + receiver rank: message seq delivered
}  // namespace

void HostEndpoint::flushRails() {
  if (mem_.rma != nullptr) {
    flushRmaRails();
    return;
  }
  if (railGroup_.empty()) return;
  std::vector<RailTransfer> group;
  group.swap(railGroup_);
  const int q = railQueue_;
  railQueue_ = -1;
  std::string call;
  {
    std::lock_guard<std::mutex> lock(callMu_);
    call = call_;
  }
  const std::string label = "rail group of " + std::to_string(group.size()) + " transfers";
  submit(q, label, [this, group = std::move(group), call](int task) {
    RailMailbox& box = *mem_.mailbox;
    const auto end = deadline();
    auto stop = [this] { return stopRequested(); };
    auto gaveUp = [&](const std::string& what) {
      if (stopRequested())
        throw FabricError(FabricError::Kind::kPeerFailure, "rank " + std::to_string(rank_) + " in " + call +
                                                               ": stopped while " + what);
      fail(FabricError::Kind::kTimeout, "rank " + std::to_string(rank_) + " in " + call + ": timed out after " +
                                            secondsText(options_.timeoutSeconds) + " " + what);
    };
    // Whatever ends the group, its undelivered sends are withdrawn with it.
    RailMailbox::GroupSends sends(box, rank_, options_.timeoutSeconds);
    for (const RailTransfer& t : group) {
      if (!t.send) continue;
      if (checker_) checker_->access(task, t.src, t.bytes, Access::kRead);
      // The checker hears of the message before the receiver can take it.
      sends.post(t.peer, t.src, t.bytes, [&](uint64_t seq) {
        if (checker_) checker_->signal(task, t.peer, kMailboxSentId + rank_, seq);
      });
    }
    for (const RailTransfer& t : group) {
      if (t.send) continue;
      if (t.bytes == 0) {
        if (t.signalId >= 0) {
          if (checker_) checker_->signal(task, rank_, t.signalId, t.signalValue);
          raise(rank_, t.signalId, t.signalValue);
        }
        continue;
      }
      const bool received = box.receive(t.peer, rank_, end, stop, [&](const RailMailbox::Message& m) {
        if (m.bytes != t.bytes)
          fail(FabricError::Kind::kProtocol, "rank " + std::to_string(rank_) + " in " + call +
                                                 ": a rail receive of " + std::to_string(t.bytes) +
                                                 " bytes from rank " + std::to_string(t.peer) +
                                                 " matched a send of " + std::to_string(m.bytes) + " bytes");
        std::byte* dst = arena() + t.offset;
        if (checker_) {
          checker_->waited(task, rank_, kMailboxSentId + t.peer, m.seq);
          checker_->access(task, m.src, t.bytes, Access::kRead);
          checker_->access(task, dst, t.bytes, Access::kWrite);
        }
        std::memcpy(dst, m.src, static_cast<size_t>(t.bytes));
        if (checker_) checker_->signal(task, t.peer, kMailboxAckId + rank_, m.seq);
      });
      if (!received)
        gaveUp("waiting for a rail send of " + std::to_string(t.bytes) + " bytes from rank " + std::to_string(t.peer));
      if (t.signalId >= 0) {
        if (checker_) checker_->signal(task, rank_, t.signalId, t.signalValue);
        raise(rank_, t.signalId, t.signalValue);
      }
    }
    // A send completes once received, as NCCL's does: its source is free again.
    for (const std::shared_ptr<RailMailbox::Message>& m : sends.posted()) {
      const int peer = m->channelDst;
      if (!box.awaitDelivery(*m, end, stop))
        gaveUp("waiting for rank " + std::to_string(peer) + " to receive a rail send of " + std::to_string(m->bytes) +
               " bytes");
      if (checker_) checker_->waited(task, rank_, kMailboxAckId + peer, m->seq);
    }
  });
}

void HostEndpoint::signal(int q, int dstRank, int id, uint64_t value) {
  flushRails();
  topo_.checkRank(dstRank);  // refused here, at issue, not in the queue
  checkCounter(id);
  if (checker_ && dstRank == rank_) checker_->selfSignalIssued(rank_, id, value);
  submit(q, "signal to rank " + std::to_string(dstRank), [this, value, dstRank, id](int task) {
    const bool remote = dstRank != rank_;
    if (remote && dropThisSignal()) return;  // injected: the signal is lost
    if (checker_) checker_->signal(task, dstRank, id, value);
    raise(dstRank, id, value);
  });
}

void HostEndpoint::wait(int q, int id, uint64_t value, int peer, const char* what) {
  flushRails();
  std::atomic<uint64_t>* ctr = &counter(rank_, id);
  if (checker_ && peer == rank_) checker_->selfWaitIssued(rank_, id, value, what != nullptr ? what : "");
  std::string call;
  {
    std::lock_guard<std::mutex> lock(callMu_);
    call = call_;
  }
  std::string awaited = what != nullptr ? what : "";
  submit(q, "wait for " + awaited, [this, ctr, value, peer, call, awaited, id](int task) {
    const auto end = deadline();
    // Only `peer` raises this counter: once its process has exited, nothing will.
    const int peerPid = peer != rank_ && peer >= 0 && peer < static_cast<int>(mem_.pids.size())
                            ? mem_.pids[static_cast<size_t>(peer)]
                            : 0;
    auto nextLivenessCheck = Clock::now() + kLivenessPeriod;
    int spins = 0;
    while (ctr->load() < value) {
      throwIfStopped("rank " + std::to_string(rank_) + " in " + call);
      if (peerPid > 0 && Clock::now() >= nextLivenessCheck) {
        nextLivenessCheck = Clock::now() + kLivenessPeriod;
        // Read again after the exit was seen: a peer that raised it, then exited, met the wait.
        if (processGone(peerPid) && ctr->load() < value)
          fail(FabricError::Kind::kPeerFailure,
               "rank " + std::to_string(rank_) + " in " + call + ": waiting for " + awaited + " from rank " +
                   std::to_string(peer) + ", whose process (pid " + std::to_string(peerPid) +
                   ") has exited (counter " + std::to_string(id) + " = " + std::to_string(ctr->load()) +
                   ", needed " + std::to_string(value) + ")");
      }
      if (Clock::now() > end)
        fail(FabricError::Kind::kTimeout,
             "rank " + std::to_string(rank_) + " in " + call + ": timed out after " +
                 secondsText(options_.timeoutSeconds) + " waiting for " + awaited + " from rank " +
                 std::to_string(peer) + " (counter " + std::to_string(id) + " = " +
                 std::to_string(ctr->load()) + ", needed " + std::to_string(value) + ")" + peersProgress());
      if (!mem_.doorbells.empty()) {
        Doorbell* bell = mem_.doorbells[static_cast<size_t>(rank_)];
        std::unique_lock<std::mutex> lock(bell->mu);
        bell->cv.wait_for(lock, std::chrono::milliseconds(10), [&] { return ctr->load() >= value; });
      } else if (++spins < 64) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::microseconds(spins < 1024 ? 20 : 200));
      }
    }
    if (checker_) checker_->waited(task, rank_, id, value);
  });
}

void HostEndpoint::delay(int q, double seconds) {
  flushRails();
  std::string what = "a delay in ";
  {
    std::lock_guard<std::mutex> lock(callMu_);
    what.append(call_);
  }
  submit(q, "delay", [this, seconds, what](int) { idle(seconds, what); });
}

uint64_t HostEndpoint::record(int q) {
  flushRails();
  // A marker task: the event completes with it (and carries its clock).
  const uint64_t seq = queue(q).submitted() + 1;
  const uint64_t got = submit(q, "event", [this, seq](int task) {
    if (checker_) checker_->mark(task, seq);
  });
  if (got != seq) throw FabricError(FabricError::Kind::kUsage, "queues are not thread safe: one host thread per rank");
  ++eventsRecorded_;
  {
    std::lock_guard<std::mutex> lock(statsMu_);
    ++stats_.events;
  }
  auto& recent = recentEvents_[static_cast<size_t>(q)];
  recent.emplace_back(seq, eventsRecorded_);
  while (recent.front().second + kEventWindow <= eventsRecorded_) recent.pop_front();
  return seq;
}

bool HostEndpoint::eventLive(int q, uint64_t event) const {
  if (event == kNoEvent) return true;
  if (q < 0 || static_cast<size_t>(q) >= recentEvents_.size()) return false;
  const auto& recent = recentEvents_[static_cast<size_t>(q)];
  const auto it = std::lower_bound(recent.begin(), recent.end(), std::make_pair(event, uint64_t{0}));
  return it != recent.end() && it->first == event && it->second + kEventWindow > eventsRecorded_;
}

void HostEndpoint::requireLiveEvent(int q, uint64_t event) const {
  if (!eventLive(q, event))
    throw FabricError(FabricError::Kind::kUsage,
                      "rank " + std::to_string(rank_) + ": event " + std::to_string(event) + " of queue " +
                          std::to_string(q) + " is unknown or was recycled (more than " +
                          std::to_string(kEventWindow) + " events recorded since; the CUDA fabric reuses them)");
}

void HostEndpoint::waitEvent(int q, int srcQueue, uint64_t event) {
  flushRails();
  WorkQueue* src = &queue(srcQueue);
  requireLiveEvent(srcQueue, event);
  std::string call;
  {
    std::lock_guard<std::mutex> lock(callMu_);
    call = call_;
  }
  submit(q, "wait for queue " + std::to_string(srcQueue), [this, src, event, call, srcQueue](int task) {
    // The source queue's own waits carry deadlines and say what they waited
    // for; give them time to expire first so their message is the one seen.
    if (!waitWhileProgressing(*src, event) && (stopping_ || src->stopping()))
      throw FabricError(FabricError::Kind::kPeerFailure,
                        "rank " + std::to_string(rank_) + " in " + call + ": the endpoint is shutting down");
    if (src->completed() < event)
      fail(FabricError::Kind::kTimeout, "rank " + std::to_string(rank_) + " in " + call +
                                            ": timed out waiting for queue " + std::to_string(srcQueue));
    if (src->failure()) std::rethrow_exception(src->failure());
    if (checker_ && event > 0) checker_->joinEvent(task, checker_->tid(rank_, srcQueue), event);
  });
}

void HostEndpoint::synchronize(int q) {
  flushRails();
  WorkQueue& wq = queue(q);
  const uint64_t target = wq.submitted();
  if (!waitWhileProgressing(wq, target))
    fail(FabricError::Kind::kTimeout, "rank " + std::to_string(rank_) + ": queue " + std::to_string(q) +
                                          " did not drain: no task of any queue finished within " +
                                          drainStallText() + callText());
  if (wq.failure()) std::rethrow_exception(wq.failure());
  if (checker_) checker_->hostSynchronized(checker_->tid(rank_, q));
}

void HostEndpoint::synchronizeEvent(int q, uint64_t event) {
  flushRails();
  WorkQueue& wq = queue(q);
  requireLiveEvent(q, event);
  if (!waitWhileProgressing(wq, event))
    fail(FabricError::Kind::kTimeout, "rank " + std::to_string(rank_) + ": event " + std::to_string(event) +
                                          " of queue " + std::to_string(q) +
                                          " did not complete: no task of any queue finished within " +
                                          drainStallText() + callText());
  // A task after the event that failed is later work's failure (the next call or synchronize
  // reports it); tasks skipped after an earlier failure count as completed, so that one is this event's.
  if (const std::exception_ptr failed = wq.failureUpTo(event)) std::rethrow_exception(failed);
  if (checker_) checker_->hostJoinEvent(checker_->tid(rank_, q), event);
}

void HostEndpoint::recordCallFailure(const std::string& message) {
  if (mem_.failed)
    recordFirstFailure(*mem_.failed, mem_.failure, RankMemory::kFailureBytes,
                       "rank " + std::to_string(rank_) + ": " + message);
}

void HostEndpoint::discardDeferredRails() {
  rmaGroup_.discard();
  railGroup_.clear();
  railQueue_ = -1;
}

std::string HostEndpoint::failureOfIssuedWork() const {
  for (const auto& wq : queues_) {
    if (const std::exception_ptr failure = wq->failure()) {
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        return e.what();
      } catch (...) {
        return "a task of rank " + std::to_string(rank_) + " failed";
      }
    }
  }
  if (jobFailed(mem_.failed))
    return "rank " + std::to_string(rank_) + ": the job failed: " + firstFailure(*mem_.failed, mem_.failure);
  return "";
}

void HostEndpoint::synchronizeAll() {
  flushRails();
  std::exception_ptr first;
  for (int q = 0; q < numQueues(); ++q) {
    try {
      synchronize(q);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

uint64_t HostEndpoint::counterValue(int id) { return counter(rank_, id).load(); }

Stats HostEndpoint::stats() const {
  std::lock_guard<std::mutex> lock(statsMu_);
  return stats_;
}

void HostEndpoint::resetStats() {
  std::lock_guard<std::mutex> lock(statsMu_);
  stats_ = {};
}

void HostEndpoint::setFabricFaults(const FabricFaults& f) {
  faults_ = f;
  signalsSent_ = 0;
  putsIssued_ = 0;
  stalledQueues_ = 0;
  tasksStarted_ = 0;
  faultFirings_ = 0;
}

HostWorld::HostWorld(plan::Topology topo, int64_t arenaBytes, HostOptions options)
    : topo_(topo), failure_(RankMemory::kFailureBytes, '\0') {
  RankMemory mem;
  mem.arenaBytes = arenaBytes;
  if (options.rails == HostRails::kSendRecv) {
    mailbox_ = std::make_unique<RailMailbox>(topo.ranks());
    mem.mailbox = mailbox_.get();
  } else if (options.rails == HostRails::kRma) {
    rma_ = std::make_unique<RmaSignalBoard>(topo.ranks());
    mem.rma = rma_.get();
  }
  mem.failed = &failed_;
  mem.failure = failure_.data();
  callsEntered_ = std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(topo.ranks()));
  for (int r = 0; r < topo.ranks(); ++r) {
    callsEntered_[static_cast<size_t>(r)].store(0);
    mem.callsEntered.push_back(&callsEntered_[static_cast<size_t>(r)]);
  }
  for (int r = 0; r < topo.ranks(); ++r) {
    arenas_.push_back(std::make_unique<std::byte[]>(static_cast<size_t>(std::max<int64_t>(arenaBytes, 1))));
    counters_.push_back(std::make_unique<std::atomic<uint64_t>[]>(kCountersPerRank));
    doorbells_.push_back(std::make_unique<Doorbell>());
    mem.doorbells.push_back(doorbells_.back().get());
    for (int i = 0; i < kCountersPerRank; ++i) counters_.back()[i].store(0);
    mem.arenas.push_back(arenas_.back().get());
    mem.counters.push_back(counters_.back().get());
  }
  if (options.checkProtocol) {
    checker_ = std::make_unique<ProtocolChecker>(topo.ranks(), options.queues);
    for (int r = 0; r < topo.ranks(); ++r)
      checker_->watch(mem.arenas[static_cast<size_t>(r)], arenaBytes, "rank " + std::to_string(r) + " arena");
    options.checker = checker_.get();
  }
  for (int r = 0; r < topo.ranks(); ++r)
    endpoints_.push_back(std::make_unique<HostEndpoint>(topo, r, mem, options));
}

HostWorld::~HostWorld() {
  // All ranks stop before any is torn down, so a rank's waits on its peers
  // give up at once rather than at their deadlines.
  for (auto& ep : endpoints_) ep->requestStop();
  for (auto& ep : endpoints_) ep->joinQueues();
  endpoints_.clear();
}

}  // namespace tide::fabric::host
