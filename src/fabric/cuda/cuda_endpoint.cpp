#include "fabric/cuda/cuda_endpoint.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "fabric/cuda/copy_engine.hpp"
#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/host_poll.hpp"
#include "fabric/cuda/host_profile.hpp"
#include "fabric/cuda/kernels/delay_kernel.hpp"
#include "fabric/cuda/kernels/reduce_kernels.hpp"
#include "fabric/cuda/nccl_runtime.hpp"
#include "fabric/cuda/stream_memops.hpp"
#include "fabric/cuda/symmetric_arena.hpp"
#include "fabric/arena_size_agreement.hpp"
#include "fabric/device_quiescence.hpp"
#include "fabric/hardware_queues.hpp"
#include "fabric/host_deadline.hpp"
#include "fabric/reduce_op_rules.hpp"

namespace tide::fabric::cuda {

namespace {

constexpr size_t kEventRing = Endpoint::kEventWindow;

// Streams of every live TIDE endpoint in this process: they share its
// hardware queues with each other and with the callers' (hardware_queues.hpp).
std::atomic<int> liveTideStreams{0};
std::atomic<bool> warnedHardwareQueues{false};

void countStreams(int streams) {
  const int live = liveTideStreams.fetch_add(streams) + streams;
  const std::string warning = hardwareQueueWarningFromEnv(live);
  if (!warning.empty() && !warnedHardwareQueues.exchange(true))
    std::fprintf(stderr, "[tide] cuda fabric: warning: %s\n", warning.c_str());
}

double envSeconds(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  const double s = std::strtod(v, &end);
  // As the C API's timeouts: positive and at most 1e6 s, so a deadline stays finite. Anything else
  // (inf, nan, "10s", "ten") keeps the fallback, and says so: a fallback is never silent. Not refused:
  // one rank failing here would leave its peers waiting in the bootstrap until their deadline.
  if (end != v && *end == '\0' && s > 0 && s <= 1e6) return s;
  static std::atomic<bool> warned{false};  // once per process, not at every read
  if (!warned.exchange(true))
    std::fprintf(stderr, "[tide] cuda fabric: warning: %s='%s' is not a number of seconds in (0, 1e6]; the wait "
               "deadline stays %g s\n", name, v, fallback);
  return fallback;
}

// The wait deadline of in-stream waits (the watchdog's).
double waitSecondsOf(const CudaFabricOptions& options) {
  return envSeconds("TIDE_FABRIC_WAIT_TIMEOUT_S", options.waitTimeoutSeconds);
}

// TIDE_FABRIC_RAILS's values.
constexpr std::pair<const char*, CudaFabricOptions::Rails> kRailsNames[] = {
    {"auto", CudaFabricOptions::Rails::kAuto},
    {"copy-engine", CudaFabricOptions::Rails::kCopyEngine},
    {"send-recv", CudaFabricOptions::Rails::kSendRecv},
    {"rma", CudaFabricOptions::Rails::kRma},
};

const char* railsName(CudaFabricOptions::Rails rails) {
  for (const auto& [name, value] : kRailsNames)
    if (value == rails) return name;
  return "?";
}

CudaFabricOptions::Rails railsFromEnv(CudaFabricOptions::Rails fallback) {
  const char* v = std::getenv("TIDE_FABRIC_RAILS");
  if (v == nullptr || *v == '\0') return fallback;
  for (const auto& [name, value] : kRailsNames)
    if (std::strcmp(v, name) == 0) return value;
  throwUsage(std::string("TIDE_FABRIC_RAILS=") + v + " (want auto, copy-engine, send-recv or rma)");
}

int currentDevice() {
  int d = 0;
  TIDE_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

}  // namespace

CudaEndpoint::CudaEndpoint(const CudaFabricOptions& options, const ncclUniqueId& id)
    : topo_(plan::Topology::make(options.topology.nodes, options.topology.gpusPerNode)),
      rank_(options.rank),
      sumCtas_(options.sumCtas),
      landCtas_(options.landCtas) {
  checkOptions(options);
  device_ = options.device >= 0 ? options.device : currentDevice();
  const DeviceScope onDevice(device_);
  try {
    startOverNccl(options, id);
  } catch (...) {
    // The destructor does not run for a constructor that throws: streams, pinned memory
    // and events made so far go here. Peers may be inside a collective this rank will never
    // join, so its communicators are aborted, never finalized.
    DeviceQuiescence::withdraw(this);
    if (comms_ != nullptr) comms_->markBroken();
    releaseResources();
    throw;
  }
}

void CudaEndpoint::startOverNccl(const CudaFabricOptions& options, const ncclUniqueId& id) {
  comms_ = std::make_unique<NcclComms>(id, topo_, rank_, device_, hostDeadlineSeconds(waitSecondsOf(options)));
  TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&control_, cudaStreamNonBlocking));
  requireSameArenaSize(options.arenaBytes);  // before the window's registration, a collective over the sizes
  arena_ = std::make_unique<SymmetricArena>(*comms_, options.arenaBytes, options.numCounters, control_);
  startQueues(options.numQueues);

