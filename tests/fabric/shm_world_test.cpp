// Multi-process mode of the host fabric: one forked process per rank builds
// its endpoint through a FileStore, runs TIDE-AG and TIDE-RS and checks its
// own outputs against references it computes itself (every rank draws every
// rank's inputs from one seed shared through the store). Also: a peer killed
// mid-run makes the others fail stop within their deadline, and no segment of
// the job is left in /dev/shm, whether a peer died or never came; segments
// whose every rank was killed during the bootstrap are swept by a later one.
#include <gtest/gtest.h>

#include <fcntl.h>  // AT_FDCWD
#include <sched.h>  // unshare
#include <signal.h>
#include <sys/file.h>  // flock
#include <sys/mman.h>  // shm_open
#include <sys/stat.h>  // utimensat
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collectives/communicator.hpp"
#include "fabric/host/file_store.hpp"
#include "fabric/host/host_kernels.hpp"
#include "bench/reference.hpp"
#include "fabric/host/shm_world.hpp"
#include "test_seed.hpp"

namespace tide {
namespace {

using fabric::FabricError;
using fabric::host::FileStore;
using fabric::host::SharedWorld;
using plan::DType;
using Clock = std::chrono::steady_clock;

// How a rank's process ends.
constexpr int kExitOk = 0;
constexpr int kExitMismatch = 1;     // an output differed from its reference
constexpr int kExitFabricError = 2;  // a deadline, a failed peer, a refused peer
constexpr int kExitOtherError = 3;

double secondsSince(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A fresh store directory per world, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tide-shm-test-XXXXXX").string();
    if (!::mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct ChildExit {
  bool exited = false;  // false: killed by a signal
  int code = -1;
  int signal = 0;
};

// The processes of one world. Children never return into GoogleTest: they
// leave through _exit with their body's code.
class Ranks {
 public:
  Ranks(int count, const std::function<int(int rank)>& body) {
    std::fflush(nullptr);  // nothing buffered gets written twice
    for (int r = 0; r < count; ++r) {
      const pid_t pid = ::fork();
      if (pid < 0) throw std::runtime_error("fork failed");
      if (pid == 0) ::_exit(runChild(r, body));
      pids_.push_back(pid);
    }
  }
  ~Ranks() {
    for (const pid_t pid : pids_)
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
  }

  void kill(int rank) { ::kill(pids_.at(static_cast<size_t>(rank)), SIGKILL); }

  // Reaps every child; one still running after `limitSeconds` is a hang: it
  // is killed and `hung` set.
  std::vector<ChildExit> wait(double limitSeconds, bool* hung) {
    *hung = false;
    std::vector<ChildExit> exits(pids_.size());
    const auto start = Clock::now();
    size_t left = pids_.size();
    while (left > 0) {
      for (size_t i = 0; i < pids_.size(); ++i) {
        if (pids_[i] <= 0) continue;
        int status = 0;
        if (::waitpid(pids_[i], &status, WNOHANG) != pids_[i]) continue;
        exits[i] = {WIFEXITED(status), WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                    WIFSIGNALED(status) ? WTERMSIG(status) : 0};
        pids_[i] = -1;
        --left;
      }
      if (left > 0 && secondsSince(start) > limitSeconds) {
        *hung = true;
        for (pid_t& pid : pids_)
          if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
            pid = -1;
          }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return exits;
  }

 private:
  static int runChild(int rank, const std::function<int(int)>& body) {
    int code = kExitOtherError;
    try {
      code = body(rank);
    } catch (const FabricError& e) {
      std::fprintf(stderr, "rank %d: fabric error: %s\n", rank, e.what());
      code = kExitFabricError;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    } catch (...) {
      std::fprintf(stderr, "rank %d: unknown exception\n", rank);
    }
    std::fflush(nullptr);
    return code;
  }

  std::vector<pid_t> pids_;
};

// Paths of a job's segments still present in /dev/shm: whatever starts with
// its job id, so a name the library would not recognise counts too.
std::vector<std::string> leftoverSegments(const std::string& jobId) {
  std::vector<std::string> left;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev/shm", ec))
    if (entry.path().filename().string().starts_with("tide-" + jobId + "-")) left.push_back(entry.path().string());
  return left;
}

std::string randomJobId() {
  std::random_device rd;
  const uint64_t bits = (uint64_t{rd()} << 32) ^ rd();
  char id[17];
  std::snprintf(id, sizeof id, "%016llx", static_cast<unsigned long long>(bits));
  return id;
}

bool shmExists(const std::string& name) { return std::filesystem::exists("/dev/shm" + name); }

// Held by each test that sweeps or needs a gone process's segment to stay:
// ctest runs every test in a process of its own, in parallel, and one test's
// sweep would take another's segment. The lock is on /dev/shm itself, so it
// covers every build on the host and leaves no file behind.
class SweepTestLock {
 public:
  SweepTestLock() : fd_(::open("/dev/shm", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) throw std::runtime_error("cannot lock /dev/shm");
  }
  ~SweepTestLock() { ::close(fd_); }
  SweepTestLock(const SweepTestLock&) = delete;
  SweepTestLock& operator=(const SweepTestLock&) = delete;

 private:
  int fd_;
};

// A segment with the bootstrap's name whose creator was SIGKILLed, as a killed
// bootstrap leaves it: reaped, or left a zombie (`reap` false, as a launcher
// still running leaves a killed rank) until this object goes. The name
// carries `pidNamespace` (0: none, as older builds wrote it), so that a test
// can pose as a creator of another pid namespace.
class SegmentOfKilledProcess {
 public:
  SegmentOfKilledProcess(const std::string& jobId, int rank,
                         uint64_t pidNamespace = fabric::host::currentPidNamespace(), bool reap = true)
      : reaped_(reap) {
    int ready[2];
    if (::pipe(ready) != 0) throw std::runtime_error("pipe failed");
    std::fflush(nullptr);
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      try {
        const auto seg =
            fabric::host::ShmSegment::create(fabric::host::shmSegmentName(jobId, rank, ::getpid(), pidNamespace), 4096);
        (void)!::write(ready[1], "1", 1);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "segment creator: %s\n", e.what());
        ::_exit(kExitOtherError);
      }
      for (;;) ::pause();
    }
    ::close(ready[1]);
    char byte = 0;
    const bool created = ::read(ready[0], &byte, 1) == 1;
    ::close(ready[0]);
    ::kill(pid_, SIGKILL);
    if (reap || !created) {
      ::waitpid(pid_, nullptr, 0);
      reaped_ = true;
    } else {
      // Until SIGKILL has landed, kill(pid, 0) still finds the process running.
      siginfo_t info{};
      ::waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOWAIT);
    }
    if (!created) throw std::runtime_error("the child did not create its segment");
    name_ = fabric::host::shmSegmentName(jobId, rank, pid_, pidNamespace);
  }
  ~SegmentOfKilledProcess() {
    fabric::host::ShmSegment::unlink(name_);
    if (!reaped_) ::waitpid(pid_, nullptr, 0);
  }
  SegmentOfKilledProcess(const SegmentOfKilledProcess&) = delete;
  SegmentOfKilledProcess& operator=(const SegmentOfKilledProcess&) = delete;

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  bool reaped_;
  std::string name_;
};

// ---------------------------------------------------------------- the work of one rank

constexpr double kStoreWaitSeconds = 10.0;

uint64_t sharedSeed(FileStore& store, int rank) {
  if (rank == 0) {
    store.set("test/seed", std::to_string(tide_test::testSeed()));
  }
  return std::stoull(store.get("test/seed", kStoreWaitSeconds));
}

// Ragged shapes: padded tail rows, 1-D and 3-D, rows < ranks, and one larger.
std::vector<plan::ParamSpec> raggedShapes(std::mt19937_64& rng, int ranks, DType t) {
  std::vector<plan::ParamSpec> specs;
  const int params = 2 + static_cast<int>(rng() % 3);
  for (int p = 0; p < params; ++p) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(3 * ranks + 5));
    plan::ParamSpec s;
    s.dtype = t;
    switch (rng() % 3) {
      case 0: s.shape = {rows}; break;
      case 1: s.shape = {rows, 1 + static_cast<int64_t>(rng() % 6)}; break;
      default: s.shape = {rows, 2, 1 + static_cast<int64_t>(rng() % 3)}; break;
    }
    specs.push_back(s);
  }
  // One larger parameter, so reduce-scatter runs several chunks and passes.
  specs.push_back({{200 + static_cast<int64_t>(rng() % 200), 48}, t});
  return specs;
}

