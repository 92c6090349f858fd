#include "fabric/cuda/nccl_bootstrap.hpp"

#include "fabric/cuda/rma_rails.hpp"  // TIDE_HAVE_NCCL_RMA
// ncclCommQueryProperties and its hostRmaSupport field: NCCL >= 2.29.4.
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE > NCCL_VERSION(2, 29, 3)
#define TIDE_HAVE_NCCL_RMA_QUERY 1
#include <nccl_device.h>
#else
#define TIDE_HAVE_NCCL_RMA_QUERY 0
#endif

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/device_scope.hpp"
#include "fabric/cuda/host_poll.hpp"
#include "fabric/gather_frames.hpp"
#include "fabric/cuda/nccl_runtime.hpp"
#include "fabric/fnv1a.hpp"
#include "fabric/multicast_policy.hpp"
#include "fabric/small_file.hpp"

namespace tide::fabric::cuda {

namespace {

// Whether `comm` is still busy with its last call; throws its asynchronous error.
bool commInProgress(ncclComm_t comm, const std::string& what) {
  ncclResult_t async = ncclSuccess;
  TIDE_NCCL_CHECK(ncclCommGetAsyncError(comm, &async));
  if (async == ncclInProgress) return true;
  if (async != ncclSuccess)
    throw FabricError(kDeviceErrorKind, "cuda fabric: " + what + ": NCCL reports " + ncclGetErrorString(async) +
                                            " (" + ncclGetLastError(comm) + ")");
  return false;
}

const char* const kDeadlineHint = " (a peer gone, stuck or never started; TIDE_FABRIC_WAIT_TIMEOUT_S sets the deadline)";

}  // namespace

// A nonblocking communicator returns ncclInProgress from finalization until
// its work is done; a peer gone after the last check makes it run past the
// deadline, and then only an abort releases it.
void finalizeOrAbort(ncclComm_t comm, double deadlineSeconds) noexcept {
  bool finalized = false;
  const ncclResult_t issued = ncclCommFinalize(comm);
  if (issued == ncclSuccess) {
    finalized = true;
  } else if (issued == ncclInProgress) {
    try {
      awaitCommReady(comm, deadlineSeconds, "finalizing a communicator");
      finalized = true;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[tide] %s; aborting it\n", e.what());
    }
  }
  if (finalized) {
    ncclCommDestroy(comm);
  } else {
    ncclCommAbort(comm);
  }
}

void requireMulticastOff() {
  const std::string why = multicastRefusalFromEnv();
  if (!why.empty()) throw FabricError(FabricError::Kind::kUsage, "cuda fabric: " + why);
}

void awaitCommReady(ncclComm_t comm, double deadlineSeconds, const std::string& what) {
  pollUntilDone([&] { return commInProgress(comm, what) ? cudaErrorNotReady : cudaSuccess; }, deadlineSeconds,
                std::chrono::microseconds(200),
                [&] { return "cuda fabric: " + what + " did not complete"; }, kDeadlineHint);
}

void awaitNcclStream(cudaStream_t stream, std::initializer_list<ncclComm_t> comms, double deadlineSeconds,
                     const std::string& what) {
  pollUntilDone(
      [&] {
        // A collective still being enqueued is not on the stream yet: the stream may look drained without it.
        for (ncclComm_t c : comms)
          if (c != nullptr && commInProgress(c, what)) return cudaErrorNotReady;
        return cudaStreamQuery(stream);
      },
      deadlineSeconds, std::chrono::microseconds(200),
      [&] { return "cuda fabric: " + what + " did not complete"; }, kDeadlineHint);
}

uint64_t hostIdentity() {
  if (const char* id = std::getenv("NCCL_HOSTID")) return fnv1a(id);
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  const std::string boot = fabric::firstWordOfFile("/proc/sys/kernel/random/boot_id").value_or("");
  return fnv1a(std::string(host) + "|" + boot);
}

NcclComms::NcclComms(const ncclUniqueId& id, const plan::Topology& topo, int rank, int device,
                     double deadlineSeconds)
    : rank_(rank), ranks_(topo.ranks()), device_(device), deadlineSeconds_(deadlineSeconds) {
  topo.checkRank(rank);
  idDigest_ = fnv1a(std::string_view(id.internal, sizeof id.internal));
  requireMulticastOff();
  try {
    TIDE_CUDA_CHECK(cudaSetDevice(device_));
    TIDE_NCCL_CHECK(ncclGetVersion(&ncclVersion_));
    TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    // Allocated once, here, large enough for gatherWords: a cudaFree later, with
    // the collectives' stream waits in flight, would wait for the whole device,
    // and they for this rank.
    scratchWords_ = (static_cast<size_t>(ranks_) + 1) * kGatherFrameWords;
    TIDE_CUDA_CHECK(cudaMalloc(&scratch_, scratchWords_ * sizeof(uint64_t)));

    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    // Nonblocking: every call on it returns at once and is awaited under the
    // deadline (awaitWorld). NCCL_COMM_BLOCKING=1 in the environment
    // overrides this, and then NCCL's own calls block without one: said once.
    config.blocking = 0;
    if (const char* b = std::getenv("NCCL_COMM_BLOCKING"); b != nullptr && std::strcmp(b, "1") == 0) {
      static const bool said = [] {
        std::fprintf(stderr, "[tide] cuda fabric: NCCL_COMM_BLOCKING=1 makes the world communicator blocking: "
                             "its creation, splits and window registration wait without TIDE's deadline\n");
        return true;
      }();
      (void)said;
    }
    // The world communicator carries only the bootstrap all-gather, barriers
    // and (on one host) the symmetric window's registration, a few bytes each: one channel
    // is plenty, and every further channel holds its own staging buffers in
    // device memory outside the arena (the end-to-end run measured ~0.9 GiB
    // outside torch's allocator beyond the arena with NCCL's defaults).
    config.minCTAs = 1;
    config.maxCTAs = 1;
    TIDE_NCCL_ISSUE(ncclCommInitRankConfig(&world_, ranks_, id, rank_, &config));
    awaitWorld("rank " + std::to_string(rank_) + ": creating the world communicator of " + std::to_string(ranks_) +
               " ranks (every rank joins it with the same unique id)");
    refuseMulticastComm(world_, "world");
    lsa_ = discoverLsaTeam(world_, rank_, ranks_, scratch_, scratchWords_, stream_, deadlineSeconds_);
    if (lsa_.size < ranks_) splitHost();
  } catch (...) {
    broken_ = true;  // a bootstrap collective may be outstanding
    release();
    throw;
  }
}

NcclComms::~NcclComms() { release(); }

void NcclComms::splitHost() {
  // Collective over the world communicator. Color: the first world rank of
  // this rank's LSA team (a rank alone when its host's ranks are not
  // contiguous); NCCL then sees one LSA team on the child.
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // its window registration and finalization are awaited under the deadline
  config.minCTAs = 1;   // it carries no collective: one channel's buffers (see the world's)
  config.maxCTAs = 1;
  const std::string what = "rank " + std::to_string(rank_) + ": splitting the host communicator of " +
                           std::to_string(lsa_.size) + " rank(s) (every rank joins the split)";
  TIDE_NCCL_ISSUE(ncclCommSplit(world_, lsa_.first, rank_, &host_, &config));
  awaitWorld(what);
  awaitComm(host_, what);
  refuseMulticastComm(host_, "host");  // one host may allow what the world across hosts did not
}

namespace {

// ncclCommProperties_t's first fields, laid out alike in every NCCL since
// 2.28, in room for whatever the loaded library writes after them: the
// struct is declared for host compilers only from NCCL 2.29's headers, and
// the library fills it by the version it is given (here its own).
struct CommPropertiesPrefix {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;
  bool deviceApiSupport;
  bool multimemSupport;
  alignas(8) unsigned char rest[1024];
};
static_assert(offsetof(CommPropertiesPrefix, multimemSupport) == 33, "ncclCommProperties_t's layout");
constexpr unsigned int kNcclApiMagic = 0xcafebeef;  // NCCL_API_MAGIC

}  // namespace

void NcclComms::refuseMulticastComm(ncclComm_t comm, const char* which) const {
  // requireMulticastOff saw today's environment; NCCL read NCCL_NVLS_ENABLE
  // at the process's first communicator. The communicator says what NCCL
  // actually decided, asked before any collective runs on it and before the
  // window is registered (with multicast, NCCL binds the arena to a multicast
  // object). Each rank refuses on its own answer, without a collective: one
  // on a multicast-capable communicator is what must not run.
  using Query = ncclResult_t (*)(ncclComm_t, CommPropertiesPrefix*);
  const auto query = reinterpret_cast<Query>(loadedNcclSymbol("ncclCommQueryProperties"));
  CommPropertiesPrefix props{};
  props.size = sizeof props;
  props.magic = kNcclApiMagic;
  props.version = static_cast<unsigned int>(ncclVersion_);
  const ncclResult_t r = query != nullptr ? query(comm, &props) : ncclInvalidUsage;
  if (r != ncclSuccess) {
    static std::once_flag said;  // once per process: every communicator of it would say the same
    std::call_once(said, [&] {
      std::fprintf(stderr,
                   "[tide] cuda fabric: rank %d: NCCL %s cannot say whether a communicator may use NVLink multicast "
                   "(%s): it is ruled out by NCCL_NVLS_ENABLE=0 alone\n",
                   rank_, ncclVersionString(ncclVersion_).c_str(),
                   query != nullptr ? ncclGetErrorString(r) : "no ncclCommQueryProperties before NCCL 2.29");
    });
    return;
  }
  const std::string why = multicastRefusalForComm(props.multimemSupport, std::getenv("TIDE_ENABLE_MULTICAST"));
  if (!why.empty())
    throw FabricError(FabricError::Kind::kUsage,
                      "cuda fabric: rank " + std::to_string(rank_) + ", " + which + " communicator: " + why);
}

void NcclComms::awaitComm(ncclComm_t comm, const std::string& what) {
  try {
    awaitCommReady(comm, deadlineSeconds_, what);
  } catch (...) {
    broken_ = true;
    throw;
  }
}

void NcclComms::splitRails(const plan::Topology& topo, bool join, bool rma, bool creditSplit) {
  if (rail_ != nullptr) throw std::logic_error("NcclComms::splitRails called twice");
  // Rail l joins local rank l of every node, ordered by node. NCCL's default
  // channel count: these communicators carry the rails' bulk data. A rank
  // whose rails are copy engines stays out (NCCL_SPLIT_NOCOLOR): NCCL gives
  // every channel of a communicator its own device buffers, each rounded up
  // to the 2 MiB cuMem granularity, and a default split measured 64 channels
  // and ~0.4 GiB of device memory on an H200 with no byte ever sent over it.
  // Blocking (see the class comment); the split itself runs as the world
  // communicator's nonblocking work, under the deadline.
  ncclConfig_t railConfig = NCCL_CONFIG_INITIALIZER;
  railConfig.blocking = 1;
  const int color = join ? topo.localOf(rank_) : NCCL_SPLIT_NOCOLOR;
#if TIDE_HAVE_NCCL_RMA
  if (rma) {
    railConfig.numRmaCtx = 1;  // host RMA needs one context (ctx 0)
    // Host RMA moves data with copy engines or NCCL's proxy, never with the
    // communicator's channels: one channel keeps their device buffers small.
    railConfig.minCTAs = 1;
    railConfig.maxCTAs = 1;
  }
#else
  if (rma) throw std::logic_error("RMA rails need NCCL >= 2.29 headers");
#endif
  const std::string who = "rank " + std::to_string(rank_) + ": ";
  TIDE_NCCL_ISSUE(ncclCommSplit(world_, color, topo.nodeOf(rank_), &rail_, &railConfig));
  awaitWorld(who + "splitting the rail communicator (every rank joins the split)");
  // RMA rails count signals per (communicator, peer): credits go on a
  // communicator of their own so that they never count as data arrivals.
  if (rma && !creditSplit) throw std::logic_error("RMA rails need the credit split");
  if (creditSplit) {
    TIDE_NCCL_ISSUE(ncclCommSplit(world_, rma ? color : NCCL_SPLIT_NOCOLOR, topo.nodeOf(rank_), &railCredit_,
                                  &railConfig));
    awaitWorld(who + "splitting the rail credit communicator (every rank joins the split)");
  }
  // The world and host communicators were asked already, and a rail holds no
  // GPU they lack; asked all the same, before the RMA window is registered on it.
  if (rail_ != nullptr) refuseMulticastComm(rail_, "rail");
  if (railCredit_ != nullptr) refuseMulticastComm(railCredit_, "rail credit");
}

std::string NcclComms::railRmaUnsupported() {
  std::string why;
#if TIDE_HAVE_NCCL_RMA_QUERY
  if (rail_ != nullptr) {
    // ncclCommQueryProperties reports hostRmaSupport from NCCL 2.29.4 on;
    // looked up at run time like the RMA calls (older 2.29 libraries lack the field).
    using Query = ncclResult_t (*)(ncclComm_t, ncclCommProperties_t*);
    const auto query = reinterpret_cast<Query>(NcclRmaApi::get().queryProperties);
    if (query != nullptr && ncclVersion_ > NCCL_VERSION(2, 29, 3)) {
      ncclCommProperties_t props = NCCL_COMM_PROPERTIES_INITIALIZER;
      const ncclResult_t r = query(rail_, &props);
      if (r != ncclSuccess)
        why = std::string("ncclCommQueryProperties failed: ") + ncclGetErrorString(r);
      else if (!props.hostRmaSupport)
        why = "NCCL reports no host RMA support on the rail communicator (it needs symmetric memory, and "
              "across hosts an RMA proxy: NCCL_GIN_TYPE)";
    }
  }
#endif
  const int refusing = sumOverWorld(why.empty() ? 0 : 1);
  if (refusing > 0 && why.empty())
    why = std::to_string(refusing) + " other rank(s) have no host RMA on their rail communicator";
  return why;
}

void NcclComms::resplitRailsForSendRecv(const plan::Topology& topo, bool join) {
  for (ncclComm_t* c : {&railCredit_, &rail_}) {
    if (*c == nullptr) continue;
    finalizeOrAbort(*c, deadlineSeconds_);
    *c = nullptr;
  }
  splitRails(topo, join, /*rma=*/false, /*creditSplit=*/false);
}

std::string NcclComms::asyncError() const {
  const std::pair<ncclComm_t, const char*> comms[] = {
      {rail_, "rail"}, {railCredit_, "rail credit"}, {host_, "host"}, {world_, "world"}};
  for (const auto& [comm, name] : comms) {
    ncclResult_t state = ncclSuccess;
    if (comm == nullptr || ncclCommGetAsyncError(comm, &state) != ncclSuccess) continue;
    if (state == ncclSuccess || state == ncclInProgress) continue;
    std::string why = std::string("NCCL reports '") + ncclGetErrorString(state) + "' on the " + name + " communicator";
    if (const char* last = ncclGetLastError(comm); last != nullptr && *last != '\0') why += std::string(": ") + last;
    return why;
  }
  return "";
}

void NcclComms::requireSameOnEveryRank(int value, const std::string& what, const std::string& mine) {
  const int64_t sum = sumOverWorld(value);
  const int64_t squares = sumOverWorld(value * value);
  if (int64_t{ranks_} * squares == sum * sum) return;
  throw FabricError(FabricError::Kind::kUsage, "cuda fabric: rank " + std::to_string(rank_) + ": the ranks differ in " +
                                                   what + " (this rank: " + mine + "); every rank must agree");
}

int NcclComms::sumOverWorld(int value) {
  TIDE_CUDA_CHECK(cudaSetDevice(device_));
  int* dev = reinterpret_cast<int*>(scratch_);
  TIDE_CUDA_CHECK(cudaMemcpyAsync(dev, &value, sizeof(int), cudaMemcpyHostToDevice, stream_));
  TIDE_NCCL_ISSUE(ncclAllReduce(dev, dev, 1, ncclInt32, ncclSum, world_, stream_));
  const std::string what = "rank " + std::to_string(rank_) + ": a sum over the world communicator";
  awaitWorld(what);  // the all-reduce is on the stream before the copy behind it
  awaitStream(what);  // drained under the deadline first: the copy into pageable memory below blocks until it runs
  int sum = 0;
  TIDE_CUDA_CHECK(cudaMemcpyAsync(&sum, dev, sizeof(int), cudaMemcpyDeviceToHost, stream_));
  awaitStream(what);
  return sum;
}

void NcclComms::awaitStream(const std::string& what) {
  try {
    awaitNcclStream(stream_, {world_, rail_, railCredit_}, deadlineSeconds_, what);
  } catch (...) {
    broken_ = true;
    throw;
  }
}

void NcclComms::awaitWorld(const std::string& what) { awaitComm(world_, what); }

void NcclComms::abortIfBroken() noexcept {
  if (!broken_) return;
  cudaSetDevice(device_);
  // Grouped: NCCL sets every communicator's abort flag, then cleans them up (a cleanup
  // frees memory, which would wait for a kernel still spinning on another's flag).
  ncclGroupStart();
  for (ncclComm_t* c : {&railCredit_, &rail_, &host_, &world_})
    if (*c != nullptr) ncclCommAbort(*c);
  ncclGroupEnd();
  railCredit_ = rail_ = host_ = world_ = nullptr;
}

void NcclComms::release() noexcept {
  cudaSetDevice(device_);
  abortIfBroken();  // Finalize would wait for work a gone peer never joins
  for (ncclComm_t* c : {&railCredit_, &rail_, &host_, &world_}) {
    if (*c == nullptr) continue;
    finalizeOrAbort(*c, deadlineSeconds_);
    *c = nullptr;
  }
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  scratch_ = nullptr;
  stream_ = nullptr;
}

std::vector<uint64_t> allGatherWords(ncclComm_t comm, int ranks, const std::vector<uint64_t>& mine, uint64_t* dev,
                                     size_t devWords, cudaStream_t stream, double deadlineSeconds,
                                     const std::string& what) {
  // One frame of the same size from every rank, whatever it gathers (gather_frames.hpp).
  const std::vector<uint64_t> frame = gatherFrame(mine, "cuda fabric: " + what);
  const size_t n = frame.size();
  std::vector<uint64_t> frames(static_cast<size_t>(ranks) * n);
  if (frames.size() + n > devWords)
    throw FabricError(FabricError::Kind::kUsage, "cuda fabric: " + what + ": the gather buffer holds " +
                                                     std::to_string(devWords) + " words, too few for " +
                                                     std::to_string(ranks) + " ranks' frames");
  TIDE_CUDA_CHECK(cudaMemcpyAsync(dev, frame.data(), n * sizeof(uint64_t), cudaMemcpyHostToDevice, stream));
  TIDE_NCCL_ISSUE(ncclAllGather(dev, dev + n, n, ncclUint64, comm, stream));
  awaitCommReady(comm, deadlineSeconds, what);  // the all-gather is on the stream before the copy behind it
  // Drained under the deadline before the copy back: a copy into pageable
  // memory returns only once it has run, so behind a gather that a peer never
  // joins it would block without one.
  awaitNcclStream(stream, {comm}, deadlineSeconds, what);
  TIDE_CUDA_CHECK(
      cudaMemcpyAsync(frames.data(), dev + n, frames.size() * sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
  awaitNcclStream(stream, {comm}, deadlineSeconds, what);
  return wordsOfGatheredFrames(frames, ranks, mine.size(), "cuda fabric: " + what);
}

LsaTeam discoverLsaTeam(ncclComm_t comm, int rank, int ranks, uint64_t* dev, size_t devWords, cudaStream_t stream,
                        double deadlineSeconds) {
  // NCCL 2.28 maps a window across this team, and across none when the
  // host's ranks are not contiguous.
  const uint64_t mine = hostIdentity();
  const std::vector<uint64_t> all =
      allGatherWords(comm, ranks, {mine}, dev, devWords, stream, deadlineSeconds,
                     "rank " + std::to_string(rank) + ": the host-identity all-gather");

  int count = 0;
  int first = -1;
  int last = -1;
  for (int r = 0; r < ranks; ++r) {
    if (all[static_cast<size_t>(r)] != mine) continue;
    ++count;
    if (first < 0) first = r;
    last = r;
  }
  return last - first + 1 == count ? LsaTeam{first, count} : LsaTeam{rank, 1};
}

std::vector<uint64_t> NcclComms::gatherWords(const std::vector<uint64_t>& mine, const std::string& what) {
  const DeviceScope onDevice(device_);  // called inside a collective: the caller's device stays as it was
  try {
    return allGatherWords(world_, ranks_, mine, scratch_, scratchWords_, stream_, deadlineSeconds_,
                          "rank " + std::to_string(rank_) + ": " + what);
  } catch (...) {
    broken_ = true;  // the all-gather may be outstanding
    throw;
  }
}

void NcclComms::barrier() {
  TIDE_CUDA_CHECK(cudaSetDevice(device_));
  TIDE_NCCL_ISSUE(ncclAllReduce(scratch_, scratch_, 1, ncclInt32, ncclSum, world_, stream_));
  awaitStream("rank " + std::to_string(rank_) + ": a barrier over the world communicator");
}

}  // namespace tide::fabric::cuda