  // Copy-engine rails need every same-rail rank load/store reachable.
  bool railPeersReachable = true;
  for (int n = 0; n < topo_.nodes; ++n)
    railPeersReachable &= arena_->peerBase(topo_.rankOf(n, topo_.localOf(rank_))) != nullptr;
  using Rails = CudaFabricOptions::Rails;
  const Rails wanted = railsFromEnv(options.rails);
  // Host RMA needs NCCL >= 2.29 at build time (the API) and at run time (the
  // library loaded, which PyTorch may have brought).
  const int loaded = comms_->ncclVersion();
  std::string noRma;
  if (!NcclRmaApi::get().ok())
    noRma = NcclRmaApi::get().missing;
  else if (loaded < NCCL_VERSION(2, 29, 0))
    noRma = "NCCL library " + ncclVersionString(loaded) + " is older than 2.29";
  else if (const char* b = std::getenv("NCCL_COMM_BLOCKING"); b != nullptr && std::strcmp(b, "0") == 0)
    // It makes every communicator nonblocking: the RMA rails' puts, signals and waits on the
    // data path would return before they are enqueued.
    noRma = "NCCL_COMM_BLOCKING=0 makes the rail communicators nonblocking";
  if (wanted == Rails::kSendRecv) {
    railMode_ = RailMode::kSendRecv;
    railWhy_ = "requested";
  } else if (wanted == Rails::kRma || (wanted == Rails::kAuto && !railPeersReachable)) {
    railMode_ = noRma.empty() ? RailMode::kRma : RailMode::kSendRecv;
    railWhy_ = noRma.empty() ? (wanted == Rails::kRma ? "requested" : "a rail peer is not load/store reachable")
                             : "host RMA unavailable: " + noRma;
  } else {
    railMode_ = RailMode::kCopyEngine;
    railWhy_ = "every rail peer is load/store reachable";
  }
  // Every rank takes part in the splits (collectives) before any refuses. The
  // credit split happens wherever RMA rails could be chosen (the same on
  // every rank: build, library and request), joined only by ranks that chose them.
  const bool rmaPossible = noRma.empty() && (wanted == Rails::kAuto || wanted == Rails::kRma);
  // They decide which splits each rank joins: ranks that disagree (a host with
  // another TIDE_FABRIC_RAILS or NCCL) are refused together, not left in a
  // split that times out blaming the wrong cause.
  comms_->requireSameOnEveryRank(static_cast<int>(wanted) * 2 + (rmaPossible ? 1 : 0),
                                 "the rails asked for (TIDE_FABRIC_RAILS) or whether host RMA is possible (the NCCL "
                                 "library loaded, NCCL_COMM_BLOCKING)",
                                 std::string("rails ") + railsName(wanted) + ", host RMA " +
                                     (rmaPossible      ? std::string("possible")
                                      : noRma.empty() ? std::string("not considered")
                                                      : "impossible: " + noRma));
  comms_->splitRails(topo_, railMode_ != RailMode::kCopyEngine, railMode_ == RailMode::kRma, rmaPossible);
  if (rmaPossible) {
    // NCCL may still decline host RMA on the communicator (no symmetric
    // memory; across hosts, no RMA proxy): every rank hears it, and the rails
    // fall back to send/recv together, saying why (or refuse where RMA was asked for).
    const std::string unsupported = comms_->railRmaUnsupported();
    if (!unsupported.empty()) {
      if (noRma.empty()) noRma = unsupported;
      if (railMode_ == RailMode::kRma) {
        railMode_ = RailMode::kSendRecv;
        railWhy_ = "host RMA unavailable: " + unsupported;
      }
      comms_->resplitRailsForSendRecv(topo_, railMode_ == RailMode::kSendRecv);
    }
  }
  // This rank's refusal, if any. A node's ranks stage, sum and land through
  // each other's arenas: they must be load/store reachable. Refused here, not
  // at the first call's first signal.
  std::string refusal;
  if (wanted == Rails::kCopyEngine && !railPeersReachable)
    refusal = "copy-engine rails requested but a rail peer is not load/store reachable";
  for (int i = 0; i < topo_.gpusPerNode && refusal.empty(); ++i) {
    const int peer = topo_.rankOf(topo_.nodeOf(rank_), i);
    if (arena_->peerBase(peer) == nullptr)
      refusal = "topology " + std::to_string(topo_.nodes) + " x " + std::to_string(topo_.gpusPerNode) +
                " puts ranks " + std::to_string(rank_) + " and " + std::to_string(peer) +
                " on one node, but rank " + std::to_string(peer) +
                " is not load/store reachable from here (NCCL places it on another host): a node's ranks "
                "must share a host; give the hosts' layout (nodes, GPUs per node) as the topology";
  }
  if (refusal.empty() && wanted == Rails::kRma && !noRma.empty()) refusal = "RMA rails requested but " + noRma;
  // Agreed before the RMA rails register their window on the (blocking) rail
  // communicator, a collective: ranks whose node is whole would otherwise
  // wait there for peers that refused, with no deadline over it.
  const int refusing = comms_->sumOverWorld(refusal.empty() ? 0 : 1);
  if (!refusal.empty()) throwUsage(refusal);
  if (refusing > 0)
    throwUsage(std::to_string(refusing) + " other rank(s) refused this fabric (their error says why: e.g. a node " +
               "whose ranks do not share a host); every rank stops with them");
  if (railMode_ == RailMode::kSendRecv)
    sendRecv_ = std::make_unique<SendRecvRails>(comms_->rail(), comms_->deadlineSeconds(), rank_);
#if TIDE_HAVE_NCCL_RMA
  if (railMode_ == RailMode::kRma) rma_ = std::make_unique<RmaRails>(comms_->rail(), comms_->railCredit(), *arena_, comms_->deadlineSeconds(), rank_);
#endif

  startWatchdog(options);
}

