#include "fabric/host/shm_world.hpp"

#include <unistd.h>  // getpid

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <new>
#include <system_error>
#include <thread>

#include "fabric/host/failure_record.hpp"
#include "fabric/process_liveness.hpp"
#include "fabric/random_bits.hpp"
#include "fabric/seconds_text.hpp"

namespace tide::fabric::host {
namespace {

using Clock = std::chrono::steady_clock;

// Other processes touch these through their own mappings: that is only
// sound for lock-free (address-free) atomics.
static_assert(std::atomic<uint64_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free);

constexpr uint64_t kSegmentMagic = 0x31'4D'48'53'45'44'49'54;  // "TIDESHM1" little-endian
constexpr uint32_t kLayoutVersion = 6;  // 2: the topology's node count; 3: pid and calls entered; 4: words board;
                                        // 5: the pid's namespace; 6: the words' count
constexpr int64_t kPageBytes = 4096;
constexpr size_t kJobIdBytes = 32;
static_assert(kJobIdChars < kJobIdBytes);

// At offset 0 of every segment; lets a mapping rank check it has the right
// segment before it trusts any offset in it.
struct SegmentHeader {
  uint64_t magic;
  uint32_t layoutVersion;
  int32_t rank;
  int32_t ranks;
  int32_t nodes;  // M of the topology (ranks = M x L): ranks that agree on N but not on M x L must not meet
  int32_t pid;    // the owner's process (RankMemory::pids), in the owner's pid namespace:
  uint64_t pidNamespace;  // its inode (currentPidNamespace; 0: unknown)
  std::atomic<uint64_t> callsEntered;  // RankMemory::callsEntered (lock-free, so shared across processes)
  int64_t arenaBytes;
  int64_t countersOffset;
  int64_t controlOffset;  // -1: none (every rank but 0)
  int64_t arenaOffset;
  int64_t totalBytes;
  char jobId[kJobIdBytes];
  // SharedWorld::gatherWords' board: the owner writes gather n's words into
  // slot n % 2, then stores n + 1 here (release). Two slots suffice: the
  // owner reaches gather n + 2 only after every peer published n + 1, which
  // each does after it has read the owner's words of gather n.
  std::atomic<uint64_t> wordsPublished;
  uint64_t wordCount[2];  // how many words each slot holds: ranks must gather alike
  uint64_t words[2][SharedWorld::kMaxGatherWords];
};
static_assert(sizeof(SegmentHeader) <= 4096, "the header stays within its page");

// Job-wide failure state, in rank 0's segment.
struct ControlBlock {
  std::atomic<int> failed;
  char failure[RankMemory::kFailureBytes];
};

struct SegmentLayout {
  int64_t counters = 0;
  int64_t control = -1;
  int64_t arena = 0;
  int64_t total = 0;
};

int64_t roundUpToPage(int64_t bytes) { return (bytes + kPageBytes - 1) / kPageBytes * kPageBytes; }

// Header, counters, [control], arena; every part page-aligned so the arena
// is as aligned as a fresh allocation.
SegmentLayout segmentLayout(int64_t arenaBytes, bool withControl) {
  SegmentLayout l;
  l.counters = roundUpToPage(sizeof(SegmentHeader));
  int64_t next = l.counters + roundUpToPage(int64_t{kCountersPerRank} * int64_t{sizeof(std::atomic<uint64_t>)});
  if (withControl) {
    l.control = next;
    next += roundUpToPage(sizeof(ControlBlock));
  }
  l.arena = next;
  l.total = l.arena + roundUpToPage(std::max<int64_t>(arenaBytes, 1));
  return l;
}

std::string randomJobId() {
  const uint64_t bits = freshRandom64();
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(kJobIdChars, '0');
  for (size_t i = 0; i < kJobIdChars; ++i) id[i] = kHex[(bits >> (4 * i)) & 15];
  return id;
}

SegmentHeader* headerOf(const ShmSegment& s) { return reinterpret_cast<SegmentHeader*>(s.data()); }

// The owner's pid where this process may ask about it (processGone), else 0:
// its own segment, and a peer in another pid namespace (or one that could not
// be told), whose pid names another process here or none, so that a late peer
// would be taken for an exited one. Such peers are waited for until the deadline.
int32_t askablePid(const SegmentHeader& h) {
  const uint64_t ns = currentPidNamespace();
  if (ns == 0 || h.pidNamespace != ns || h.pid == static_cast<int32_t>(::getpid())) return 0;
  return h.pid;
}

ShmSegment createSegment(const std::string& jobId, int rank, int ranks, int nodes, int64_t arenaBytes) {
  const SegmentLayout l = segmentLayout(arenaBytes, rank == 0);
  ShmSegment seg = ShmSegment::create(shmSegmentName(jobId, rank, ::getpid()), static_cast<size_t>(l.total));
  auto* ctr = reinterpret_cast<std::atomic<uint64_t>*>(seg.data() + l.counters);
  for (int i = 0; i < kCountersPerRank; ++i) new (ctr + i) std::atomic<uint64_t>(0);
  if (l.control >= 0) {
    auto* control = new (seg.data() + l.control) ControlBlock;
    control->failed.store(0);
    std::memset(control->failure, 0, sizeof control->failure);
  }
  static_assert(std::atomic<uint64_t>::is_always_lock_free, "calls entered is shared between processes");
  auto& h = *new (seg.data()) SegmentHeader{};
  h.magic = kSegmentMagic;
  h.layoutVersion = kLayoutVersion;
  h.rank = rank;
  h.ranks = ranks;
  h.nodes = nodes;
  h.pid = static_cast<int32_t>(::getpid());
  h.pidNamespace = currentPidNamespace();
  h.callsEntered.store(0);
  h.wordsPublished.store(0);
  h.arenaBytes = arenaBytes;
  h.countersOffset = l.counters;
  h.controlOffset = l.control;
  h.arenaOffset = l.arena;
  h.totalBytes = l.total;
  std::strncpy(h.jobId, jobId.c_str(), kJobIdBytes - 1);
  return seg;
}

// A peer's segment is trusted only if it is the one this job expects.
void checkPeerSegment(const ShmSegment& seg, const std::string& jobId, int peer, int ranks, int nodes,
                      int64_t arenaBytes) {
  auto bad = [&](const std::string& why) {
    return FabricError(FabricError::Kind::kUsage, "segment " + seg.name() + " of rank " + std::to_string(peer) +
                                                      ": " + why);
  };
  if (seg.size() < sizeof(SegmentHeader)) throw bad("too small for a header");
  const SegmentHeader& h = *headerOf(seg);
  if (h.magic != kSegmentMagic || h.layoutVersion != kLayoutVersion)
    throw bad("not a TIDE segment of layout version " + std::to_string(kLayoutVersion));
  if (std::string(h.jobId, strnlen(h.jobId, kJobIdBytes)) != jobId) throw bad("belongs to another job");
  if (h.rank != peer || h.ranks != ranks)
    throw bad("holds rank " + std::to_string(h.rank) + " of " + std::to_string(h.ranks));
  if (h.nodes != nodes)
    throw bad("its topology has " + std::to_string(h.nodes) + " node(s) of " + std::to_string(ranks / h.nodes) +
              ", this rank's " + std::to_string(nodes) + " of " + std::to_string(ranks / nodes) +
              ": every rank must name the same topology");
  if (h.arenaBytes != arenaBytes)
    throw bad("its arena has " + std::to_string(h.arenaBytes) + " bytes, this rank's " +
              std::to_string(arenaBytes) + ": the arena is symmetric, every rank must ask for the same size");
  const SegmentLayout l = segmentLayout(arenaBytes, peer == 0);
  if (h.countersOffset != l.counters || h.controlOffset != l.control || h.arenaOffset != l.arena ||
      h.totalBytes != l.total || seg.size() < static_cast<size_t>(l.total))
    throw bad("layout differs from this rank's");
}

ControlBlock* controlOf(const ShmSegment& rank0) {
  if (!rank0.data()) return nullptr;
  const SegmentHeader& h = *headerOf(rank0);
  return h.controlOffset < 0 ? nullptr : reinterpret_cast<ControlBlock*>(rank0.data() + h.controlOffset);
}

}  // namespace

SharedWorld::SharedWorld(plan::Topology topo, int rank, int64_t arenaBytes, KeyValueStore& store,
                         HostOptions options, SharedWorldOptions shm)
    : topo_(topo), rank_(rank) {
  topo_.checkRank(rank);
  if (arenaBytes < 0) throw FabricError(FabricError::Kind::kUsage, "negative arena size");
  // The checker's clocks live in one process's memory and must see every
  // rank's operations: refuse rather than check one rank and pass silently.
  if (options.checkProtocol || options.checker)
    throw FabricError(FabricError::Kind::kUsage,
                      "the protocol checker needs every rank in one process (HostWorld); "
                      "multi-process mode runs without it");
  // The send/recv and RMA stand-ins keep their messages and counts in one
  // process's memory too: refuse rather than run one-sided rails unasked.
  if (options.rails != HostRails::kPut)
    throw FabricError(FabricError::Kind::kUsage, std::string("host rails '") + hostRailsName(options.rails) +
                                                     "' need every rank in one process (HostWorld); "
                                                     "multi-process mode has one-sided rails only");
  // Checked before the bootstrap: a rank that could not make its endpoint after it would leave its
  // peers, already past the bootstrap, waiting for it until their deadline.
  HostEndpoint::checkOptions(options);
  const std::string context = "rank " + std::to_string(rank) + ": multi-process host fabric bootstrap";
  try {
    // Worlds that the same ranks build one after another get their own keys.
    const int64_t world = store.add(shm.keyPrefix + "rank" + std::to_string(rank) + "/worlds", 1) - 1;
    bootstrap(store, shm.keyPrefix + std::to_string(world) + "/", arenaBytes, shm.bootstrapTimeoutSeconds);
  } catch (const std::exception& e) {
    // Peers already past the bootstrap see the failure record in their next wait and stop at
    // once; peers still waiting in the store fail at their bootstrap deadline.
    recordJobFailure(context + " failed: " + e.what());
    unlinkAllNames();
    segments_.clear();
    const std::string what = context + (jobId_.empty() ? "" : " (job " + jobId_ + ")") + " failed: " + e.what();
    if (const auto* fe = dynamic_cast<const FabricError*>(&e)) {
      // Keys an earlier job left in the store (one that did not finish, or had other ranks)
      // misdirect this one: its ranks read a gone job's id or wait for keys nobody writes.
      const bool lost = fe->kind() == FabricError::Kind::kTimeout || fe->kind() == FabricError::Kind::kPeerFailure;
      throw FabricError(fe->kind(), lost ? what + " (a rank that never started or was given another store "
                                                  "directory, two processes given the same rank, or an earlier "
                                                  "job's keys in this store directory: give each process its own "
                                                  "rank, and each job a fresh store directory)"
                                         : what);
    }
    if (const auto* se = dynamic_cast<const std::system_error*>(&e)) throw std::system_error(se->code(), what);
    throw std::runtime_error(what);
  }
  // Every rank has mapped every segment: the names have done their job.
  unlinkAllNames();
  try {
    endpoint_ = std::make_unique<HostEndpoint>(topo_, rank_, rankMemory(arenaBytes), options);
  } catch (const std::exception& e) {
    // Its worker threads refused (a process or thread limit, say): the peers, past the bootstrap, must hear
    // of it at their next wait rather than at their deadline.
    recordJobFailure("rank " + std::to_string(rank_) + ": the host fabric's endpoint could not be made: " +
                     e.what());
    throw;
  }
}

void SharedWorld::recordJobFailure(const std::string& message) noexcept {
  if (!rank0Checked_ || segments_.empty()) return;
  if (ControlBlock* control = controlOf(segments_[0]))
    recordFirstFailure(control->failed, control->failure, sizeof control->failure, message);
}

SharedWorld::~SharedWorld() { endpoint_.reset(); }

std::vector<uint64_t> SharedWorld::gatherWords(const std::vector<uint64_t>& mine, double timeoutSeconds) {
  const size_t n = mine.size();
  if (n > kMaxGatherWords)
    throw FabricError(FabricError::Kind::kUsage, "host fabric: a gather of " + std::to_string(n) + " words (at most " +
                                                     std::to_string(kMaxGatherWords) + ")");
  const uint64_t gather = gathers_++;
  SegmentHeader& own = *headerOf(segments_[static_cast<size_t>(rank_)]);
  std::copy(mine.begin(), mine.end(), own.words[gather % 2]);
  own.wordCount[gather % 2] = n;
  own.wordsPublished.store(gather + 1, std::memory_order_release);
  ControlBlock* control = controlOf(segments_[0]);
  const std::string who = "host fabric: rank " + std::to_string(rank_) + ": a gather over the ranks: ";
  // A failure anywhere in the job (a peer's gather that gave up included) ends this one.
  auto refuseIfJobFailed = [&] {
    if (control != nullptr && jobFailed(&control->failed))
      throw FabricError(FabricError::Kind::kPeerFailure,
                        who + "the job failed: " + firstFailure(control->failed, control->failure));
  };
  // This rank gives up: recorded for the job, so that a peer that still finds
  // its words (it came later) stops at its next wait instead of at its deadline.
  auto giveUp = [&](FabricError::Kind kind, const std::string& why) {
    if (control != nullptr) recordFirstFailure(control->failed, control->failure, sizeof control->failure, who + why);
    throw FabricError(kind, who + why);
  };
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(timeoutSeconds));
  std::vector<uint64_t> all(static_cast<size_t>(topo_.ranks()) * n);
  std::string missing;
  for (int peer = 0; peer < topo_.ranks(); ++peer) {
    const SegmentHeader& h = *headerOf(segments_[static_cast<size_t>(peer)]);
    auto sleep = std::chrono::microseconds(50);
    auto nextLivenessCheck = start;
    // Polled (the ranks are other processes); a failed job, a peer process
    // that has exited, or the deadline ends the wait.
    while (h.wordsPublished.load(std::memory_order_acquire) < gather + 1) {
      refuseIfJobFailed();
      const auto now = Clock::now();
      if (now >= nextLivenessCheck) {
        if (const int32_t pid = askablePid(h); pid > 0 && processGone(pid))
          giveUp(FabricError::Kind::kPeerFailure, "the process of rank " + std::to_string(peer) + " (pid " +
                                                      std::to_string(pid) + ") has exited");
        nextLivenessCheck = now + std::chrono::milliseconds(100);
      }
      if (now >= deadline) break;
      std::this_thread::sleep_for(sleep);
      sleep = std::min(sleep * 2, std::chrono::microseconds(2000));
    }
    if (h.wordsPublished.load(std::memory_order_acquire) < gather + 1) {
      missing += (missing.empty() ? "" : ", ") + std::to_string(peer);
      continue;
    }
    // A peer gathering another number of words is out of step with this rank (not read as n words,
    // some of them an earlier gather's).
    if (h.wordCount[gather % 2] != n)
      giveUp(FabricError::Kind::kUsage, "rank " + std::to_string(peer) + " gathered " +
                                            std::to_string(h.wordCount[gather % 2]) + " words where this rank gathered " +
                                            std::to_string(n) + ": the ranks' calls are out of step");
    std::copy(h.words[gather % 2], h.words[gather % 2] + n, all.begin() + static_cast<std::ptrdiff_t>(peer * n));
  }
  if (!missing.empty())
    giveUp(FabricError::Kind::kTimeout,
           "waited " + secondsText(timeoutSeconds) + " and never heard from rank(s) " + missing);
  refuseIfJobFailed();  // every word came, but a peer gave up meanwhile: it will not run the collective
  return all;
}

