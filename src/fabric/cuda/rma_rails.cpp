#include "fabric/cuda/rma_rails.hpp"

#include "fabric/cuda/nccl_runtime.hpp"
#include "fabric/fail_stop_deadline.hpp"

namespace tide::fabric::cuda {

const NcclRmaApi& NcclRmaApi::get() {
  static const NcclRmaApi api = [] {
    NcclRmaApi a;
#if TIDE_HAVE_NCCL_RMA
    if (loadedNccl() == nullptr) {
      a.missing = "libnccl.so.2 is not loaded under that name";
      return a;
    }
    a.putSignal = reinterpret_cast<decltype(a.putSignal)>(loadedNcclSymbol("ncclPutSignal"));
    a.signal = reinterpret_cast<decltype(a.signal)>(loadedNcclSymbol("ncclSignal"));
    a.waitSignal = reinterpret_cast<decltype(a.waitSignal)>(loadedNcclSymbol("ncclWaitSignal"));
    a.queryProperties = loadedNcclSymbol("ncclCommQueryProperties");
    if (a.putSignal == nullptr || a.signal == nullptr || a.waitSignal == nullptr)
      a.missing = "the loaded NCCL library has no ncclPutSignal/ncclSignal/ncclWaitSignal";
#else
    a.missing = "built against NCCL headers older than 2.29";
#endif
    return a;
  }();
  return api;
}

}  // namespace tide::fabric::cuda

#if TIDE_HAVE_NCCL_RMA

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fabric/byte_range.hpp"
#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/stream_memops.hpp"
#include "fabric/cuda/device_arena.hpp"
#include "fabric/cuda/wait_watchdog.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric::cuda {

namespace {

// The entry points; RmaRails exists only where the endpoint found them.
const NcclRmaApi& api() {
  const NcclRmaApi& a = NcclRmaApi::get();
  if (!a.ok()) throw std::logic_error(std::string("NCCL host RMA used without its API: ") + a.missing);
  return a;
}

// One group's ops on its stream, in RmaRendezvous's order.
class NcclRmaOps final : public RmaRailOps {
 public:
  NcclRmaOps(ncclComm_t data, ncclComm_t credit, ncclWindow_t window, DeviceArena& arena, cudaStream_t s,
             WaitWatchdog& watchdog, const std::string& call, int queue)
      : data_(data), credit_(credit), window_(window), arena_(arena), s_(s), watchdog_(watchdog), call_(call),
        queue_(queue) {}
  ~NcclRmaOps() override = default;

  void grantCredit(int peer) override { TIDE_NCCL_CHECK(api().signal(peer, 0, 0, 0, credit_, s_)); }
  void awaitCredits(const std::vector<PeerCount>& from) override { await(from, credit_, "credits"); }
  void putWithSignal(const RmaPut& put) override { puts_.push_back(put); }
  void awaitPuts(const std::vector<PeerCount>& from) override {
    issuePuts();
    await(from, data_, "rail puts");
  }
  void setCounter(int id, uint64_t value) override {
    issuePuts();
    StreamMemOps::get().write(s_, arena_.counter(id), value);
  }
  // The group's puts as one NCCL group, so that they progress together.
  void issuePuts() {
    if (puts_.empty()) return;
    TIDE_NCCL_CHECK(ncclGroupStart());
    ncclResult_t issued = ncclSuccess;
    for (const RmaPut& p : puts_) {
      if (issued != ncclSuccess) break;
      issued = api().putSignal(p.src, static_cast<size_t>(p.bytes), ncclUint8, p.peer, window_,
                             static_cast<size_t>(p.dstOffset), 0, 0, 0, data_, s_);
    }
    const ncclResult_t ended = ncclGroupEnd();
    puts_.clear();
    TIDE_NCCL_CHECK(issued);
    TIDE_NCCL_CHECK(ended);
  }

 private:
  void await(const std::vector<PeerCount>& from, ncclComm_t comm, const char* what) {
    std::vector<ncclWaitSignalDesc_t> descs;
    std::string awaited = std::string("NCCL signals (") + what + ") from rail peers";
    for (const PeerCount& pc : from) {
      descs.push_back({pc.count, pc.peer, 0, 0});
      awaited.append(" ").append(std::to_string(pc.peer)).append(" x").append(std::to_string(pc.count));
    }
    watchdog_.before(s_);
    TIDE_NCCL_CHECK(api().waitSignal(static_cast<int>(descs.size()), descs.data(), comm, s_));
    watchdog_.after(s_, WaitRecord{.call = call_, .queue = queue_, .counterId = -1, .value = 0,
                                   .peer = from.front().peer, .what = std::move(awaited), .counter = nullptr});
  }
  ncclComm_t data_;
  ncclComm_t credit_;
  ncclWindow_t window_;
  DeviceArena& arena_;
  cudaStream_t s_;
  WaitWatchdog& watchdog_;
  const std::string& call_;
  int queue_;
  std::vector<RmaPut> puts_;
};

}  // namespace