CudaEndpoint::CudaEndpoint(const CudaFabricOptions& options, LocalGroup& group)
    : topo_(plan::Topology::make(options.topology.nodes, options.topology.gpusPerNode)),
      rank_(options.rank),
      sumCtas_(options.sumCtas),
      landCtas_(options.landCtas) {
  checkOptions(options);
  if (group.ranks() != topo_.ranks())
    throwUsage(group.description() + ": a group of " + std::to_string(group.ranks()) + " ranks for a topology of " +
               std::to_string(topo_.ranks()));
  using Rails = CudaFabricOptions::Rails;
  const Rails wanted = railsFromEnv(options.rails);
  if (wanted == Rails::kSendRecv || wanted == Rails::kRma)
    throwUsage(group.description() + ": rails are copy-engine copies only (send-recv or rma requested)");
  device_ = group.device();
  group_ = &group;
  const DeviceScope onDevice(device_);
  try {
    control_ = group.sharedControlStream();
    ownsControl_ = control_ == nullptr;
    if (ownsControl_) TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&control_, cudaStreamNonBlocking));
    requireSameArenaSize(options.arenaBytes);
    arena_ = group.makeArena(rank_, options.arenaBytes, options.numCounters, control_);
    startQueues(options.numQueues);
    railMode_ = RailMode::kCopyEngine;
    railWhy_ = group.description();
    startWatchdog(options);
  } catch (...) {
    DeviceQuiescence::withdraw(this);
    releaseResources();  // as in the NCCL constructor
    throw;
  }
}

void CudaEndpoint::requireSameArenaSize(int64_t bytes) {
  const std::string differ =
      arenaSizeDisagreement("cuda fabric: rank " + std::to_string(rank_),
                            gatherWords({static_cast<uint64_t>(bytes)}, "comparing the ranks' arena sizes"));
  if (!differ.empty()) throwUsage(differ);
}

void CudaEndpoint::checkOptions(const CudaFabricOptions& options) const {
  topo_.checkRank(rank_);
  if (options.numQueues < 1) throwUsage("numQueues must be at least 1");
}

void CudaEndpoint::startQueues(int numQueues) {
  kernels::preloadKernels();  // before any stream can block on a counter (reduce_kernels.hpp)
  // This rank's arena and every reachable peer's: they live as long as the endpoint.
  std::vector<CopyEngine::Window> windows{{arena_->base(), arena_->userBytes()}};
  for (int r = 0; r < topo_.ranks(); ++r)
    if (r != rank_ && arena_->peerBase(r) != nullptr) windows.push_back({arena_->peerBase(r), arena_->userBytes()});
  copies_ = std::make_unique<CopyEngine>(device_, std::move(windows), control_);
  for (int q = 0; q < numQueues; ++q) {
    cudaStream_t s = nullptr;
    TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    own_.push_back(s);
  }
  streams_ = own_;
  countedStreams_ = static_cast<int>(own_.size()) + (ownsControl_ ? 1 : 0) + (comms_ != nullptr ? 1 : 0);
  countStreams(countedStreams_);
  events_.resize(kEventRing);
  TIDE_CUDA_CHECK(cudaMallocHost(&hostWord_, sizeof(uint64_t)));
  TIDE_CUDA_CHECK(cudaEventCreateWithFlags(&callerFence_, cudaEventDisableTiming));
}

void CudaEndpoint::startWatchdog(const CudaFabricOptions& options) {
  watchdog_ = std::make_unique<WaitWatchdog>(
      rank_, device_, waitSecondsOf(options));
  // A failed NCCL transfer leaves its kernel spinning and the waits behind it
  // unmet: the watchdog stops the process with NCCL's own error instead.
  if (comms_ != nullptr) watchdog_->setErrorProbe([comms = comms_.get()] { return comms->asyncError(); });
  DeviceQuiescence::enroll(device_, this, [this] { return drainsByItself(); });
  reportChoiceOnce();
}

bool CudaEndpoint::drainsByItself() const {
  // A watched wait may be on the caller's stream too; every other wait is on a queue it owns.
  if (!watchdog_->allPassed()) return false;
  for (cudaStream_t s : own_)
    if (cudaStreamQuery(s) != cudaSuccess) return false;
  return sendRecv_ == nullptr || !sendRecv_->pending();
}

void CudaEndpoint::setCallContext(const std::string& call) {
  const DeviceScope onDevice(device_);  // the rails' flush and graph builds
  {
    const auto gate = gateShared();
    flushRailGroup();
  }
  call_ = call;
  // Copy graphs wanted since the last call are built here, at the start of a
  // call and only where nothing of TIDE's on this device waits (fabric/device_quiescence.hpp).
  if (copies_->hasWanted()) DeviceQuiescence::runIfQuiescent(device_, [this] { copies_->buildWanted(); });
}

std::shared_lock<std::shared_mutex> CudaEndpoint::gateShared() const {
  return std::shared_lock<std::shared_mutex>(DeviceQuiescence::gate(device_));
}