void storeValue(std::vector<uint8_t>& buf, int64_t byteOffset, int64_t i, DType t, float v) {
  if (t == DType::kBF16) {
    const uint16_t b = fabric::host::floatToBf16(v);
    std::memcpy(buf.data() + byteOffset + i * 2, &b, 2);
  } else {
    std::memcpy(buf.data() + byteOffset + i * 4, &v, 4);
  }
}

// Every rank's inputs of one call, identical in every process.
struct CallInputs {
  std::vector<std::vector<uint8_t>> shards;              // [rank] packed S bytes
  std::vector<std::vector<std::vector<uint8_t>>> grads;  // [rank][param] D_p*K_p items
};

CallInputs drawInputs(const plan::GroupLayout& g, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int n = g.topo.ranks();
  CallInputs in;
  in.shards.resize(static_cast<size_t>(n));
  in.grads.resize(static_cast<size_t>(n));
  for (int u = 0; u < n; ++u) {
    auto& shard = in.shards[static_cast<size_t>(u)];
    shard.assign(static_cast<size_t>(g.shardBytes), 0);  // padding rows stay zero, as FSDP2 pads
    for (const plan::ParamLayout& P : g.params)
      for (int64_t i = 0; i < P.validRows(u) * P.rowElems; ++i)
        storeValue(shard, P.shardOffset, i, g.agDtype, normal(rng));
    for (const plan::ParamLayout& P : g.params) {
      std::vector<uint8_t> grad(static_cast<size_t>(P.rows * P.rowElems * plan::itemSize(g.gradDtype)));
      for (int64_t i = 0; i < P.rows * P.rowElems; ++i) storeValue(grad, 0, i, g.gradDtype, normal(rng));
      in.grads[static_cast<size_t>(u)].push_back(std::move(grad));
    }
  }
  return in;
}

// Bytes of `rank`'s landing that differ from the gather of every shard.
int64_t gatherMismatches(const plan::GroupLayout& g, const CallInputs& in, const std::byte* landing) {
  int64_t wrong = 0;
  for (size_t p = 0; p < g.params.size(); ++p) {
    const plan::ParamLayout& P = g.params[p];
    for (int src = 0; src < g.topo.ranks(); ++src) {
      const uint8_t* want = in.shards[static_cast<size_t>(src)].data() + P.shardOffset;
      const auto* got = reinterpret_cast<const uint8_t*>(landing + g.landing(static_cast<int>(p), src));
      for (int64_t b = 0; b < P.shardBytes; ++b) wrong += want[b] != got[b];
    }
  }
  return wrong;
}

// Elements of `rank`'s output off the float64 sum by more than
// 1e-5 * max(1, |ref|_inf).
int64_t reduceMismatches(const plan::GroupLayout& g, const CallInputs& in, int rank, const std::vector<float>& out) {
  std::vector<std::vector<const void*>> grads;
  for (const auto& rankGrads : in.grads) {
    grads.emplace_back();
    for (const auto& gp : rankGrads) grads.back().push_back(gp.data());
  }
  const std::vector<double> ref = bench::referenceShardSums(g, grads, rank);
  double refMax = 0;
  for (double v : ref) refMax = std::max(refMax, std::fabs(v));
  const double tolerance = 1e-5 * std::max(1.0, refMax);
  int64_t wrong = 0;
  for (size_t x = 0; x < ref.size(); ++x)
    wrong += !(std::fabs(double{out[x]} - ref[x]) <= tolerance);  // NaN counts as wrong
  return wrong;
}

struct RankJob {
  plan::Topology topo;
  DType dtype = DType::kBF16;
  int calls = 2;
  double timeoutSeconds = 5.0;
  std::string storeDir;
};

