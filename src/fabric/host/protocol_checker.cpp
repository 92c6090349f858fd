#include "fabric/host/protocol_checker.hpp"

#include <algorithm>
#include <cstdint>

#include "fabric/byte_range.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric::host {

ProtocolChecker::ProtocolChecker(int ranks, int queuesPerRank)
    : ranks_(ranks), queues_(queuesPerRank),
      queueClock_(static_cast<size_t>(ranks * queuesPerRank), Clock(static_cast<size_t>(ranks * (queuesPerRank + 1)), 0)),
      hostClock_(static_cast<size_t>(ranks), Clock(static_cast<size_t>(ranks * (queuesPerRank + 1)), 0)) {
  for (int r = 0; r < ranks; ++r) hostClock_[static_cast<size_t>(r)][static_cast<size_t>(hostTid(r))] = 1;
}

void ProtocolChecker::join(Clock& a, const Clock& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::max(a[i], b[i]);
}

void ProtocolChecker::watch(const void* base, int64_t bytes, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  buffers_.push_back({name, static_cast<const std::byte*>(base), bytes, {}, {}});
}

void ProtocolChecker::watchInbox(const void* base, int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  Buffer* b = find(base, bytes, "annotateInbox");
  if (!b) return;
  const int64_t off = static_cast<const std::byte*>(base) - b->base;
  if (b->inbox.empty()) b->inbox.assign(static_cast<size_t>((b->bytes + 3) / 4), 255);  // 255: not an inbox
  for (int64_t w = off / 4; w < (off + bytes + 3) / 4; ++w) b->inbox[static_cast<size_t>(w)] = 0;
}

ProtocolChecker::Buffer* ProtocolChecker::find(const void* p, int64_t bytes, const std::string& who) {
  for (Buffer& b : buffers_)
    if (liesWithin(p, bytes, b.base, b.bytes)) return &b;
  // A range partly inside a buffer is no access to memory nobody watches: it
  // runs past the buffer's end or starts before it, the very access that is wrong.
  for (const Buffer& b : buffers_) {
    if (!rangesMeet(p, bytes, b.base, b.bytes)) continue;
    const auto begin =
        static_cast<int64_t>(reinterpret_cast<std::uintptr_t>(p) - reinterpret_cast<std::uintptr_t>(b.base));
    int64_t end = 0;
    const bool wraps = __builtin_add_overflow(begin, bytes, &end);
    violation("'" + who + "' touches bytes [" + std::to_string(begin) + ", " +
              (wraps ? std::string("beyond") : std::to_string(end)) + ") of " + b.name + " (" +
              std::to_string(b.bytes) + " bytes): " + overrunText(begin, end, b.bytes, wraps));
  }
  return nullptr;
}

void ProtocolChecker::violation(const std::string& what) {
  throw FabricError(FabricError::Kind::kProtocol, "protocol violation: " + what);
}

ProtocolChecker::Clock ProtocolChecker::hostClock(int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  Clock& host = hostClock_.at(static_cast<size_t>(rank));
  Clock c = host;
  ++host[static_cast<size_t>(hostTid(rank))];
  return c;
}

void ProtocolChecker::hostSynchronized(int tid) {
  std::lock_guard<std::mutex> lock(mu_);
  join(hostClock_.at(static_cast<size_t>(tid / queues_)), queueClock_[static_cast<size_t>(tid)]);
}

void ProtocolChecker::hostJoinEvent(int srcTid, uint64_t event) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = events_.find({srcTid, event});
  if (it != events_.end()) join(hostClock_.at(static_cast<size_t>(srcTid / queues_)), it->second);
}

void ProtocolChecker::hostBarrier() {
  std::lock_guard<std::mutex> lock(mu_);
  Clock all = hostClock_.front();
  for (const Clock& c : hostClock_) join(all, c);
  // Each host's own entry moves on, so that what a host does after the
  // barrier is not taken as done before it.
  for (int r = 0; r < ranks_; ++r) {
    Clock& host = hostClock_[static_cast<size_t>(r)];
    host = all;
    ++host[static_cast<size_t>(hostTid(r))];
  }
}

void ProtocolChecker::selfSignalIssued(int rank, int id, uint64_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t& v = selfIssued_[{rank, id}];
  v = std::max(v, value);
}

void ProtocolChecker::selfWaitIssued(int rank, int id, uint64_t value, const std::string& what) {
  uint64_t issued = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = selfIssued_.find({rank, id});
    if (it != selfIssued_.end()) issued = it->second;
  }
  if (issued < value)
    violation("I5: rank " + std::to_string(rank) + " issued a wait for its own counter " + std::to_string(id) +
              " >= " + std::to_string(value) + " (" + what + ") before issuing the signal that satisfies it " +
              "(issued up to " + std::to_string(issued) + "); a GPU stream blocked on it could stall the issue");
}

void ProtocolChecker::hostAccess(int rank, const void* p, int64_t bytes, Access kind, const std::string& what) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string who = "host of rank " + std::to_string(rank) + ": " + what;
  Buffer* b = find(p, bytes, who);
  if (!b) return;
  labels_.push_back(std::move(who));
  const int64_t off = static_cast<const std::byte*>(p) - b->base;
  Clock& host = hostClock_.at(static_cast<size_t>(rank));
  const uint32_t t = static_cast<uint32_t>(hostTid(rank));
  const int label = static_cast<int>(labels_.size()) - 1;
  check(*b, off, off + bytes, host, t, kind != Access::kRead, label);
  if (kind == Access::kZero || kind == Access::kWrite) inboxStep(*b, off, off + bytes, kind, label);
  ++host[t];
}