CudaEndpoint::~CudaEndpoint() {
  const DeviceScope onDevice(device_);  // NCCL's teardown, frees and destroys
  profile_.report(rank_);
  if (profile_.enabled()) {
    const CopyEngine::GraphStats g = copies_->graphStats();
    std::fprintf(stderr,
                 "[tide host profile] rank %d: copy lists as cached-graph launches %lld, graphs built %lld, "
                 "dropped %lld\n",
                 rank_, static_cast<long long>(g.launches), static_cast<long long>(g.built),
                 static_cast<long long>(g.dropped));
  }
  bool drained = false;
  try {
    synchronizeAll();
    drained = true;
    barrier();  // no peer still writes into an arena about to be unmapped
  } catch (const std::exception& e) {
    std::fprintf(stderr, "[tide cuda fabric] rank %d: teardown: %s\n", rank_, e.what());
    // Work may be outstanding that never completes: abort, never finalize.
    if (comms_ != nullptr) comms_->markBroken();
    // Ranks without NCCL have no abort that stops their peers' copies into
    // this arena: it stays allocated (leaked) rather than freed under them.
    if (comms_ == nullptr) {
      keepArenaAllocated_ = true;
      std::fprintf(stderr, "[tide cuda fabric] rank %d: teardown: the arena stays allocated until the process "
                           "exits (peers may still write into it)\n", rank_);
    }
  }
  // Enrolled until its queues drained: another endpoint on this device may
  // build copy graphs (which wait for the whole device to idle) only once
  // this one's waits cannot hold the device any more; a peer's signal that
  // such a wait needs may come only after that endpoint's next call. Queues
  // that did not drain by the deadline keep their waits after the streams are
  // destroyed: the device then builds no graph for the rest of the process.
  // Marked before the withdraw: in between, another thread's endpoint would find the device
  // quiescent and build a graph behind the waits left here.
  if (!drained) {
    DeviceQuiescence::markNeverDrains(device_);
    std::fprintf(stderr, "[tide cuda fabric] rank %d: teardown: device %d keeps waits that did not drain; later "
                         "endpoints there run copy lists without cached graphs\n", rank_, device_);
  }
  DeviceQuiescence::withdraw(this);
  releaseResources();
}

void CudaEndpoint::releaseResources() noexcept {
  // The watchdog stops asking communicators about to be aborted.
  if (watchdog_ != nullptr) watchdog_->setErrorProbe(nullptr);
  // Before any memory is freed: a free would wait for a gone peer's NCCL kernel (nccl_bootstrap.hpp).
  if (comms_ != nullptr) comms_->abortIfBroken();
  watchdog_.reset();
#if TIDE_HAVE_NCCL_RMA
  if (rma_ != nullptr && comms_ != nullptr && comms_->broken()) rma_->abandonWindow();
  rma_.reset();  // its window on the rail communicator, before the arena goes
#endif
  for (EventSlot& e : events_)
    if (e.event != nullptr) cudaEventDestroy(e.event);
  events_.clear();
  for (cudaStream_t s : own_) cudaStreamDestroy(s);
  own_.clear();
  liveTideStreams -= countedStreams_;
  countedStreams_ = 0;
  streams_.clear();
  if (hostWord_ != nullptr) cudaFreeHost(hostWord_);
  hostWord_ = nullptr;
  if (callerFence_ != nullptr) cudaEventDestroy(callerFence_);
  callerFence_ = nullptr;
  if (replay_.bytes != nullptr) cudaFree(replay_.bytes);
  if (replay_.ready != nullptr) cudaEventDestroy(replay_.ready);
  replay_.bytes = nullptr;
  replay_.ready = nullptr;
  copies_.reset();
  if (keepArenaAllocated_)
    (void)arena_.release();  // deliberately leaked: see the destructor
  else
    arena_.reset();
  if (control_ != nullptr && ownsControl_) cudaStreamDestroy(control_);
  control_ = nullptr;
  comms_.reset();
}

void CudaEndpoint::reportChoiceOnce() const {
  static std::once_flag once;
  if (rank_ != 0) return;
  std::call_once(once, [this] {
    std::fprintf(stderr,
                 "[tide] cuda fabric: %d node(s) x %d GPU(s), rails: %s (%s), NCCL %s, "
                 "%d of %d ranks load/store reachable, wait deadline %g s\n",
                 topo_.nodes, topo_.gpusPerNode, railModeName(railMode_), railWhy_.c_str(),
                 comms_ != nullptr ? ncclVersionString(comms_->ncclVersion()).c_str() : "unused",
                 arena_->reachablePeers(), topo_.ranks(),
                 watchdog_->timeoutSeconds());
  });
}

std::string CudaEndpoint::who() const {
  return "rank " + std::to_string(rank_) + ", call '" + call_ + "'";
}

cudaStream_t CudaEndpoint::queue(int q) const {
  if (q < 0 || q >= static_cast<int>(streams_.size()))
    throwUsage(who() + ": queue " + std::to_string(q) + " out of range");
  return streams_[static_cast<size_t>(q)];
}

cudaStream_t CudaEndpoint::stream(int q) const { return queue(q); }

void CudaEndpoint::setCallerStream(cudaStream_t stream) {
  // Calls carry sequence numbers in their counters and are checked by a
  // watchdog on the host: a graph replaying them would wait for values that
  // were passed long ago.
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  TIDE_CUDA_CHECK(cudaStreamIsCapturing(stream, &capturing));
  if (capturing != cudaStreamCaptureStatusNone)
    throwUsage(who() + ": the caller's stream is being captured into a CUDA graph; TIDE's calls cannot be "
                       "captured (each waits for counters of its own call number)");
  // A caller's stream still bound (its release failed) is fenced into queue 0's own first.
  if (streams_[0] != stream) clearCallerStream();
  streams_[0] = stream;
}