// One rank: bootstrap, then `calls` checked AG + RS calls on fresh inputs.
int runCheckedRank(const RankJob& job, int rank) {
  FileStore store(job.storeDir);
  const uint64_t seed = sharedSeed(store, rank);
  std::mt19937_64 shapeRng(seed);
  const plan::Plan pl = plan::makePlan(job.topo, raggedShapes(shapeRng, job.topo.ranks(), job.dtype), job.dtype);
  const plan::GroupLayout& g = pl.group;
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&pl});
  const int64_t landing = layout.bytes;

  fabric::host::HostOptions options;
  options.queues = collectives::kQueuesNeeded;
  options.timeoutSeconds = job.timeoutSeconds;
  fabric::host::SharedWorldOptions shm;
  shm.bootstrapTimeoutSeconds = kStoreWaitSeconds;
  SharedWorld world(job.topo, rank, landing + g.unshardedBytes(), store, options, shm);
  if (rank == 0) store.set("test/job", world.jobId());
  fabric::Endpoint& ep = world.endpoint();
  collectives::Communicator comm(ep, layout);

  int64_t agWrong = 0, rsWrong = 0;
  for (int call = 0; call < job.calls; ++call) {
    const CallInputs in = drawInputs(g, seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(call + 1));
    // Poison this rank's landing; peers write into it only after every rank
    // has poisoned its own.
    std::memset(ep.arena() + landing, 0xA5, static_cast<size_t>(g.unshardedBytes()));
    std::vector<float> out(static_cast<size_t>(g.outElems), bench::outputPoison());
    fabric::host::storeBarrier(store, "test/poisoned/" + std::to_string(call), job.topo.ranks(), kStoreWaitSeconds);

    comm.allGather(pl, in.shards[static_cast<size_t>(rank)].data(), landing);
    ep.synchronize(collectives::kCallerQueue);
    agWrong += gatherMismatches(g, in, ep.arena() + landing);

    std::vector<const void*> grads;
    for (const auto& grad : in.grads[static_cast<size_t>(rank)]) grads.push_back(grad.data());
    comm.reduceScatter(pl, grads, out.data(), 1.0f, false);
    ep.synchronize(collectives::kCallerQueue);
    ep.synchronizeAll();
    rsWrong += reduceMismatches(g, in, rank, out);
  }
  if (agWrong + rsWrong == 0) return kExitOk;
  std::fprintf(stderr, "rank %d (seed %llu): %lld landing bytes and %lld output elements wrong\n", rank,
               static_cast<unsigned long long>(seed), static_cast<long long>(agWrong),
               static_cast<long long>(rsWrong));
  return kExitMismatch;
}

// One rank that issues unchecked AG + RS calls until the fabric fails (a
// peer died) or `limitSeconds` pass; announces itself once its first call
// completed.
int runUntilFailure(const RankJob& job, int rank, double limitSeconds) {
  FileStore store(job.storeDir);
  const plan::Plan pl = plan::makePlan(job.topo, {{{97, 8}, job.dtype}, {{33}, job.dtype}}, job.dtype);
  const plan::GroupLayout& g = pl.group;
  const collectives::ScratchLayout layout = collectives::ScratchLayout::forPlans({&pl});
  fabric::host::HostOptions options;
  options.queues = collectives::kQueuesNeeded;
  options.timeoutSeconds = job.timeoutSeconds;
  fabric::host::SharedWorldOptions shm;
  shm.bootstrapTimeoutSeconds = kStoreWaitSeconds;
  SharedWorld world(job.topo, rank, layout.bytes + g.unshardedBytes(), store, options, shm);
  if (rank == 0) store.set("test/job", world.jobId());
  collectives::Communicator comm(world.endpoint(), layout);
  const CallInputs in = drawInputs(g, 1);
  std::vector<const void*> grads;
  for (const auto& grad : in.grads[static_cast<size_t>(rank)]) grads.push_back(grad.data());
  std::vector<float> out(static_cast<size_t>(g.outElems));
  const auto start = Clock::now();
  for (int call = 0; secondsSince(start) < limitSeconds; ++call) {
    comm.allGather(pl, in.shards[static_cast<size_t>(rank)].data(), layout.bytes);
    comm.reduceScatter(pl, grads, out.data(), 1.0f, false);
    world.endpoint().synchronizeAll();
    if (call == 0) store.set("test/running/" + std::to_string(rank), "1");
  }
  return kExitOk;
}

// ---------------------------------------------------------------- collectives across processes

struct Case {
  int m, l;
  DType dtype;
};

class SharedWorldCollectives : public ::testing::TestWithParam<Case> {};

TEST_P(SharedWorldCollectives, MatchReferencesInEveryProcess) {
  const Case c = GetParam();
  TempDir dir;
  RankJob job;
  job.topo = plan::Topology::make(c.m, c.l);
  job.dtype = c.dtype;
  job.calls = 3;
  job.storeDir = dir.path();
  Ranks ranks(job.topo.ranks(), [&](int rank) { return runCheckedRank(job, rank); });
  bool hung = false;
  const std::vector<ChildExit> exits = ranks.wait(30.0, &hung);
  EXPECT_FALSE(hung) << "a rank did not finish within 30 s";
  for (size_t r = 0; r < exits.size(); ++r)
    EXPECT_TRUE(exits[r].exited && exits[r].code == kExitOk)
        << "rank " << r << " exited with " << exits[r].code << " (signal " << exits[r].signal << ")";
  FileStore store(dir.path());
  const std::string jobId = store.get("test/job", 0.0);
  EXPECT_TRUE(leftoverSegments(jobId).empty()) << "segments of job " << jobId << " left in /dev/shm";
}

INSTANTIATE_TEST_SUITE_P(Processes, SharedWorldCollectives,
                         ::testing::Values(Case{2, 2, DType::kBF16}, Case{1, 4, DType::kBF16},
                                           Case{4, 1, DType::kFP32}, Case{2, 2, DType::kFP32},
                                           Case{3, 2, DType::kBF16}, Case{4, 2, DType::kFP32}),
                         [](const auto& param_info) {
                           return "M" + std::to_string(param_info.param.m) + "L" + std::to_string(param_info.param.l) + "_" +
                                  plan::dtypeName(param_info.param.dtype);
                         });

// ---------------------------------------------------------------- failures

// Rank `victim` is SIGKILLed while all ranks are issuing collectives under a
// wait deadline of `timeoutSeconds`: the survivors must all fail stop within
// `withinSeconds` of the kill. Nobody hangs, nothing stays in /dev/shm.
void expectSurvivorsFailStop(int victim, double timeoutSeconds, double withinSeconds) {
  TempDir dir;
  RankJob job;
  job.topo = plan::Topology::make(2, 2);
  job.timeoutSeconds = timeoutSeconds;
  job.storeDir = dir.path();
  Ranks ranks(job.topo.ranks(), [&](int rank) { return runUntilFailure(job, rank, 20.0); });
  FileStore store(dir.path());
  for (int r = 0; r < job.topo.ranks(); ++r) store.get("test/running/" + std::to_string(r), kStoreWaitSeconds);
  ranks.kill(victim);
  const auto killed = Clock::now();
  bool hung = false;
  const std::vector<ChildExit> exits = ranks.wait(withinSeconds + 4.0, &hung);
  const double stopSeconds = secondsSince(killed);
  EXPECT_FALSE(hung) << "a survivor hung after rank " << victim << " was killed";
  EXPECT_LT(stopSeconds, withinSeconds) << "survivors took too long to fail stop";
  for (int r = 0; r < job.topo.ranks(); ++r) {
    const ChildExit& e = exits[static_cast<size_t>(r)];
    if (r == victim) {
      EXPECT_EQ(e.signal, SIGKILL);
    } else {
      EXPECT_TRUE(e.exited && e.code == kExitFabricError)
          << "survivor rank " << r << " exited with " << e.code << " (signal " << e.signal << ")";
    }
  }
  const std::string jobId = store.get("test/job", 0.0);
  EXPECT_TRUE(leftoverSegments(jobId).empty()) << "segments of job " << jobId << " left in /dev/shm";
}

