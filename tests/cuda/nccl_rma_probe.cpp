// The NCCL host RMA semantics that TIDE's RMA rails (src/fabric/cuda/rma_rails,
// src/fabric/rma_rendezvous) rely on, checked on the GPUs, one process per
// GPU, each rank putting to the next (one rank puts to itself):
//   1. ncclPutSignal lands its bytes in the peer's registered window at the
//      offset, and ncclWaitSignal(opCnt = n from a peer) returns once n puts
//      from that peer have landed;
//   2. waits consume counts: once earlier waits took every put's signal, a
//      wait for one more blocks;
//   3. ncclSignal on a second communicator is counted apart: it does not
//      release a wait on the first one.
// Found on NCCL 2.30.7 (session 7): both ends of a put must lie in a window
// registered with NCCL_WIN_COLL_SYMMETRIC, and a communicator's RMA
// operations run in issue order across streams (a put issued after a
// blocked wait of the same rank does not overtake it).
//
//   tide_nccl_rma_probe --ranks N     (env TIDE_PROBE_WIN_FLAGS: window flags, default symmetric)
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

#if TIDE_HAVE_NCCL_RMA
// (The probe's helpers: older headers leave the probe out, and unused they would fail -Werror.)
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

int probe(int rank, int ranks, const ncclUniqueId& id) {
  g_rank = rank;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // every line out before a hang or the _Exit
  PCUDA(cudaSetDevice(rank));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;
  config.numRmaCtx = 1;
  // As TIDE's RMA rail communicators (NcclComms::splitRails): one channel.
  config.minCTAs = 1;
  config.maxCTAs = 1;
  ncclComm_t data = nullptr, credit = nullptr;
  PNCCL(ncclCommInitRankConfig(&data, ranks, id, rank, &config));
  PNCCL(ncclCommSplit(data, 0, rank, &credit, &config));
  const int to = (rank + 1) % ranks, from = (rank + ranks - 1) % ranks;
  // One registered window: puts land in its first half and read their
  // sources from its second (NCCL wants both ends in a window).
  constexpr size_t kWindow = 8 << 20, kBytes = (256 << 10) + 12;
  const char* flagsEnv = std::getenv("TIDE_PROBE_WIN_FLAGS");
  const int winFlags = flagsEnv != nullptr ? std::atoi(flagsEnv) : NCCL_WIN_COLL_SYMMETRIC;
  void* window = nullptr;
  PNCCL(ncclMemAlloc(&window, kWindow));
  PCUDA(cudaMemset(window, 0xEE, kWindow));
  ncclWindow_t win = nullptr;
  PNCCL(ncclCommWindowRegister(data, window, kWindow, &win, winFlags));
  std::printf("[rank %d] window registered with flags %d\n", rank, winFlags);
  unsigned char* src = static_cast<unsigned char*>(window) + (4 << 20);
  int* one = nullptr;
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

  // 2. Two more puts, two waits for one each.
  if (put(2, 0) || put(3, 1 << 20) || wait(data, 1) || wait(data, 1)) return 1;
  PCHECK(drains(s, 30), "two waits for one after two puts did not return");
  PCHECK(landed(2, 0) && landed(3, 1 << 20), "the second pair of puts' bytes");
  if (barrier()) return 1;

  // 3. A signal on the second communicator, and a wait for it there.
  PNCCL(ncclSignal(to, 0, 0, 0, credit, s));
  if (wait(credit, 1)) return 1;
  PCHECK(drains(s, 30), "wait for a credit signal did not return");
  if (barrier()) return 1;

  // 4. Waits consume counts, and communicators count apart: after four puts
  // taken by earlier waits, one more credit signal, a wait for one more data
  // signal blocks (with counts that waits do not consume, 4 >= 1 would pass;
  // with one count for both communicators, the credit would release it).
  // Nothing can release it now (a communicator's RMA operations run in
  // issue order, whatever their stream), and neither tearing the
  // communicators down nor aborting them returns with it blocked: the probe
  // ends the process here, and the driver reclaims the context.
  PNCCL(ncclSignal(to, 0, 0, 0, credit, s));
  if (wait(data, 1)) return 1;
  PCHECK(!drains(s, 1.0), "a wait for a fifth data signal returned after four puts and a credit");
  std::printf("[rank %d] consumed counts, communicators apart: the fifth data wait blocks\n", rank);
  std::printf("[rank %d] PASS\n", rank);
  std::fflush(stdout);
  std::_Exit(0);  // the blocked stream cannot be drained
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