bool CudaEndpoint::clearCallerStream() noexcept {
  if (streams_.empty() || streams_[0] == own_[0]) return true;
  const char* failed = nullptr;
  try {
    // An enqueue like any operation's: under the device's gate (device_quiescence.hpp), so that
    // no copy-graph build on another thread checks quiescence while this wait goes in.
    const auto op = beginOp(/*flushRails=*/false);
    cudaError_t e = cudaEventRecord(callerFence_, streams_[0]);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(own_[0], callerFence_, 0);
    if (e != cudaSuccess) failed = cudaGetErrorString(e);
  } catch (...) {
    failed = "the device gate or device could not be taken";
  }
  if (failed != nullptr) {
    std::fprintf(stderr, "[tide cuda fabric] rank %d: queue 0 keeps the caller's stream (fencing it failed: %s)\n",
                 rank_, failed);
    return false;
  }
  streams_[0] = own_[0];
  return true;
}

void CudaEndpoint::setCtaBudget(int sumCtas, int landCtas) {
  if (sumCtas < 1 || landCtas < 1) throwUsage("CTA budgets must be at least 1");
  sumCtas_ = sumCtas;
  landCtas_ = landCtas;
}

std::byte* CudaEndpoint::peerArena(int peerRank) {
  topo_.checkRank(peerRank);
  return arena_->peerBase(peerRank);
}

void CudaEndpoint::checkArenaRange(int64_t offset, int64_t bytes, const char* call) const {
  // Subtractions, not a sum: an offset near INT64_MAX must not wrap into range.
  if (offset < 0 || bytes < 0 || bytes > arena_->userBytes() || offset > arena_->userBytes() - bytes)
    throwUsage(who() + ": " + call + " range [" + std::to_string(offset) + ", +" +
               std::to_string(bytes) + ") outside the arena");
}

CudaEndpoint::OpScope CudaEndpoint::beginOp(bool flushRails) {
  OpScope op{DeviceScope(device_), gateShared()};
  if (flushRails) flushRailGroup();
  return op;
}

void CudaEndpoint::discardDeferredRails() {
  if (sendRecv_ != nullptr) sendRecv_->discard();
#if TIDE_HAVE_NCCL_RMA
  if (rma_ != nullptr) rma_->discard();
#endif
}

void CudaEndpoint::flushRailGroup() {
  if (sendRecv_ != nullptr) sendRecv_->flush();
#if TIDE_HAVE_NCCL_RMA
  if (rma_ != nullptr) rma_->flush(*watchdog_, call_);
#endif
}

bool CudaEndpoint::dropThisRemoteSignal() {
  const int64_t index = remoteSignals_++;
  const bool drop = faults_.loseSignalAfter >= 0 && index == faults_.loseSignalAfter;
  if (drop) ++faultFirings_;
  return drop;
}

void CudaEndpoint::writeCounter(cudaStream_t s, uint64_t* counter, uint64_t value, bool remote) {
  if (remote && dropThisRemoteSignal()) return;
  StreamMemOps::get().write(s, counter, value);
}

Stats CudaEndpoint::stats() const {
  // The graph counts are the engine's, since the last reset.
  Stats s = stats_;
  const CopyEngine::GraphStats g = copies_->graphStats();
  s.copyGraphLaunches = g.launches - graphBase_.launches;
  s.copyGraphsBuilt = g.built - graphBase_.built;
  return s;
}

void CudaEndpoint::resetStats() {
  stats_ = Stats{};
  graphBase_ = copies_->graphStats();
}

void CudaEndpoint::copy(int q, const std::vector<CopyOp>& ops) {
  HostProfile::Scope timed(profile_, HostProfile::kCopy, static_cast<int64_t>(ops.size()));
  cudaStream_t s = queue(q);
  const auto gate = beginOp();
  const int64_t launchesBefore = profile_.enabled() ? copies_->graphStats().launches : 0;
  stats_.copyBytes += copies_->issue(s, ops);
  stats_.copyOps += static_cast<int64_t>(ops.size());
  if (profile_.enabled() && copies_->graphStats().launches > launchesBefore) timed.retag(HostProfile::kCopyGraph);
}

static_assert(kernels::kMaxSourcesPerPiece == kMaxReduceSources,
              "the sum and landing launches hold as many sources as reduce_op_rules.hpp lets through");

void CudaEndpoint::sum(int q, const SumOp& op) {
  HostProfile::Scope timed(profile_, HostProfile::kSum, static_cast<int64_t>(op.pieces.size()));
  cudaStream_t s = queue(q);
  for (size_t i = 0; i < op.pieces.size(); ++i) {
    const SumPiece& pc = op.pieces[i];
    if (const std::string why = sumPieceShapeProblem(pc); !why.empty())
      throwUsage(who() + ": sum piece " + std::to_string(i) + ": " + why);
    if (pc.rows == 0 || pc.elems == 0) continue;
    if (const std::string why = sumPieceLayoutProblem(pc, plan::itemSize(op.srcType)); !why.empty())
      throwUsage(who() + ": sum piece " + std::to_string(i) + ": " + why);
  }
  const auto gate = beginOp();
  const auto type = op.srcType == plan::DType::kBF16 ? kernels::SourceType::kBF16
                                                      : kernels::SourceType::kFP32;
  const int64_t item = plan::itemSize(op.srcType);
  kernels::SumLaunchBuilder builder(type, op.alpha, op.accumulate);
  auto flush = [&] {
    if (!builder.empty()) kernels::launchSum(builder.launch(), type, op.ctas > 0 ? op.ctas : sumCtas_, s);
    builder.clear();
  };
  // A piece taller than one launch holds is split by rows (rows are independent).
  const int64_t maxRows = kernels::kMaxValidPerLaunch / kernels::kMaxSourcesPerPiece;
  for (const SumPiece& pc : op.pieces) {
    const int n = static_cast<int>(pc.sources.size());
    for (int64_t r0 = 0; r0 < pc.rows; r0 += maxRows) {
      const int64_t rows = std::min(maxRows, pc.rows - r0);
      const void* ptrs[kernels::kMaxSourcesPerPiece];
      int64_t pitches[kernels::kMaxSourcesPerPiece];
      const int64_t* valid[kernels::kMaxSourcesPerPiece];
      for (int k = 0; k < n; ++k) {
        const SumSource& src = pc.sources[static_cast<size_t>(k)];
        ptrs[k] = static_cast<const std::byte*>(src.ptr) + r0 * src.pitch * item;
        pitches[k] = src.pitch;
        valid[k] = src.valid.data() + r0;
      }
      float* dst = pc.dst + r0 * pc.dstPitch;
      if (!builder.add(dst, pc.dstPitch, rows, pc.elems, n, ptrs, pitches, valid)) {
        flush();
        builder.add(dst, pc.dstPitch, rows, pc.elems, n, ptrs, pitches, valid);
      }
    }
    stats_.sumElems += pc.rows * pc.elems;
  }
  flush();
}

