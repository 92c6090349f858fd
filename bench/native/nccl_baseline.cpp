// Baselines that PyTorch cannot express, for bench/baselines.py (ctypes):
//   - NCCL's copy-engine all-gather: a communicator with
//     CTAPolicy = NCCL_CTA_POLICY_ZERO and send/receive buffers in symmetric
//     windows (NCCL 2.28 then runs AllGather on copy engines, one node only);
//     the same on a default-policy communicator for comparison;
//   - the copy-engine peer-write ceiling: cudaMemcpyAsync into a peer's window
//     through its LSA address.
// No multimem is ever requested, and a communicator is refused unless
// NCCL_NVLS_ENABLE=0 (or TIDE_ENABLE_MULTICAST=1). The communicator is
// nonblocking, as the CUDA fabric's world communicator is: its creation,
// window registrations and bootstrap all-gather are awaited under the
// caller's deadline, so a rank that never joins fails tbn_create with a
// message instead of hanging the benchmark; what was made is then aborted.
#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/kernels/lsa_pointers.hpp"
#include "fabric/cuda/nccl_bootstrap.hpp"

#define TBN_API extern "C" __attribute__((visibility("default")))

namespace {

using namespace tide::fabric::cuda;

thread_local std::string lastError;

struct Buffer {
  void* ptr = nullptr;
  ncclWindow_t window = nullptr;
};

struct TbnComm {
  int rank = 0;
  int ranks = 1;
  int device = 0;
  ncclComm_t comm = nullptr;
  double deadlineSeconds = 0;
  bool broken = false;  // a bootstrap wait failed: NCCL work may be outstanding, abort
  cudaStream_t stream = nullptr;
  Buffer send, recv;
  uint64_t* gather = nullptr;  // the host-identity all-gather's device frames (ranks + 1, gather_frames.hpp)
  LsaTeam team;
  std::vector<void*> peerRecv;  // by world rank
};

template <typename F>
int guarded(F&& body) {
  try {
    body();
    return 0;
  } catch (const std::exception& e) {
    lastError = e.what();
    return 1;
  }
}

void allocWindow(TbnComm& c, Buffer& b, size_t bytes) {
  TIDE_NCCL_CHECK(ncclMemAlloc(&b.ptr, bytes));
  TIDE_NCCL_ISSUE(ncclCommWindowRegister(c.comm, b.ptr, bytes, &b.window, NCCL_WIN_COLL_SYMMETRIC));
  awaitCommReady(c.comm, c.deadlineSeconds, "registering a baseline window");
  if (!isSymmetricWindow(b.window))
    throw std::runtime_error("ncclCommWindowRegister returned no symmetric window");
}

void destroy(TbnComm* c) {
  if (c == nullptr) return;
  cudaSetDevice(c->device);
  if (c->broken && c->comm != nullptr) {
    ncclCommAbort(c->comm);  // no call on it that a gone peer would have to join
    c->comm = nullptr;
  }
  if (c->stream != nullptr && c->comm != nullptr) {
    try {
      awaitNcclStream(c->stream, {c->comm}, c->deadlineSeconds, "draining the baseline stream");
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[tide] %s; aborting the baseline communicator\n", e.what());
      ncclCommAbort(c->comm);
      c->comm = nullptr;
    }
  }
  for (Buffer* b : {&c->send, &c->recv}) {
    if (b->window != nullptr && c->comm != nullptr) ncclCommWindowDeregister(c->comm, b->window);
    if (b->ptr != nullptr) ncclMemFree(b->ptr);
  }
  if (c->comm != nullptr) finalizeOrAbort(c->comm, c->deadlineSeconds);
  if (c->gather != nullptr) cudaFree(c->gather);  // after the abort: a gather of a gone peer no longer runs
  if (c->stream != nullptr) cudaStreamDestroy(c->stream);
  delete c;
}

}  // namespace

TBN_API const char* tbn_last_error() { return lastError.c_str(); }

TBN_API int tbn_nccl_version() {
  int v = 0;
  ncclGetVersion(&v);
  return v;
}

TBN_API int tbn_unique_id_bytes() { return static_cast<int>(sizeof(ncclUniqueId)); }