void SharedWorld::bootstrap(KeyValueStore& store, const std::string& keys, int64_t arenaBytes,
                            double timeoutSeconds) {
  // One deadline for the whole bootstrap, however the waits add up.
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(timeoutSeconds));
  auto remaining = [&] {
    return std::max(0.0, std::chrono::duration<double>(deadline - Clock::now()).count());
  };
  const int ranks = topo_.ranks();

  if (rank_ == 0) {
    jobId_ = randomJobId();
    store.set(keys + "job", jobId_);
  } else {
    jobId_ = store.get(keys + "job", remaining());
  }

  // Where every rank of a job was killed before step 4, nobody else removes its segments. A name
  // without its creator's pid namespace (an older build's, or no /proc) younger than this may be
  // a live bootstrap's seen from another namespace; the bootstraps on one host most likely share
  // this one's deadline.
  sweepSegmentsOfDeadProcesses(std::max(kStaleSegmentAgeSeconds, timeoutSeconds));

  segments_.resize(static_cast<size_t>(ranks));
  segments_[static_cast<size_t>(rank_)] = createSegment(jobId_, rank_, ranks, topo_.nodes, arenaBytes);
  rank0Checked_ = rank_ == 0;
  // Published only once initialised: a peer that sees the name may map it.
  store.set(keys + "segment/" + std::to_string(rank_), segments_[static_cast<size_t>(rank_)].name());

  for (int peer = 0; peer < ranks; ++peer) {
    if (peer == rank_) continue;
    const std::string name = store.get(keys + "segment/" + std::to_string(peer), remaining());
    try {
      segments_[static_cast<size_t>(peer)] = ShmSegment::open(name);
    } catch (const std::system_error& e) {
      if (e.code() != std::errc::no_such_file_or_directory) throw;
      // Published, then removed: only a rank that gave up does that.
      throw FabricError(FabricError::Kind::kPeerFailure,
                        "segment " + name + " of rank " + std::to_string(peer) +
                            " is gone: a rank gave up on the bootstrap and removed the job's segments");
    }
    checkPeerSegment(segments_[static_cast<size_t>(peer)], jobId_, peer, ranks, topo_.nodes, arenaBytes);
    if (peer == 0) rank0Checked_ = true;
  }
  storeBarrier(store, keys + "mapped", ranks, remaining());
}