void CudaEndpoint::land(int q, const LandOp& op) {
  HostProfile::Scope timed(profile_, HostProfile::kLand);
  cudaStream_t s = queue(q);
  if (const std::string why = landShapeProblem(op); !why.empty()) throwUsage(who() + ": landing: " + why);
  if (const std::string why = landLayoutProblem(op); op.elems > 0 && !why.empty())
    throwUsage(who() + ": landing: " + why);
  const auto gate = beginOp();
  kernels::LandLaunch p;
  p.dst = op.dst;
  p.elems = op.elems;
  p.numSources = static_cast<int>(op.sources.size());
  p.alpha = op.alpha;
  p.accumulate = op.accumulate ? 1 : 0;
  p.clearSources = op.clearSources ? 1 : 0;
  for (int k = 0; k < p.numSources; ++k) p.src[k] = op.sources[static_cast<size_t>(k)];
  kernels::launchLand(p, op.ctas > 0 ? op.ctas : landCtas_, s);
  stats_.landElems += op.elems;
}

void CudaEndpoint::zero(int q, void* dst, int64_t bytes) {
  HostProfile::Scope timed(profile_, HostProfile::kZero);
  cudaStream_t s = queue(q);
  if (bytes < 0 || (bytes > 0 && dst == nullptr)) throwUsage(who() + ": zero of a bad range");
  const auto gate = beginOp();
  if (bytes > 0) TIDE_CUDA_CHECK(cudaMemsetAsync(dst, 0, static_cast<size_t>(bytes), s));
}

void CudaEndpoint::railPut(int q, int dstRank, int64_t dstOffset, const void* src, int64_t bytes,
                           int signalId, uint64_t signalValue) {
  HostProfile::Scope timed(profile_, HostProfile::kRailPut);
  cudaStream_t s = queue(q);
  topo_.checkRank(dstRank);
  if (topo_.localOf(dstRank) != topo_.localOf(rank_))
    throwUsage(who() + ": rail put to rank " + std::to_string(dstRank) + " on another rail");
  checkArenaRange(dstOffset, bytes, "rail put");
  const auto gate = beginOp(/*flushRails=*/false);  // puts and receives of a round go out in one group
  const bool duplicate = railPuts_++ == faults_.duplicatePutAfter;
  stats_.railBytes += bytes;
  stats_.railPuts += 1;
  if (railMode_ == RailMode::kSendRecv) {
    // The receiver's railRecv lands the bytes and sets its own counter.
    if (bytes > 0) sendRecv_->deferSend(s, topo_.nodeOf(dstRank), src, bytes);
    return;
  }
#if TIDE_HAVE_NCCL_RMA
  if (railMode_ == RailMode::kRma) {
    // The receiver's railRecv grants the credit this put waits for, and sets its own counter.
    rma_->deferSend(q, s, topo_.nodeOf(dstRank), dstOffset, src, bytes);
    return;
  }
#endif
  std::byte* dst = arena_->peerBase(dstRank) + dstOffset;
  // A put of nothing (an empty wave or round) carries only its signal: no
  // empty copy list, which would become an empty cached graph.
  if (bytes > 0) copies_->issue(s, {CopyOp{dst, src, bytes, 1, 0, 0}});
  replayAfterPut(s, dst, src, bytes, duplicate);
  // Rail signals count as remote for loseSignalAfter, like the host fabric's.
  if (signalId >= 0) writeCounter(s, arena_->peerCounter(dstRank, signalId), signalValue, true);
}

void CudaEndpoint::railPuts(int q, int dstRank, const std::vector<RailPiece>& pieces, int signalId,
                            uint64_t signalValue) {
  // Send/recv and RMA rails defer each put into their group anyway; the
  // duplicate-put fault counts and replays single puts.
  if (railMode_ != RailMode::kCopyEngine || pieces.size() < 2 || faults_.duplicatePutAfter >= 0 ||
      replay_.dst != nullptr)
    return Endpoint::railPuts(q, dstRank, pieces, signalId, signalValue);
  HostProfile::Scope timed(profile_, HostProfile::kRailPut, static_cast<int64_t>(pieces.size()));
  cudaStream_t s = queue(q);
  topo_.checkRank(dstRank);
  if (topo_.localOf(dstRank) != topo_.localOf(rank_))
    throwUsage(who() + ": rail put to rank " + std::to_string(dstRank) + " on another rail");
  std::vector<CopyOp> ops;
  ops.reserve(pieces.size());
  for (const RailPiece& p : pieces) {
    checkArenaRange(p.dstOffset, p.bytes, "rail put");
    if (p.bytes > 0) ops.push_back(CopyOp{arena_->peerBase(dstRank) + p.dstOffset, p.src, p.bytes, 1, 0, 0});
    stats_.railBytes += p.bytes;
  }
  const auto gate = beginOp(/*flushRails=*/false);
  railPuts_ += static_cast<int64_t>(pieces.size());
  stats_.railPuts += static_cast<int64_t>(pieces.size());
  if (!ops.empty()) copies_->issue(s, ops);
  if (signalId >= 0) writeCounter(s, arena_->peerCounter(dstRank, signalId), signalValue, true);
}