class KilledPeer : public ::testing::TestWithParam<int> {};

// The victim sets no failure flag: the first survivor to see it gone (or to
// pass its 1 s deadline) does, and the rest stop on it.
TEST_P(KilledPeer, OthersFailStopWithinTheirDeadline) { expectSurvivorsFailStop(GetParam(), 1.0, 6.0); }

// Under a deadline far longer than the test, the survivors still stop within
// seconds: a wait on the victim sees its process gone.
TEST_P(KilledPeer, OthersFailStopLongBeforeALongDeadline) { expectSurvivorsFailStop(GetParam(), 60.0, 5.0); }

INSTANTIATE_TEST_SUITE_P(Victims, KilledPeer, ::testing::Values(0, 3),
                         [](const auto& param_info) { return "Rank" + std::to_string(param_info.param); });

// Rank 3 never comes: the others' bootstrap times out with an error naming
// what they waited for, and they remove every segment they created.
TEST(SharedWorldBootstrap, MissingPeerTimesOutAndLeavesNothing) {
  TempDir dir;
  const plan::Topology topo = plan::Topology::make(1, 4);
  Ranks ranks(3, [&](int rank) {
    FileStore store(dir.path());
    fabric::host::SharedWorldOptions shm;
    shm.bootstrapTimeoutSeconds = 1.0;
    try {
      SharedWorld world(topo, rank, 1 << 16, store, {}, shm);
    } catch (const FabricError& e) {
      store.set("test/error/" + std::to_string(rank), e.what());
      throw;
    }
    return kExitOk;
  });
  bool hung = false;
  const std::vector<ChildExit> exits = ranks.wait(10.0, &hung);
  EXPECT_FALSE(hung);
  FileStore store(dir.path());
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(exits[static_cast<size_t>(r)].exited && exits[static_cast<size_t>(r)].code == kExitFabricError)
        << "rank " << r;
    const std::string error = store.get("test/error/" + std::to_string(r), 0.0);
    EXPECT_NE(error.find("rank " + std::to_string(r)), std::string::npos) << error;
    EXPECT_NE(error.find("timed out"), std::string::npos) << error;
    EXPECT_NE(error.find("segment/3"), std::string::npos) << error;
    // The error names the job, which names its segments.
    const size_t at = error.find("(job ");
    ASSERT_NE(at, std::string::npos) << error;
    const std::string jobId = error.substr(at + 5, error.find(')', at) - at - 5);
    EXPECT_TRUE(leftoverSegments(jobId).empty()) << "segments of job " << jobId << " left in /dev/shm";
  }
}

// Every rank's process exited with kExitOk within `seconds`, none hung.
void expectEveryRankOk(Ranks& ranks, double seconds) {
  bool hung = false;
  for (const ChildExit& e : ranks.wait(seconds, &hung)) EXPECT_TRUE(e.exited && e.code == kExitOk) << e.code;
  EXPECT_FALSE(hung);
}

// One forked process per rank of `topo`, each joining a small shared world
// bootstrapped through a store in a fresh directory and returning
// body(rank, world, storeDir); every rank must exit kExitOk.
template <typename Body>
void expectWorldRanksOk(const plan::Topology& topo, Body&& body) {
  TempDir dir;
  Ranks ranks(topo.ranks(), [&](int rank) {
    FileStore store(dir.path());
    SharedWorld world(topo, rank, 1 << 16, store);
    return body(rank, world, dir.path());
  });
  expectEveryRankOk(ranks, 30.0);
}

// Three processes gather words five times (more than the board's two slots,
// with ranks racing ahead): every rank gets every rank's words of that gather,
// in rank order, and the store directory is not needed any more.
TEST(SharedWorldGather, EveryRankGetsEveryRanksWordsOfEachGather) {
  TIDE_TRACED_SEED(seed);
  auto wordsOf = [seed](int rank, int gather) {
    std::mt19937_64 rng(seed + static_cast<uint64_t>(rank * 100 + gather));
    return std::vector<uint64_t>{rng(), rng(), ~uint64_t{0} - static_cast<uint64_t>(gather)};
  };
  expectWorldRanksOk(plan::Topology::make(1, 3), [&](int rank, SharedWorld& world, const std::string& storeDir) {
    for (int gather = 0; gather < 5; ++gather) {
      // The gathers must not need the store: gone after the first (every rank is past its bootstrap then).
      if (rank == 0 && gather == 1) std::filesystem::remove_all(storeDir);
      if (rank == 2 && gather % 2 == 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));  // behind
      const std::vector<uint64_t> all = world.gatherWords(wordsOf(rank, gather), 10.0);
      std::vector<uint64_t> want;
      for (int r = 0; r < 3; ++r) {
        const std::vector<uint64_t> w = wordsOf(r, gather);
        want.insert(want.end(), w.begin(), w.end());
      }
      if (all != want) return kExitMismatch;
    }
    return kExitOk;
  });
}

// Rank 1 of two never gathers: rank 0's gather times out on its deadline, naming rank 1.
TEST(SharedWorldGather, APeerThatNeverGathersTimesOutNamingIt) {
  expectWorldRanksOk(plan::Topology::make(2, 1), [](int rank, SharedWorld& world, const std::string&) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      return kExitOk;
    }
    const auto start = Clock::now();
    try {
      world.gatherWords({uint64_t{1}}, 0.5);
    } catch (const FabricError& e) {
      const bool named = std::string(e.what()).find("never heard from rank(s) 1") != std::string::npos;
      return e.kind() == FabricError::Kind::kTimeout && named && secondsSince(start) < 2.0 ? kExitOk
                                                                                           : kExitMismatch;
    }
    return kExitMismatch;
  });
}

