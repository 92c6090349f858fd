// The NCCL host RMA semantics that TIDE's RMA rails (src/fabric/cuda/rma_rails,
// src/fabric/rma_rendezvous) rely on, checked on the GPUs, one process per
// GPU, each rank putting to the next (one rank puts to itself):
//   1. ncclPutSignal lands its bytes in the peer's registered window at the
//      offset, and ncclWaitSignal(opCnt = n from a peer) returns once n puts
//      from that peer have landed;
//   2. waits consume counts: after two puts, two waits for one pass, and a
//      third waits until a third put;
//   3. ncclSignal on a second communicator is counted apart: it does not
//      release a wait on the first one.
//
//   tide_nccl_rma_probe --ranks N
//
// Built against NCCL < 2.29 it says so, in the words gpu_run.sh turns into a
// SKIP, and fails.
#include <cuda_runtime.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "fabric/cuda/rma_rails.hpp"  // TIDE_HAVE_NCCL_RMA
#include "rank_launcher.hpp"

namespace {

#define PCHECK(cond, what)                                                                         \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "[rank %d] FAIL %s:%d: %s\n", g_rank, __FILE__, __LINE__, std::string(what).c_str()); \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)
#define PCUDA(expr) PCHECK((expr) == cudaSuccess, std::string(#expr) + ": " + cudaGetErrorString(cudaGetLastError()))
#define PNCCL(expr)                                                                                \
  do {                                                                                             \
    const ncclResult_t r_ = (expr);                                                                \
    PCHECK(r_ == ncclSuccess, std::string(#expr) + ": " + ncclGetErrorString(r_) + " (" + ncclGetLastError(nullptr) + ")"); \
  } while (0)

int g_rank = 0;

// Has `s` drained within `seconds`?
bool drains(cudaStream_t s, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return true;
    if (e != cudaErrorNotReady) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return false;
}

std::vector<unsigned char> pattern(int rank, int k, size_t bytes) {
  std::vector<unsigned char> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<unsigned char>((i * 131 + static_cast<size_t>(rank) * 17 + static_cast<size_t>(k) * 7 + 1) & 0xff);
  return v;
}

#if TIDE_HAVE_NCCL_RMA
int probe(int rank, int ranks, const ncclUniqueId& id) {
  g_rank = rank;
  PCUDA(cudaSetDevice(rank));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.numRmaCtx = 1;
  ncclComm_t data = nullptr, credit = nullptr;
  PNCCL(ncclCommInitRankConfig(&data, ranks, id, rank, &config));
  PNCCL(ncclCommSplit(data, 0, rank, &credit, &config));
  const int to = (rank + 1) % ranks, from = (rank + ranks - 1) % ranks;
  constexpr size_t kWindow = 4 << 20, kBytes = (256 << 10) + 12;
  void* window = nullptr;
  PNCCL(ncclMemAlloc(&window, kWindow));
  PCUDA(cudaMemset(window, 0xEE, kWindow));
  ncclWindow_t win = nullptr;
  PNCCL(ncclCommWindowRegister(data, window, kWindow, &win, NCCL_WIN_DEFAULT));
  unsigned char* src = nullptr;
  int* one = nullptr;
  PCUDA(cudaMalloc(&src, 6 * kBytes));
  PCUDA(cudaMalloc(&one, sizeof(int)));
  for (int k = 0; k < 6; ++k) {
    const auto p = pattern(rank, k, kBytes);
    PCUDA(cudaMemcpy(src + k * kBytes, p.data(), kBytes, cudaMemcpyHostToDevice));
  }
  cudaStream_t s = nullptr, b = nullptr;
  PCUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  PCUDA(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  auto barrier = [&]() -> int {
    PNCCL(ncclAllReduce(one, one, 1, ncclInt32, ncclSum, data, b));
    PCHECK(drains(b, 30), "barrier all-reduce did not finish");
    return 0;
  };
  auto put = [&](int k, size_t offset) -> int {
    PNCCL(ncclPutSignal(src + k * kBytes, kBytes, ncclUint8, to, win, offset, 0, 0, 0, data, s));
    return 0;
  };
  auto wait = [&](ncclComm_t comm, int n) -> int {
    ncclWaitSignalDesc_t d{n, from, 0, 0};
    PNCCL(ncclWaitSignal(1, &d, comm, s));
    return 0;
  };
  auto landed = [&](int k, size_t offset) -> bool {
    std::vector<unsigned char> got(kBytes);
    if (cudaMemcpy(got.data(), static_cast<unsigned char*>(window) + offset, kBytes, cudaMemcpyDeviceToHost) !=
        cudaSuccess)
      return false;
    return got == pattern(from, k, kBytes);
  };

  // 1. Two puts, one wait for both.
  if (put(0, 0) || put(1, 1 << 20) || wait(data, 2)) return 1;
  PCHECK(drains(s, 30), "wait for 2 puts did not return");
  PCHECK(landed(0, 0) && landed(1, 1 << 20), "the puts' bytes did not land at their offsets");
  std::printf("[rank %d] put+wait: 2 puts landed at their offsets from rank %d\n", rank, from);
  if (barrier()) return 1;

  // 2. Waits consume: two puts, two waits for one, then a third wait blocks.
  if (put(2, 0) || put(3, 1 << 20) || wait(data, 1) || wait(data, 1)) return 1;
  PCHECK(drains(s, 30), "two waits for one after two puts did not return");
  if (barrier()) return 1;
  if (wait(data, 1)) return 1;
  const bool blocked = !drains(s, 1.0);
  PCHECK(blocked, "a third wait for one returned after two puts: counts are not consumed by waits");
  if (barrier()) return 1;
  if (put(4, 2 << 20)) return 1;
  PCHECK(drains(s, 30), "the third put did not release the third wait");
  PCHECK(landed(4, 2 << 20), "the third put's bytes");
  std::printf("[rank %d] consumed counts: a third wait blocked until a third put\n", rank);
  if (barrier()) return 1;

  // 3. A signal on the credit communicator does not count on the data one.
  PNCCL(ncclSignal(to, 0, 0, 0, credit, s));
  if (wait(credit, 1)) return 1;
  PCHECK(drains(s, 30), "wait for a credit signal did not return");
  if (barrier()) return 1;
  PNCCL(ncclSignal(to, 0, 0, 0, credit, s));
  if (wait(data, 1)) return 1;
  PCHECK(!drains(s, 1.0), "a credit signal released a wait on the data communicator");
  if (barrier()) return 1;
  if (put(5, 3 << 20)) return 1;
  PCHECK(drains(s, 30), "the data put did not release the data wait");
  if (wait(credit, 1)) return 1;
  PCHECK(drains(s, 30), "the second credit was lost");
  std::printf("[rank %d] classes apart: a credit did not release a data wait\n", rank);
  if (barrier()) return 1;

  PNCCL(ncclCommWindowDeregister(data, win));
  PNCCL(ncclMemFree(window));
  PCUDA(cudaFree(src));
  PCUDA(cudaFree(one));
  PNCCL(ncclCommFinalize(credit));
  PNCCL(ncclCommDestroy(credit));
  PNCCL(ncclCommFinalize(data));
  PNCCL(ncclCommDestroy(data));
  std::printf("[rank %d] PASS\n", rank);
  return 0;
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int ranks = 1;
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--ranks") == 0 && i + 1 < argc) ranks = std::atoi(argv[++i]);
#if TIDE_HAVE_NCCL_RMA
  std::printf("tide_nccl_rma_probe: %d rank(s), NCCL headers %d\n", ranks, NCCL_VERSION_CODE);
  const int failed = tide::test::launchRanks(ranks, 180, [ranks](int rank, const ncclUniqueId& id) {
    return probe(rank, ranks, id);
  });
  std::printf("tide_nccl_rma_probe: %s\n", failed == 0 ? "PASS" : "FAIL");
  return failed == 0 ? 0 : 1;
#else
  (void)ranks;
  std::fprintf(stderr, "tide_nccl_rma_probe: RMA rails requested but built against NCCL headers older than 2.29\n");
  return 1;
#endif
}