void CudaEndpoint::replayAfterPut(cudaStream_t s, std::byte* dst, const void* src, int64_t bytes,
                                  bool duplicate) {
  // A retransmitted RDMA write: the n-th put's bytes land again after the
  // next put to the same place (before that put's signal).
  if (replay_.dst == dst && !duplicate) {
    TIDE_CUDA_CHECK(cudaStreamWaitEvent(s, replay_.ready, 0));
    issueCopies(s, {CopyOp{dst, replay_.bytes, replay_.size, 1, 0, 0}});
    replay_.dst = nullptr;
    ++faultFirings_;
  }
  if (duplicate) {
    // Sized in setFabricFaults: a cudaMalloc or cudaFree here, amid a call's
    // issue, could wait for the device while a stream waits for a signal this
    // thread has yet to issue.
    if (replay_.capacity < bytes)
      throw std::logic_error("duplicate-put replay buffer of " + std::to_string(replay_.capacity) +
                             " bytes for a put of " + std::to_string(bytes));
    issueCopies(s, {CopyOp{replay_.bytes, src, bytes, 1, 0, 0}});
    TIDE_CUDA_CHECK(cudaEventRecord(replay_.ready, s));
    replay_.dst = dst;
    replay_.size = bytes;
  }
}

void CudaEndpoint::railRecv(int q, int srcRank, int64_t dstOffset, int64_t bytes, int signalId,
                            uint64_t signalValue) {
  cudaStream_t s = queue(q);
  topo_.checkRank(srcRank);
  checkArenaRange(dstOffset, bytes, "rail receive");
  if (railMode_ == RailMode::kCopyEngine) return;
  const auto gate = beginOp(/*flushRails=*/false);
#if TIDE_HAVE_NCCL_RMA
  if (railMode_ == RailMode::kRma) {
    if (signalId >= 0) arena_->counter(signalId);  // range check now, not at the flush
    rma_->deferRecv(q, s, topo_.nodeOf(srcRank), bytes, signalId, signalValue);
    return;
  }
#endif
  uint64_t* counter = signalId >= 0 ? arena_->counter(signalId) : nullptr;
  // Zero bytes (the sender's zero-byte put sends nothing): only the counter,
  // written with the group's other counters; ending the group here could leave
  // its sends waiting for receives that the rest of the round posts.
  sendRecv_->deferRecv(s, topo_.nodeOf(srcRank), arena_->base() + dstOffset, bytes, counter, signalValue);
}

void CudaEndpoint::signal(int q, int dstRank, int id, uint64_t value) {
  HostProfile::Scope timed(profile_, HostProfile::kSignal);
  cudaStream_t s = queue(q);
  topo_.checkRank(dstRank);
  uint64_t* counter = arena_->peerCounter(dstRank, id);
  if (counter == nullptr)
    throwUsage(who() + ": signal to rank " + std::to_string(dstRank) +
               ", which is not load/store reachable (send/recv rails carry signals with their data)");
  const auto gate = beginOp();
  writeCounter(s, counter, value, dstRank != rank_);
}

void CudaEndpoint::wait(int q, int id, uint64_t value, int peer, const char* what) {
  HostProfile::Scope timed(profile_, HostProfile::kWait);
  cudaStream_t s = queue(q);
  uint64_t* counter = arena_->counter(id);
  const auto gate = beginOp();
  watchdog_->before(s);
  StreamMemOps::get().waitGeq(s, counter, value);
  watchdog_->after(s, WaitRecord{.call = call_, .queue = q, .counterId = id, .value = value, .peer = peer,
                                 .what = what != nullptr ? what : "", .counter = counter});
}

void CudaEndpoint::delay(int q, double seconds) {
  cudaStream_t s = queue(q);
  const auto gate = beginOp();
  kernels::launchDelay(seconds, s);
}

uint64_t CudaEndpoint::record(int q) {
  HostProfile::Scope timed(profile_, HostProfile::kRecord);
  cudaStream_t s = queue(q);
  const auto gate = beginOp();
  const uint64_t id = nextEvent_++;
  EventSlot& slot = events_[id % kEventRing];
  if (slot.event == nullptr) TIDE_CUDA_CHECK(cudaEventCreateWithFlags(&slot.event, cudaEventDisableTiming));
  TIDE_CUDA_CHECK(cudaEventRecord(slot.event, s));
  slot.id = id;
  slot.queue = q;
  ++stats_.events;
  return id;
}

bool CudaEndpoint::eventLive(int q, uint64_t event) const {
  if (event == kNoEvent) return true;  // nothing to wait for (fabric.hpp), as on the host fabric
  const EventSlot& slot = events_[event % kEventRing];
  return slot.id == event && slot.queue == q;
}