// Ranks out of step gather different numbers of words: each refuses (naming
// the peer and both counts) or hears of the other's refusal, instead of
// reading n words of which some were an earlier gather's.
TEST(SharedWorldGather, ADifferentWordCountIsRefused) {
  expectWorldRanksOk(plan::Topology::make(1, 2), [](int rank, SharedWorld& world, const std::string&) {
    world.gatherWords({7, 8, 9}, 10.0);  // in step: fills the board's slot 0 with three words each
    world.gatherWords({1}, 10.0);
    try {
      // Slot 0 again: rank 1's stale third word would have been read as its own.
      world.gatherWords(rank == 0 ? std::vector<uint64_t>{5, 6, 0} : std::vector<uint64_t>{5, 6}, 10.0);
    } catch (const FabricError& e) {
      const std::string what = e.what();
      const bool named = what.find("gathered 2 words where this rank gathered 3") != std::string::npos ||
                         what.find("gathered 3 words where this rank gathered 2") != std::string::npos;
      return named ? kExitOk : kExitMismatch;
    }
    return kExitMismatch;
  });
}

// Ranks in containers of their own share /dev/shm but not a pid namespace: a
// peer's pid names another process there, or none, so a rank once took a late
// peer of another namespace for an exited one and failed the job. Rank 0 runs
// as pid 1 of a namespace of its own and waits for rank 1, which gathers a
// second late: both must get the words (the late peer is waited for until the
// deadline, not asked about).
TEST(SharedWorldGather, ALatePeerOfAnotherPidNamespaceIsNotTakenForExited) {
  TempDir dir;
  const plan::Topology topo = plan::Topology::make(2, 1);
  auto gather = [&](int rank) {
    FileStore store(dir.path());
    SharedWorld world(topo, rank, 1 << 16, store);
    if (rank == 1) std::this_thread::sleep_for(std::chrono::seconds(1));
    const std::vector<uint64_t> all = world.gatherWords({uint64_t{100} + static_cast<uint64_t>(rank)}, 10.0);
    return all == std::vector<uint64_t>{100, 101} ? kExitOk : kExitMismatch;
  };
  Ranks ranks(2, [&](int rank) {
    if (rank == 1) return gather(rank);
    // No privilege: the test skips, once rank 0 has gathered with rank 1 all the same (not left waiting).
    if (::unshare(CLONE_NEWPID) != 0) return gather(rank) == kExitOk ? kExitMismatch + 10 : kExitOtherError;
    const pid_t child = ::fork();  // the first process of the new namespace: pid 1 there
    if (child < 0) return kExitOtherError;
    if (child == 0) {
      int code = kExitOk;
      try {
        code = gather(rank);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank 0 (pid %d in its namespace): %s\n", static_cast<int>(::getpid()), e.what());
        code = kExitFabricError;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return kExitOtherError;
    return WEXITSTATUS(status);
  });
  bool hung = false;
  const std::vector<ChildExit> exits = ranks.wait(60.0, &hung);
  EXPECT_FALSE(hung);
  if (exits[0].exited && exits[0].code == kExitMismatch + 10) GTEST_SKIP() << "cannot make a pid namespace here";
  for (const ChildExit& e : exits) EXPECT_TRUE(e.exited && e.code == kExitOk) << e.code;
}

// Rank 1 of three never comes and rank 2 is killed once it has published its
// segment, which rank 0 never maps (it waits for rank 1's first): failing,
// rank 0 must still find rank 2's name, whose pid it never read.
TEST(SharedWorldBootstrap, FailingRankRemovesSegmentsItNeverMapped) {
  TempDir dir;
  const plan::Topology topo = plan::Topology::make(1, 3);
  Ranks ranks(2, [&](int index) {
    const int rank = index == 0 ? 0 : 2;
    FileStore store(dir.path());
    fabric::host::SharedWorldOptions shm;
    shm.bootstrapTimeoutSeconds = rank == 0 ? 3.0 : kStoreWaitSeconds;
    SharedWorld world(topo, rank, 1 << 16, store, {}, shm);
    return kExitOk;
  });
  FileStore store(dir.path());
  // The default key prefix, world 0.
  const std::string published = store.get("tide/shm/0/segment/2", kStoreWaitSeconds);
  const std::string jobId = store.get("tide/shm/0/job", 0.0);
  EXPECT_TRUE(shmExists(published)) << published;
  ranks.kill(1);
  bool hung = false;
  const std::vector<ChildExit> exits = ranks.wait(10.0, &hung);
  EXPECT_FALSE(hung);
  EXPECT_TRUE(exits[0].exited && exits[0].code == kExitFabricError) << exits[0].code;
  EXPECT_EQ(exits[1].signal, SIGKILL);
  EXPECT_TRUE(leftoverSegments(jobId).empty()) << "segments of job " << jobId << " left in /dev/shm";
}

// ---------------------------------------------------------------- segments

// A segment that exists but has no size (its creator has not sized it yet,
// or died first) is refused saying so: no call failed, and the message once
// named whatever errno an earlier call had left.
TEST(ShmSegmentOpen, AnUnsizedSegmentIsRefusedSayingSo) {
  // Not a "tide-" name: no sweep of another test takes it for a segment of its own.
  const std::string name = "/tidetest-unsized-" + std::to_string(::getpid());
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ::close(fd);
  errno = EACCES;  // stale, as an earlier failed call would leave it
  try {
    fabric::host::ShmSegment::open(name);
    ADD_FAILURE() << "an unsized segment was mapped";
  } catch (const std::exception& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("shared memory " + name + " has size 0: its creator has not sized it yet, or died before it did"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find(std::strerror(EACCES)), std::string::npos) << what;
  }
  fabric::host::ShmSegment::unlink(name);
}

// ---------------------------------------------------------------- leftovers of killed bootstraps

TEST(SegmentSweep, RemovesSegmentsOfGoneProcesses) {
  const SweepTestLock lock;
  ASSERT_NE(fabric::host::currentPidNamespace(), 0u) << "no /proc/self/ns/pid: every name would lack its namespace";
  const std::string jobId = randomJobId();
  SegmentOfKilledProcess dead(jobId, 0);
  ASSERT_TRUE(shmExists(dead.name())) << dead.name();
  EXPECT_NE(dead.name().find("-n" + std::to_string(fabric::host::currentPidNamespace())), std::string::npos)
      << dead.name() << " does not name its creator's pid namespace";
  // Of this pid namespace, so its creator's pid is one to ask about: no age is needed.
  EXPECT_GE(fabric::host::sweepSegmentsOfDeadProcesses(3600), 1);
  EXPECT_FALSE(shmExists(dead.name())) << dead.name() << " survived the sweep";
  EXPECT_TRUE(leftoverSegments(jobId).empty());
}

// A killed rank whose launcher has not reaped it yet is a zombie: it never
// maps its segment again, so the sweep takes the segment as it would a gone
// process's.
TEST(SegmentSweep, RemovesSegmentsOfZombies) {
  const SweepTestLock lock;
  ASSERT_NE(fabric::host::currentPidNamespace(), 0u);
  const std::string jobId = randomJobId();
  const SegmentOfKilledProcess zombie(jobId, 0, fabric::host::currentPidNamespace(), /*reap=*/false);
  ASSERT_EQ(::kill(zombie.pid(), 0), 0) << "the killed child was reaped: it is no zombie";
  ASSERT_TRUE(shmExists(zombie.name())) << zombie.name();
  EXPECT_GE(fabric::host::sweepSegmentsOfDeadProcesses(3600), 1);
  EXPECT_FALSE(shmExists(zombie.name())) << zombie.name() << " of a zombie survived the sweep";
}

// A sweep keeps segments of live processes, those of creators whose pid
// namespace is unknown while young, those of another pid namespace at any
// age, and names it did not make, even where they name a gone process.
TEST(SegmentSweep, KeepsLiveYoungForeignNamespaceAndForeignNames) {
  const SweepTestLock lock;
  const uint64_t ownNamespace = fabric::host::currentPidNamespace();
  ASSERT_NE(ownNamespace, 0u);
  const std::string jobId = randomJobId();
  const SegmentOfKilledProcess deadOfUnknownNamespace(jobId, 1, 0);
  const SegmentOfKilledProcess deadOfOtherNamespace(jobId, 3, ownNamespace + 1);
  const std::string deadPid = std::to_string(deadOfUnknownNamespace.pid());
  const std::string liveName = fabric::host::shmSegmentName(jobId, 0, ::getpid());
  std::string upper = jobId;
  std::transform(upper.begin(), upper.end(), upper.begin(), ::toupper);
  if (upper == jobId) upper[0] = 'G';  // all digits: not hex either way
  const std::string ns = std::to_string(ownNamespace);
  const std::vector<std::string> foreign = {
      "/tide-notours",
      "/tide-" + jobId + "-2",                                    // no pid (the format before pids)
      "/tide-" + jobId + "-2-p" + deadPid + "-x",                 // trailing text
      "/tide-" + jobId + "-2-p" + deadPid + "-n" + ns + "-x",     // trailing text after the namespace
      "/tide-" + jobId + "-2-p" + deadPid + "-n0",                // an unknown namespace is left out, not 0
      "/tide-" + jobId + "-2-p" + deadPid + "-n",                 // a namespace without digits
      "/tide-" + jobId + "-2-p" + deadPid + "-n0" + ns,           // a namespace std::to_string would not write
      "/tide-" + jobId + "-2-p0" + deadPid,                       // a pid std::to_string would not write
      "/tide-" + jobId + "-02-p" + deadPid,                       // nor such a rank
      "/tide-" + jobId + "--2-p" + deadPid,                       // nor a negative one
      "/tide-" + jobId.substr(1) + "-2-p" + deadPid,              // a job id too short
      "/tide-" + upper + "-2-p" + deadPid,                        // not lower-case hex
      "/xtide-" + jobId + "-2-p" + deadPid,                       // another prefix
      "/tide-" + jobId + "-2-p" + deadPid + "0000000000",         // a pid beyond pid_t
      "/tide-" + jobId + "-2-p" + deadPid + "-n99999999999999999999"  // a namespace beyond 63 bits
  };
  std::vector<fabric::host::ShmSegment> held;
  held.push_back(fabric::host::ShmSegment::create(liveName, 4096));
  for (const std::string& name : foreign) held.push_back(fabric::host::ShmSegment::create(name, 4096));

  fabric::host::sweepSegmentsOfDeadProcesses(3600);
  EXPECT_TRUE(shmExists(deadOfUnknownNamespace.name()))
      << "a segment of an unknown namespace younger than the age limit was swept";
  fabric::host::sweepSegmentsOfDeadProcesses(0);
  EXPECT_FALSE(shmExists(deadOfUnknownNamespace.name()))
      << "the gone process's segment of an unknown namespace, old enough, was kept";
  EXPECT_TRUE(shmExists(deadOfOtherNamespace.name()))
      << "a segment of another pid namespace was swept on a pid that means nothing here";
  EXPECT_TRUE(shmExists(liveName)) << "the segment of a live process was swept";
  for (const std::string& name : foreign) EXPECT_TRUE(shmExists(name)) << name << " is not TIDE's, yet was swept";
  fabric::host::ShmSegment::unlink(liveName);
  for (const std::string& name : foreign) fabric::host::ShmSegment::unlink(name);
}

// End to end: a bootstrap sweeps what killed bootstraps of its own pid
// namespace left at once, names without a namespace once older than
// kStaleSegmentAgeSeconds, and keeps younger ones and another namespace's.
TEST(SharedWorldBootstrap, SweepsSegmentsOfKilledBootstraps) {
  const SweepTestLock lock;
  const uint64_t ownNamespace = fabric::host::currentPidNamespace();
  ASSERT_NE(ownNamespace, 0u);
  const std::string jobId = randomJobId();
  const SegmentOfKilledProcess ofThisNamespace(jobId, 0);
  const SegmentOfKilledProcess oldOfUnknownNamespace(jobId, 1, 0);
  const SegmentOfKilledProcess youngOfUnknownNamespace(jobId, 2, 0);
  const SegmentOfKilledProcess oldOfOtherNamespace(jobId, 3, ownNamespace + 1);
  const auto age = static_cast<time_t>(fabric::host::kStaleSegmentAgeSeconds) + 60;
  const timespec times[2] = {{::time(nullptr) - age, 0}, {::time(nullptr) - age, 0}};
  for (const SegmentOfKilledProcess* old : {&oldOfUnknownNamespace, &oldOfOtherNamespace})
    ASSERT_EQ(::utimensat(AT_FDCWD, ("/dev/shm" + old->name()).c_str(), times, 0), 0) << std::strerror(errno);
  TempDir dir;
  Ranks ranks(1, [&](int rank) {
    FileStore store(dir.path());
    SharedWorld world(plan::Topology::make(1, 1), rank, 4096, store);
    return kExitOk;
  });
  bool hung = false;
  const std::vector<ChildExit> exits = ranks.wait(20.0, &hung);
  EXPECT_FALSE(hung);
  EXPECT_TRUE(exits[0].exited && exits[0].code == kExitOk) << exits[0].code;
  EXPECT_FALSE(shmExists(ofThisNamespace.name())) << ofThisNamespace.name() << " outlived a later bootstrap";
  EXPECT_FALSE(shmExists(oldOfUnknownNamespace.name())) << oldOfUnknownNamespace.name() << " outlived a later bootstrap";
  EXPECT_TRUE(shmExists(youngOfUnknownNamespace.name()))
      << youngOfUnknownNamespace.name() << " was swept before it was old enough";
  EXPECT_TRUE(shmExists(oldOfOtherNamespace.name())) << oldOfOtherNamespace.name() << ", another namespace's, was swept";
}

// The arena is symmetric: a rank that asks for another size is refused by
// its peers with a message, not mapped out of bounds.
TEST(SharedWorldBootstrap, MismatchedArenaSizesAreRefused) {
  TempDir dir;
  const plan::Topology topo = plan::Topology::make(1, 2);
  Ranks ranks(2, [&](int rank) {
    FileStore store(dir.path());
    fabric::host::SharedWorldOptions shm;
    shm.bootstrapTimeoutSeconds = 2.0;
    SharedWorld world(topo, rank, rank == 0 ? 4096 : 8192, store, {}, shm);
    return kExitOk;
  });
  bool hung = false;
  const std::vector<ChildExit> exits = ranks.wait(10.0, &hung);
  EXPECT_FALSE(hung);
  for (const ChildExit& e : exits) EXPECT_TRUE(e.exited && e.code == kExitFabricError) << e.code;
}

// The protocol checker lives in one process; multi-process mode refuses it
// instead of checking one rank and passing silently.
TEST(SharedWorldBootstrap, RefusesTheProtocolChecker) {
  TempDir dir;
  FileStore store(dir.path());
  fabric::host::HostOptions options;
  options.checkProtocol = true;
  EXPECT_THROW(SharedWorld(plan::Topology::make(1, 1), 0, 4096, store, options), FabricError);
}

// So do the two-sided rails' stand-ins (send/recv, RMA), whose state lives in
// one process too: asked for, they are refused, not replaced by one-sided puts.
TEST(SharedWorldBootstrap, RefusesTwoSidedRails) {
  for (fabric::host::HostRails rails : {fabric::host::HostRails::kSendRecv, fabric::host::HostRails::kRma}) {
    TempDir dir;
    FileStore store(dir.path());
    fabric::host::HostOptions options;
    options.rails = rails;
    try {
      SharedWorld(plan::Topology::make(2, 1), 0, 4096, store, options);
      FAIL() << "multi-process mode accepted rails " << fabric::host::hostRailsName(rails);
    } catch (const FabricError& e) {
      EXPECT_EQ(e.kind(), FabricError::Kind::kUsage);
      EXPECT_NE(std::string(e.what()).find(fabric::host::hostRailsName(rails)), std::string::npos) << e.what();
    }
  }
}

// Rank 0's name in the store leads to memory that is not a TIDE segment of
// this layout (another build's, say), filled with bytes that read as a wild
// control-block offset: rank 1 refuses it with a clear error and writes
// nothing into it, rather than recording its failure at that offset.
TEST(SharedWorldBootstrap, ForeignRankZeroSegmentIsRefusedUntouched) {
  TempDir dir;
  const std::string fakeName = "/tidetest-foreign-" + std::to_string(::getpid());
  constexpr size_t kFakeBytes = 1 << 16;
  fabric::host::ShmSegment fake = fabric::host::ShmSegment::create(fakeName, kFakeBytes);
  std::memset(fake.data(), 0x7f, kFakeBytes);
  {
    FileStore store(dir.path());
    store.set("tide/shm/0/job", "0123456789abcdef");
    store.set("tide/shm/0/segment/0", fakeName);
  }
  Ranks ranks(1, [&](int) {
    FileStore store(dir.path());
    fabric::host::SharedWorldOptions shm;
    shm.bootstrapTimeoutSeconds = 2.0;
    try {
      SharedWorld world(plan::Topology::make(1, 2), 1, 4096, store, {}, shm);
    } catch (const FabricError& e) {
      store.set("test/error", e.what());
      throw;
    }
    return kExitOk;
  });
  bool hung = false;
  const std::vector<ChildExit> exits = ranks.wait(10.0, &hung);
  EXPECT_FALSE(hung);
  EXPECT_TRUE(exits[0].exited && exits[0].code == kExitFabricError)
      << "exit code " << exits[0].code << ", signal " << exits[0].signal;
  const std::string error = FileStore(dir.path()).get("test/error", 0.0);
  EXPECT_NE(error.find("not a TIDE segment"), std::string::npos) << error;
  for (size_t i = 0; i < kFakeBytes; ++i)
    ASSERT_EQ(static_cast<unsigned char>(fake.data()[i]), 0x7f) << "byte " << i << " of the foreign segment written";
  fabric::host::ShmSegment::unlink(fakeName);
}

// Options no endpoint takes are refused before the bootstrap, at once: after
// it, the peers would already be waiting on this rank.
TEST(SharedWorldBootstrap, BadOptionsAreRefusedBeforeTheBootstrap) {
  for (const auto& [queues, timeout] : {std::pair{0, 5.0}, std::pair{65, 5.0}, std::pair{4, 0.0}, std::pair{4, 2e6}}) {
    TempDir dir;
    FileStore store(dir.path());
    fabric::host::HostOptions options;
    options.queues = queues;
    options.timeoutSeconds = timeout;
    fabric::host::SharedWorldOptions shm;
    shm.bootstrapTimeoutSeconds = 30.0;
    const auto start = Clock::now();
    try {
      SharedWorld(plan::Topology::make(1, 2), 1, 4096, store, options, shm);
      FAIL() << queues << " queues and a " << timeout << " s deadline were accepted";
    } catch (const FabricError& e) {
      EXPECT_EQ(e.kind(), FabricError::Kind::kUsage) << e.what();
    }
    EXPECT_LT(secondsSince(start), 5.0) << "refused only after waiting for the peers";
    EXPECT_THROW(store.get("tide/shm/0/segment/1", 0.0), FabricError) << "a segment was published first";
  }
}

// ---------------------------------------------------------------- the store

TEST(FileStore, GetTimesOutWithAClearError) {
  TempDir dir;
  FileStore store(dir.path());
  const auto start = Clock::now();
  try {
    store.get("never/set", 0.2);
    FAIL() << "get of a missing key returned";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kTimeout);
    EXPECT_NE(std::string(e.what()).find("never/set"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("timed out"), std::string::npos) << e.what();
  }
  const double waited = secondsSince(start);
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 2.0);
}

TEST(FileStore, BarrierTimeoutSaysWhoArrived) {
  TempDir dir;
  FileStore store(dir.path());
  try {
    fabric::host::storeBarrier(store, "b", 3, 0.1);
    FAIL() << "a barrier of 3 opened for 1";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kTimeout);
    EXPECT_NE(std::string(e.what()).find("1 of 3 arrived"), std::string::npos) << e.what();
  }
}