void SharedWorld::unlinkAllNames() const noexcept {
  if (jobId_.empty()) return;  // nothing was created before the job id was known
  bool allMapped = !segments_.empty();
  for (const ShmSegment& seg : segments_) {
    if (seg.data()) ShmSegment::unlink(seg.name());
    allMapped = allMapped && seg.data();
  }
  if (allMapped) return;
  // A name holds its creator's pid, so one this rank never read (a peer that died before it
  // published, or whose name this rank did not wait for) is found by the job id.
  unlinkNamesOfJob(jobId_, topo_.ranks());
}

RankMemory SharedWorld::rankMemory(int64_t arenaBytes) const {
  RankMemory mem;
  mem.arenaBytes = arenaBytes;
  for (const ShmSegment& seg : segments_) {
    const SegmentHeader& h = *headerOf(seg);
    mem.arenas.push_back(seg.data() + h.arenaOffset);
    mem.counters.push_back(reinterpret_cast<std::atomic<uint64_t>*>(seg.data() + h.countersOffset));
    mem.callsEntered.push_back(&headerOf(seg)->callsEntered);
    mem.pids.push_back(askablePid(h));
  }
  ControlBlock* control = controlOf(segments_[0]);
  mem.failed = &control->failed;
  mem.failure = control->failure;
  return mem;  // no doorbells: ranks in other processes poll
}

}  // namespace tide::fabric::host