int ProtocolChecker::begin(int tid, const Clock& submittedAt, const std::string& label) {
  std::lock_guard<std::mutex> lock(mu_);
  Clock& qc = queueClock_[static_cast<size_t>(tid)];
  join(qc, submittedAt);
  ++qc[static_cast<size_t>(tid)];
  labels_.push_back(label);
  const int id = nextTask_++;
  tasks_[id] = {tid, qc, static_cast<int>(labels_.size()) - 1};
  return id;
}

void ProtocolChecker::end(int task) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = tasks_.find(task);
  if (it == tasks_.end()) return;
  join(queueClock_[static_cast<size_t>(it->second.tid)], it->second.clock);
  tasks_.erase(it);
}

void ProtocolChecker::check(Buffer& b, int64_t begin, int64_t end, const Clock& c, uint32_t tid, bool write,
                            int label) {
  for (const Range& r : b.ranges) {
    if (r.end <= begin || r.begin >= end || (!r.write && !write)) continue;
    if (c[r.tid] < r.clock)
      violation("unordered accesses to " + b.name + " bytes [" + std::to_string(std::max(begin, r.begin)) + ", " +
                std::to_string(std::min(end, r.end)) + "): '" + labels_[static_cast<size_t>(r.label)] + "' " +
                (r.write ? "writes" : "reads") + " and '" + labels_[static_cast<size_t>(label)] + "' " +
                (write ? "writes" : "reads") + " with no happens-before between them");
  }
  // Drop what the new access subsumes: earlier accesses inside its range
  // that happen before it (a write covers everything, a read covers reads).
  std::erase_if(b.ranges, [&](const Range& r) {
    return r.begin >= begin && r.end <= end && c[r.tid] >= r.clock && (write || !r.write);
  });
  b.ranges.push_back({begin, end, tid, c[tid], write, label});
}

void ProtocolChecker::inboxStep(Buffer& b, int64_t begin, int64_t end, Access kind, int label) {
  if (b.inbox.empty()) return;
  for (int64_t w = begin / 4; w < (end + 3) / 4; ++w) {
    uint8_t& s = b.inbox[static_cast<size_t>(w)];
    if (s == 255) continue;
    switch (kind) {
      case Access::kZero: s = 0; break;
      case Access::kWrite:
        if (s == 1)
          violation(b.name + " byte " + std::to_string(w * 4) + ": '" + labels_[static_cast<size_t>(label)] +
                    "' overwrites a contribution no landing has consumed yet (I1)");
        s = 1;
        break;
      case Access::kLandRead:
        if (s == 2)
          violation(b.name + " byte " + std::to_string(w * 4) + ": '" + labels_[static_cast<size_t>(label)] +
                    "' reads a stale block an earlier landing already consumed; it was not zeroed (I1)");
        if (s == 1) s = 2;
        break;
      case Access::kRead: break;
    }
  }
}

void ProtocolChecker::access(int task, const void* p, int64_t bytes, Access kind) {
  if (bytes <= 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const Task& t = tasks_.at(task);
  Buffer* b = find(p, bytes, labels_[static_cast<size_t>(t.label)]);
  if (!b) return;
  const int64_t off = static_cast<const std::byte*>(p) - b->base;
  check(*b, off, off + bytes, t.clock, static_cast<uint32_t>(t.tid), kind == Access::kWrite || kind == Access::kZero,
        t.label);
  inboxStep(*b, off, off + bytes, kind, t.label);
}

void ProtocolChecker::access2d(int task, const void* p, int64_t width, int64_t rows, int64_t pitch, Access kind) {
  for (int64_t r = 0; r < rows; ++r) access(task, static_cast<const std::byte*>(p) + r * pitch, width, kind);
}

void ProtocolChecker::signal(int task, int rank, int id, uint64_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  const Task& t = tasks_.at(task);
  signals_[{rank, id}].push_back({value, t.clock});
  const uint32_t tid = static_cast<uint32_t>(t.tid);
  const LastSignal now{value, tid, t.clock[tid], t.label};
  auto [it, first] = lastSignal_.try_emplace({rank, id}, now);
  if (first) return;
  const LastSignal& last = it->second;
  if (last.value != value) {
    const bool after = t.clock[last.tid] >= last.clock;
    if (!after || value < last.value)
      violation("I6: signals to counter " + std::to_string(id) + " of rank " + std::to_string(rank) + ": '" +
                labels_[static_cast<size_t>(now.label)] + "' sends " + std::to_string(value) + (after ? " after" : ", with no happens-before between them,") +
                " '" + labels_[static_cast<size_t>(last.label)] + "' sent " + std::to_string(last.value) +
                ": values must grow in happens-before order (on GPUs the counter could go back under a wait "
                "for the larger value, which then stalls for ever)");
  }
  if (value >= last.value) it->second = now;
}

void ProtocolChecker::waited(int task, int rank, int id, uint64_t value) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = signals_.find({rank, id});
  if (it == signals_.end()) return;
  for (const auto& [v, clock] : it->second)
    if (v >= value) {
      join(tasks_.at(task).clock, clock);
      return;
    }
}

void ProtocolChecker::mark(int task, uint64_t event) {
  std::lock_guard<std::mutex> lock(mu_);
  const Task& t = tasks_.at(task);
  events_[{t.tid, event}] = t.clock;
}

void ProtocolChecker::joinEvent(int task, int srcTid, uint64_t event) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = events_.find({srcTid, event});
  if (it != events_.end()) join(tasks_.at(task).clock, it->second);
}

}  // namespace tide::fabric::host