// A store that fails otherwise than by a timeout: the barrier passes that
// failure on, not a timeout naming who arrived.
TEST(StoreBarrier, AStoreFailureIsNotReportedAsATimeout) {
  struct BrokenStore final : fabric::host::KeyValueStore {
    void set(const std::string&, const std::string&) override {}
    std::string get(const std::string& key, double) override {
      throw FabricError(FabricError::Kind::kPeerFailure, "store connection lost reading " + key);
    }
    int64_t add(const std::string&, int64_t) override { return 1; }
  } store;
  try {
    fabric::host::storeBarrier(store, "b", 3, 5.0);
    FAIL() << "a barrier over a broken store opened";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kPeerFailure) << e.what();
    EXPECT_NE(std::string(e.what()).find("store connection lost"), std::string::npos) << e.what();
  }
}

TEST(FileStore, ValuesAreBytesAndCountersAreDecimal) {
  TempDir dir;
  FileStore store(dir.path());
  const std::string bytes("a\0b/%\xff", 6);
  store.set("k/with spaces/%", bytes);
  EXPECT_EQ(store.get("k/with spaces/%", 1.0), bytes);
  store.set("k/with spaces/%", "second");
  EXPECT_EQ(store.get("k/with spaces/%", 1.0), "second");
  EXPECT_EQ(store.add("n", 5), 5);
  EXPECT_EQ(store.add("n", -2), 3);
  EXPECT_EQ(store.get("n", 1.0), "3");
  EXPECT_THROW(store.add("k/with spaces/%", 1), FabricError);
}

