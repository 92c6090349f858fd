// Baselines that PyTorch cannot express, for bench/baselines.py (ctypes):
//   - NCCL's copy-engine all-gather: a communicator with
//     CTAPolicy = NCCL_CTA_POLICY_ZERO and send/receive buffers in symmetric
//     windows (NCCL 2.28 then runs AllGather on copy engines, one node only);
//     the same on a default-policy communicator for comparison;
//   - the copy-engine peer-write ceiling: cudaMemcpyAsync into a peer's window
//     through its LSA address.
// No multimem is ever requested, and a communicator is refused unless
// NCCL_NVLS_ENABLE=0 (or TIDE_ENABLE_MULTICAST=1).
#include <cuda_runtime.h>
#include <nccl.h>

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
  cudaStream_t stream = nullptr;
  Buffer send, recv;
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
  TIDE_NCCL_CHECK(ncclCommWindowRegister(c.comm, b.ptr, bytes, &b.window, NCCL_WIN_COLL_SYMMETRIC));
  if (!isSymmetricWindow(b.window))
    throw std::runtime_error("ncclCommWindowRegister returned no symmetric window");
}

void destroy(TbnComm* c) {
  if (c == nullptr) return;
  cudaSetDevice(c->device);
  if (c->stream != nullptr) cudaStreamSynchronize(c->stream);
  for (Buffer* b : {&c->send, &c->recv}) {
    if (b->window != nullptr) ncclCommWindowDeregister(c->comm, b->window);
    if (b->ptr != nullptr) ncclMemFree(b->ptr);
  }
  if (c->comm != nullptr) {
    ncclCommFinalize(c->comm);
    ncclCommDestroy(c->comm);
  }
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
TBN_API void* tbn_create(const unsigned char* id, int ranks, int rank, int device, int ctaPolicy,
                         size_t sendBytes, size_t recvBytes) {
  auto* c = new TbnComm;
  c->rank = rank;
  c->ranks = ranks;
  c->device = device;
  const int rc = guarded([&] {
    requireMulticastOff();
    TIDE_CUDA_CHECK(cudaSetDevice(device));
    TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    ncclUniqueId uid;
    std::memcpy(&uid, id, sizeof(uid));
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 1;
    if (ctaPolicy >= 0) config.CTAPolicy = ctaPolicy;
    TIDE_NCCL_CHECK(ncclCommInitRankConfig(&c->comm, ranks, uid, rank, &config));
    allocWindow(*c, c->send, sendBytes);
    allocWindow(*c, c->recv, recvBytes);
    c->team = discoverLsaTeam(c->comm, rank, ranks, c->stream, /*deadlineSeconds=*/300);
    const std::vector<void*> bases = resolveLsaBases(c->recv.window, c->team.size, c->stream);
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
    TIDE_NCCL_CHECK(ncclAllGather(c->send.ptr, c->recv.ptr, bytesPerRank / 2, ncclBfloat16, c->comm,
                                  static_cast<cudaStream_t>(stream)));
  });
}

TBN_API int tbn_copy(void* dst, const void* src, size_t bytes, void* stream) {
  return guarded([&] {
    TIDE_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
  });
}

TBN_API void tbn_destroy(void* h) { destroy(static_cast<TbnComm*>(h)); }