const CudaEndpoint::EventSlot& CudaEndpoint::liveEvent(int q, uint64_t event) const {
  if (!eventLive(q, event))
    throwUsage(who() + ": event " + std::to_string(event) + " of queue " + std::to_string(q) +
               " is unknown or was recycled (more than " + std::to_string(kEventRing) + " events in flight)");
  return events_[event % kEventRing];
}

void CudaEndpoint::waitEvent(int q, int srcQueue, uint64_t event) {
  HostProfile::Scope timed(profile_, HostProfile::kWaitEvent);
  cudaStream_t s = queue(q);
  (void)queue(srcQueue);  // a bad source queue is refused even for kNoEvent, as on the host fabric
  if (event == kNoEvent) return;
  const EventSlot& slot = liveEvent(srcQueue, event);
  const auto gate = beginOp();
  TIDE_CUDA_CHECK(cudaStreamWaitEvent(s, slot.event, 0));
}

template <typename Done>
void CudaEndpoint::hostPoll(Done&& done, const std::string& what) {
  // The rails' flush may record the watchdog's events and enqueue NCCL work:
  // on the communicator's device, whatever the caller's thread has current.
  const DeviceScope onDevice(device_);
  {
    const auto gate = gateShared();
    flushRailGroup();
  }
  awaitOnHost(done, what);
}

template <typename Done>
void CudaEndpoint::awaitOnHost(Done&& done, const std::string& what) {
  // Waits inside the stream have their own watchdog; this deadline covers the
  // rest (a copy or kernel that never ends).
  const double limit = hostDeadlineSeconds(watchdog_->timeoutSeconds());
  pollUntilDone(done, limit, std::chrono::microseconds(50), [&] { return "cuda fabric: " + who() + ": " + what; });
}

void CudaEndpoint::synchronize(int q) {
  cudaStream_t s = queue(q);
  hostPoll([s] { return cudaStreamQuery(s); }, "queue " + std::to_string(q) + " did not drain");
}

void CudaEndpoint::synchronizeEvent(int q, uint64_t event) {
  queue(q);  // validates q
  if (event == kNoEvent) return;
  cudaEvent_t ev = liveEvent(q, event).event;
  hostPoll([ev] { return cudaEventQuery(ev); },
           "event " + std::to_string(event) + " of queue " + std::to_string(q) + " did not complete");
}

void CudaEndpoint::synchronizeAll() {
  for (int q = 0; q < numQueues(); ++q) synchronize(q);
}

uint64_t CudaEndpoint::counterValue(int id) {
  const DeviceScope onDevice(device_);
  const uint64_t* counter = arena_->counter(id);
  TIDE_CUDA_CHECK(cudaMemcpyAsync(hostWord_, counter, sizeof(uint64_t), cudaMemcpyDeviceToHost, control_));
  // Under the deadline like every host wait (the control stream also carries graph uploads).
  cudaStream_t s = control_;
  awaitOnHost([s] { return cudaStreamQuery(s); }, "reading counter " + std::to_string(id) + " did not complete");
  return *hostWord_;
}

void CudaEndpoint::setFabricFaults(const FabricFaults& f) {
  // A stall injected here would sleep in the caller's thread with nothing to
  // end it early once the peers fail (the host fabric's idle watches the job's
  // failure record; a CUDA rank has no such record to watch). A test stalls a
  // CUDA rank by stopping its process instead.
  if (f.stallSeconds > 0)
    throwUsage(who() + ": setFabricFaults: stallSeconds is a host-fabric fault; stall a CUDA rank by stopping "
                       "its process (SIGSTOP)");
  if (f.failTaskAfter >= 0)
    throwUsage(who() + ": setFabricFaults: failTaskAfter is a host-fabric fault (a CUDA fabric has no host tasks "
                       "to fail)");
  if (f.duplicatePutAfter >= 0 && replay_.capacity < arena_->userBytes()) {
    // Every rail put lies in an arena: one buffer of the arena's size holds any.
    // Allocated here, between calls, not while a call is being issued (replayAfterPut).
    const DeviceScope onDevice(device_);
    if (replay_.bytes != nullptr) TIDE_CUDA_CHECK(cudaFree(replay_.bytes));
    replay_.bytes = nullptr;
    replay_.capacity = 0;
    TIDE_CUDA_CHECK(cudaMalloc(&replay_.bytes, static_cast<size_t>(arena_->userBytes())));
    replay_.capacity = arena_->userBytes();
    if (replay_.ready == nullptr) TIDE_CUDA_CHECK(cudaEventCreateWithFlags(&replay_.ready, cudaEventDisableTiming));
  }
  faults_ = f;
  remoteSignals_ = 0;
  railPuts_ = 0;
  faultFirings_ = 0;
}

void CudaEndpoint::barrier() {
  const DeviceScope onDevice(device_);  // NcclComms::barrier sets the device; the caller's comes back
  if (comms_ != nullptr)
    comms_->barrier();
  else
    group_->barrier(rank_);
}

std::vector<uint64_t> CudaEndpoint::gatherWords(const std::vector<uint64_t>& mine, const std::string& what) {
  const DeviceScope onDevice(device_);  // the caller's current device stays as it was (tide.h)
  if (comms_ != nullptr) return comms_->gatherWords(mine, what);
  try {
    return group_->gatherWords(rank_, mine);
  } catch (const FabricError& e) {
    throw FabricError(e.kind(), "rank " + std::to_string(rank_) + ": " + what + ": " + e.what());
  }
}

}  // namespace tide::fabric::cuda