TEST(FileStore, AddIsAtomicAcrossProcesses) {
  TempDir dir;
  constexpr int kProcesses = 4, kAdds = 100;
  Ranks ranks(kProcesses, [&](int) {
    FileStore store(dir.path());
    for (int i = 0; i < kAdds; ++i) store.add("counter", 1);
    return kExitOk;
  });
  bool hung = false;
  for (const ChildExit& e : ranks.wait(20.0, &hung)) EXPECT_TRUE(e.exited && e.code == kExitOk);
  EXPECT_FALSE(hung);
  FileStore store(dir.path());
  EXPECT_EQ(store.add("counter", 0), kProcesses * kAdds);
}

// Ranks in containers of their own share the store directory (and /dev/shm)
// but not a pid namespace, where their pids may well be equal: here both are
// pid 1. Their writes must still not collide on a temporary file name.
TEST(FileStore, WritersOfOtherPidNamespacesWithEqualPidsDoNotCollide) {
  TempDir dir;
  constexpr int kWriters = 2, kSets = 300;
  Ranks writers(kWriters, [&](int writer) {
    if (::unshare(CLONE_NEWPID) != 0) return kExitMismatch + 10;  // no privilege: the test skips
    const pid_t child = ::fork();  // the first process of the new namespace: pid 1 there
    if (child < 0) return kExitOtherError;
    if (child == 0) {
      int code = kExitOk;
      try {
        FileStore store(dir.path());
        store.add("test/ready", 1);
        while (store.add("test/ready", 0) < kWriters) std::this_thread::yield();
        for (int i = 0; i < kSets; ++i) {
          std::string key = "w";  // appended: GCC 12 warns of a bogus overlap (-Wrestrict) in the sum
          key.append(std::to_string(writer)).append("/").append(std::to_string(i));
          store.set(key, "x");
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "writer %d (pid %d in its namespace): %s\n", writer, static_cast<int>(::getpid()),
                     e.what());
        code = kExitFabricError;
      }
      std::fflush(nullptr);
      ::_exit(code);
    }
    int status = 0;
    if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return kExitOtherError;
    return WEXITSTATUS(status);
  });
  bool hung = false;
  const std::vector<ChildExit> exits = writers.wait(60.0, &hung);
  EXPECT_FALSE(hung);
  for (const ChildExit& e : exits)
    if (e.exited && e.code == kExitMismatch + 10) GTEST_SKIP() << "cannot make a pid namespace here";
  for (const ChildExit& e : exits) EXPECT_TRUE(e.exited && e.code == kExitOk) << e.code;
}