namespace {
const char* const kRegistrationHint =
    "a rail peer never made the same collective call; TIDE_FABRIC_WAIT_TIMEOUT_S sets the deadline";
}  // namespace

RmaRails::RmaRails(ncclComm_t data, ncclComm_t credit, DeviceArena& arena, double deadlineSeconds, int rank)
    : data_(data),
      credit_(credit),
      arena_(arena),
      deadlineSeconds_(deadlineSeconds),
      who_("[tide cuda fabric] rank " + std::to_string(rank)),
      issuing_(deadlineSeconds, [rank, deadlineSeconds](double seconds) {
        std::fprintf(stderr,
                     "[tide cuda fabric] FATAL: rank %d: issuing NCCL host RMA rail transfers (ncclSignal, "
                     "ncclPutSignal, ncclWaitSignal) has not returned for %.1f s (deadline %g s): the host call "
                     "blocks inside NCCL (a rail peer out of step, or NCCL stuck). Aborting the process (fail "
                     "stop).\n",
                     rank, seconds, deadlineSeconds);
        std::fflush(stderr);
        std::abort();
      }) {
  // Symmetric: NCCL 2.30 refuses a put whose source or destination lies in
  // any other kind of window (tide_nccl_rma_probe). Collective on a blocking
  // communicator: nothing can time it from inside.
  const ncclResult_t registered = callUnderFailStopDeadline(
      deadlineSeconds_, who_,
      "ncclCommWindowRegister of the arena on the rail communicator (RMA rails)", kRegistrationHint, [&] {
        return ncclCommWindowRegister(data_, arena_.base(), static_cast<size_t>(arena_.windowBytes()), &window_,
                                      NCCL_WIN_COLL_SYMMETRIC);
      });
  TIDE_NCCL_CHECK(registered);
  // NCCL answers success with no window where the communicator has no symmetric memory support:
  // said here, not at the first put of a collective.
  if (window_ == nullptr)
    throw FabricError(FabricError::Kind::kDevice,
                      "cuda fabric: NCCL registered no window for the RMA rails (ncclCommWindowRegister returned "
                      "success and a null window: the rail communicator has no symmetric memory support); "
                      "TIDE_FABRIC_RAILS=send-recv takes the two-sided rails instead");
}

RmaRails::~RmaRails() {
  if (window_ == nullptr) return;
  try {
    callUnderFailStopDeadline(deadlineSeconds_, who_,
                              "ncclCommWindowDeregister of the RMA rails' window", kRegistrationHint,
                              [&] { return ncclCommWindowDeregister(data_, window_); });
  } catch (...) {
    // No monitor (no memory or thread for it): deregistered all the same, without its deadline,
    // rather than a throw out of a destructor that a noexcept release calls.
    ncclCommWindowDeregister(data_, window_);
  }
}

void RmaRails::joinQueue(int queue, cudaStream_t stream) {
  if (stream_ == nullptr) {
    queue_ = queue;
    stream_ = stream;
  }
  if (stream != stream_)
    throw FabricError(FabricError::Kind::kUsage,
                      "RMA rail transfer on a second stream: signal counts are per peer, so rails must stay on "
                      "one queue");
}

void RmaRails::deferSend(int queue, cudaStream_t stream, int railPeer, int64_t dstOffset, const void* src,
                         int64_t bytes) {
  if (bytes > 0 && !liesWithin(src, bytes, arena_.base(), arena_.windowBytes()))
    throw FabricError(FabricError::Kind::kUsage,
                      "RMA rail put from outside the arena: NCCL host RMA reads only from a registered window");
  joinQueue(queue, stream);
  group_.deferSend(railPeer, dstOffset, src, bytes);
}

void RmaRails::deferRecv(int queue, cudaStream_t stream, int railPeer, int64_t bytes, int signalId, uint64_t value) {
  joinQueue(queue, stream);
  group_.deferRecv(railPeer, bytes, signalId, value);
}

void RmaRails::flush(WaitWatchdog& watchdog, const std::string& call) {
  if (!group_.pending()) return;
  NcclRmaOps ops(data_, credit_, window_, arena_, stream_, watchdog, call, queue_);
  // The host calls only enqueue (their waits are the stream's, under the
  // watchdog), but nothing else times them should NCCL block inside one, as
  // its send/recv group end can (SendRecvRails::flush).
  issuing_.enter();
  try {
    group_.flush(ops);
    ops.issuePuts();
  } catch (...) {
    issuing_.leave();
    throw;
  }
  issuing_.leave();
}

}  // namespace tide::fabric::cuda

#endif  // TIDE_HAVE_NCCL_RMA
