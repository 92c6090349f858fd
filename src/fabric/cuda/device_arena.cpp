#include "fabric/cuda/device_arena.hpp"

#include <cstdio>
#include <string>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/host_poll.hpp"

namespace tide::fabric::cuda {

namespace {

constexpr uint64_t kTagMagic = 0x7469646541524e41ull;  // "tideARNA"

int64_t roundUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// splitmix64's finalizer: nonces that differ in a few bits give unrelated tags.
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Distinct for the ranks of one communicator (they differ in the low bits only).
uint64_t tagOf(int rank, uint64_t nonce) { return kTagMagic ^ mix(nonce) ^ static_cast<uint64_t>(rank); }

}  // namespace

DeviceArena::DeviceArena(int64_t userBytes, int numCounters, int64_t align, double setupDeadlineSeconds)
    : setupDeadlineSeconds_(setupDeadlineSeconds), userBytes_(userBytes), numCounters_(numCounters) {
  if (userBytes < 0 || numCounters < 1) throwUsage("arena size and counter count must be positive");
  if (!(setupDeadlineSeconds > 0)) throwUsage("the arena's setup deadline must be positive");
  counterOffset_ = roundUp(userBytes_, align);
  tagOffset_ = roundUp(counterOffset_ + 8 * static_cast<int64_t>(numCounters_), 256);
  windowBytes_ = roundUp(tagOffset_ + 64, align);
}

void DeviceArena::allocateDeviceMemory() {
  void* ptr = nullptr;
  TIDE_CUDA_CHECK(cudaMalloc(&ptr, static_cast<size_t>(windowBytes_)));
  base_ = static_cast<std::byte*>(ptr);
}

void DeviceArena::freeDeviceMemory() noexcept {
  // A free would also wait for the whole device, blocked as it is.
  if (base_ != nullptr && !keepAfterTimeout()) cudaFree(base_);
  base_ = nullptr;
}

void DeviceArena::initCountersAndTag(int rank, uint64_t nonce, cudaStream_t stream) {
  nonce_ = nonce;
  // The whole window, not only the counters: the reduce-scatter's pull landing reads every local
  // GPU's inbox block, one without a contributor in a wave as zeros, and only keeps the inbox zero
  // from one call to the next (fresh device memory may hold an earlier allocation's bytes). Before
  // the barrier that follows, so no peer writes here first.
  uint64_t* tag = pinnedTagWord();  // allocated before anything is queued: cudaMallocHost may block
  TIDE_CUDA_CHECK(cudaMemsetAsync(base_, 0, static_cast<size_t>(windowBytes_), stream));
  // From pinned memory: a copy from pageable memory may wait inside the call for the stream's
  // earlier work (the whole-window memset, and co-resident ranks' work on a shared control
  // stream), where no deadline reaches; this one is only enqueued, and the wait below times it.
  *tag = tagOf(rank, nonce_);
  TIDE_CUDA_CHECK(cudaMemcpyAsync(base_ + tagOffset_, tag, sizeof(*tag), cudaMemcpyHostToDevice, stream));
  awaitSetup(rank, stream, "zeroing the arena and writing its tag");
}

uint64_t* DeviceArena::pinnedTagWord() const {
  if (pinnedTagWord_ == nullptr) {
    void* word = nullptr;
    TIDE_CUDA_CHECK(cudaMallocHost(&word, sizeof(uint64_t)));
    pinnedTagWord_ = static_cast<uint64_t*>(word);
  }
  return pinnedTagWord_;
}

void DeviceArena::awaitSetup(int rank, cudaStream_t stream, const std::string& what) const {
  try {
    pollStreamUntilDone(stream, setupDeadlineSeconds_,
                        [&] { return "cuda fabric: rank " + std::to_string(rank) + ": " + what + " did not finish"; });
  } catch (const FabricError& e) {
    noteSetupTimeout(e);
    throw;
  }
}

void DeviceArena::noteSetupTimeout(const FabricError& e) const noexcept {
  if (e.kind() == FabricError::Kind::kTimeout) setupTimedOut_ = true;
}

bool DeviceArena::keepAfterTimeout() const noexcept {
  if (setupTimedOut_ && !keptSaid_) {
    keptSaid_ = true;
    std::fprintf(stderr, "[tide cuda fabric] an arena whose setup timed out stays allocated, with its peers' "
                         "mappings, until the process exits (its setup's copies may still run)\n");
  }
  return setupTimedOut_;
}

DeviceArena::~DeviceArena() {
  // cudaFreeHost waits for the device as cudaFree does; after a setup timeout a
  // copy into the word may still be queued, so it is kept with the arena.
  if (pinnedTagWord_ != nullptr && !keepAfterTimeout()) cudaFreeHost(pinnedTagWord_);
}

void DeviceArena::verifyPeers(int rank, cudaStream_t stream) const {
  pinnedTagWord();  // (the copy of initCountersAndTag's tag from it has finished: awaited there)
  for (size_t r = 0; r < peers_.size(); ++r) {
    std::byte* peer = peers_[r];
    if (peer == nullptr) continue;
    // The word beside this rank's tag (the tag's 64 bytes hold 8): written by this rank only.
    std::byte* readBack = base_ + tagOffset_ + sizeof(uint64_t);
    *pinnedTagWord_ = ~tagOf(static_cast<int>(r), nonce_);  // a copy that never ran cannot pass
    TIDE_CUDA_CHECK(cudaMemcpyAsync(readBack, peer + tagOffset_, sizeof(uint64_t), cudaMemcpyDeviceToDevice, stream));
    TIDE_CUDA_CHECK(cudaMemcpyAsync(pinnedTagWord_, readBack, sizeof(uint64_t), cudaMemcpyDeviceToHost, stream));
    awaitSetup(rank, stream, "reading rank " + std::to_string(r) + "'s arena tag through its peer address");
    if (*pinnedTagWord_ != tagOf(static_cast<int>(r), nonce_))
      throw FabricError(kDeviceErrorKind, "cuda fabric: rank " + std::to_string(rank) + ": peer address of rank " +
                                              std::to_string(r) + " does not reach that rank's arena of this communicator");
  }
}

uint64_t* DeviceArena::counter(int id) const {
  if (id < 0 || id >= numCounters_) throwUsage("counter id " + std::to_string(id) + " out of range");
  return reinterpret_cast<uint64_t*>(base_ + counterOffset_) + id;
}

uint64_t* DeviceArena::peerCounter(int worldRank, int id) const {
  if (id < 0 || id >= numCounters_) throwUsage("counter id " + std::to_string(id) + " out of range");
  std::byte* peer = peers_[static_cast<size_t>(worldRank)];
  return peer == nullptr ? nullptr : reinterpret_cast<uint64_t*>(peer + counterOffset_) + id;
}

int DeviceArena::reachablePeers() const {
  int n = 0;
  for (std::byte* p : peers_) n += p != nullptr ? 1 : 0;
  return n;
}

}  // namespace tide::fabric::cuda