TBN_API int tbn_get_unique_id(unsigned char* out) {
  return guarded([&] {
    ncclUniqueId id;
    TIDE_NCCL_CHECK(ncclGetUniqueId(&id));
    std::memcpy(out, &id, sizeof(id));
  });
}

// ctaPolicy: NCCL_CTA_POLICY_* value, or -1 for NCCL's default.
// deadlineSeconds: the limit of each wait of the communicator's bootstrap and teardown.
TBN_API void* tbn_create(const unsigned char* id, int ranks, int rank, int device, int ctaPolicy,
                         size_t sendBytes, size_t recvBytes, double deadlineSeconds) {
  if (!(deadlineSeconds > 0)) {
    lastError = "tbn_create: the deadline must be positive, got " + std::to_string(deadlineSeconds);
    return nullptr;
  }
  auto* c = new TbnComm;
  c->rank = rank;
  c->ranks = ranks;
  c->device = device;
  c->deadlineSeconds = deadlineSeconds;
  const int rc = guarded([&] {
    requireMulticastOff();
    TIDE_CUDA_CHECK(cudaSetDevice(device));
    TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    ncclUniqueId uid;
    std::memcpy(&uid, id, sizeof(uid));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    if (ctaPolicy >= 0) config.CTAPolicy = ctaPolicy;
    c->broken = true;  // until its bootstrap is done
    TIDE_NCCL_ISSUE(ncclCommInitRankConfig(&c->comm, ranks, uid, rank, &config));
    awaitCommReady(c->comm, deadlineSeconds,
                   "creating the baseline communicator of " + std::to_string(ranks) + " ranks");
    allocWindow(*c, c->send, sendBytes);
    allocWindow(*c, c->recv, recvBytes);
    const size_t gatherWords = (static_cast<size_t>(ranks) + 1) * tide::fabric::kGatherFrameWords;
    TIDE_CUDA_CHECK(cudaMalloc(&c->gather, gatherWords * sizeof(uint64_t)));
    c->team = discoverLsaTeam(c->comm, rank, ranks, c->gather, gatherWords, c->stream,
                              deadlineSeconds);
    // Still broken until the peer addresses are read: a kernel that timed out
    // may still read the window, which destroy() then aborts instead of freeing.
    const std::vector<void*> bases = resolveLsaBases(c->recv.window, c->team.size, c->stream, deadlineSeconds);
    c->broken = false;
    c->peerRecv.assign(static_cast<size_t>(ranks), nullptr);
    for (int i = 0; i < c->team.size; ++i) c->peerRecv[static_cast<size_t>(c->team.first + i)] = bases[static_cast<size_t>(i)];
    c->peerRecv[static_cast<size_t>(rank)] = c->recv.ptr;  // NCCL's own LSA address is an alias
  });
  if (rc != 0) {
    destroy(c);
    return nullptr;
  }
  return c;
}

TBN_API void* tbn_send(void* h) { return static_cast<TbnComm*>(h)->send.ptr; }
TBN_API void* tbn_recv(void* h) { return static_cast<TbnComm*>(h)->recv.ptr; }
TBN_API void* tbn_peer_recv(void* h, int peer) {
  auto* c = static_cast<TbnComm*>(h);
  return peer >= 0 && peer < c->ranks ? c->peerRecv[static_cast<size_t>(peer)] : nullptr;
}

// bf16 all-gather of `bytesPerRank` from the send window into the receive window.
TBN_API int tbn_all_gather(void* h, size_t bytesPerRank, void* stream) {
  auto* c = static_cast<TbnComm*>(h);
  return guarded([&] {
    // Nonblocking: ncclInProgress while NCCL still enqueues (first use); it is
    // awaited before the caller's next stream work, which must follow it.
    const ncclResult_t r = ncclAllGather(c->send.ptr, c->recv.ptr, bytesPerRank / 2, ncclBfloat16, c->comm,
                                         static_cast<cudaStream_t>(stream));
    if (r == ncclInProgress) awaitCommReady(c->comm, c->deadlineSeconds, "enqueuing the baseline all-gather");
    else TIDE_NCCL_CHECK(r);
  });
}

TBN_API int tbn_copy(void* dst, const void* src, size_t bytes, void* stream) {
  return guarded([&] {
    TIDE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
  });
}

TBN_API void tbn_destroy(void* h) { destroy(static_cast<TbnComm*>(h)); }