TEST(FileStore, AllGatherWordsGivesEveryRanksWordsInRankOrder) {
  TempDir dir;
  constexpr int kRanks = 3;
  constexpr size_t kWords = 2;
  TIDE_TRACED_SEED(seed);
  std::mt19937_64 rng(seed);
  std::vector<std::vector<uint64_t>> mine(kRanks, std::vector<uint64_t>(kWords));
  for (auto& w : mine)
    for (uint64_t& x : w) x = rng();  // full 64-bit words: the text encoding must keep every bit
  mine[1][0] = ~uint64_t{0};
  std::vector<std::vector<uint64_t>> got(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      FileStore store(dir.path());
      // Two gathers under their own keys: the second must not read the first's words.
      fabric::host::storeAllGatherWords(store, "g/0", r, kRanks, {uint64_t{7}, uint64_t{8}}, 10.0);
      got[static_cast<size_t>(r)] = fabric::host::storeAllGatherWords(store, "g/1", r, kRanks,
                                                                       mine[static_cast<size_t>(r)], 10.0);
    });
  for (auto& t : threads) t.join();
  std::vector<uint64_t> expected;
  for (const auto& w : mine) expected.insert(expected.end(), w.begin(), w.end());
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(got[static_cast<size_t>(r)], expected) << "rank " << r;
}

TEST(FileStore, AllGatherWordsNamesTheRanksNeverHeardFrom) {
  TempDir dir;
  FileStore store(dir.path());
  store.set("g/2", "5 ");  // rank 2 came; ranks 1 and 3 never do
  const auto start = Clock::now();
  try {
    fabric::host::storeAllGatherWords(store, "g", 0, 4, {uint64_t{5}}, 0.3);
    FAIL() << "a gather of 4 completed with 2";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kTimeout);
    EXPECT_NE(std::string(e.what()).find("never heard from rank(s) 1, 3"), std::string::npos) << e.what();
  }
  EXPECT_LT(secondsSince(start), 2.0);  // one deadline for the gather, not one per rank
}

TEST(FileStore, AllGatherWordsRefusesAPeerWithOtherWordCounts) {
  TempDir dir;
  FileStore store(dir.path());
  store.set("g/1", "5 ");
  EXPECT_THROW(fabric::host::storeAllGatherWords(store, "g", 0, 2, {uint64_t{5}, uint64_t{6}}, 1.0), FabricError);
  store.set("h/1", "5 6 7 ");
  EXPECT_THROW(fabric::host::storeAllGatherWords(store, "h", 0, 2, {uint64_t{5}, uint64_t{6}}, 1.0), FabricError);
}

}  // namespace
}  // namespace tide
