#include "fabric/cuda/symmetric_arena.hpp"

#include <string>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/kernels/lsa_pointers.hpp"

namespace tide::fabric::cuda {

namespace {

constexpr int64_t kWindowAlign = NCCL_WIN_REQUIRED_ALIGNMENT;
constexpr uint64_t kTagMagic = 0x7469646541524e41ull;  // "tideARNA"

int64_t roundUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

uint64_t tagOf(int rank) { return kTagMagic ^ static_cast<uint64_t>(rank); }

}  // namespace

SymmetricArena::SymmetricArena(NcclComms& comms, int64_t userBytes, int numCounters,
                               cudaStream_t stream)
    : comms_(comms), userBytes_(userBytes), numCounters_(numCounters) {
  if (userBytes < 0 || numCounters < 1) throwUsage("arena size and counter count must be positive");
  counterOffset_ = roundUp(userBytes_, kWindowAlign);
  tagOffset_ = roundUp(counterOffset_ + 8 * static_cast<int64_t>(numCounters_), 256);
  windowBytes_ = roundUp(tagOffset_ + 64, kWindowAlign);
  try {
    void* ptr = nullptr;
    TIDE_NCCL_CHECK(ncclMemAlloc(&ptr, static_cast<size_t>(windowBytes_)));
    base_ = static_cast<std::byte*>(ptr);
    TIDE_CUDA_CHECK(cudaMemsetAsync(base_ + counterOffset_, 0, static_cast<size_t>(windowBytes_ - counterOffset_), stream));
    const uint64_t tag = tagOf(comms_.rank());
    TIDE_CUDA_CHECK(cudaMemcpyAsync(base_ + tagOffset_, &tag, sizeof(tag), cudaMemcpyHostToDevice, stream));
    TIDE_CUDA_CHECK(cudaStreamSynchronize(stream));

    TIDE_NCCL_CHECK(ncclCommWindowRegister(comms_.world(), base_, static_cast<size_t>(windowBytes_),
                                           &window_, NCCL_WIN_COLL_SYMMETRIC));
    if (!isSymmetricWindow(window_))
      throw FabricError(kDeviceErrorKind,
                        "cuda fabric: rank " + std::to_string(comms_.rank()) +
                            ": ncclCommWindowRegister returned no symmetric window (needs CUDA P2P "
                            "between all local ranks and NCCL_CUMEM_ENABLE=1)");

    peers_.assign(static_cast<size_t>(comms_.ranks()), nullptr);
    const LsaTeam& team = comms_.lsaTeam();
    const std::vector<void*> lsa = resolveLsaBases(window_, team.size, stream);
    for (int i = 0; i < team.size; ++i) peers_[static_cast<size_t>(team.first + i)] = static_cast<std::byte*>(lsa[static_cast<size_t>(i)]);
    comms_.barrier();  // every tag is written before anyone reads one
    verifyPeers(stream);
    // NCCL's own LSA address is an alias of the arena in its flat mapping;
    // hand out the allocation itself for this rank.
    peers_[static_cast<size_t>(comms_.rank())] = base_;
  } catch (...) {
    release();
    throw;
  }
}

SymmetricArena::~SymmetricArena() { release(); }

void SymmetricArena::release() noexcept {
  cudaSetDevice(comms_.device());
  if (window_ != nullptr) ncclCommWindowDeregister(comms_.world(), window_);
  if (base_ != nullptr) ncclMemFree(base_);
  window_ = nullptr;
  base_ = nullptr;
}

void SymmetricArena::verifyPeers(cudaStream_t stream) {
  // Read every reachable rank's tag (this one's too) through its LSA address:
  // proves the mapping, and that our LSA team is NCCL's, before any
  // collective trusts it.
  for (int r = 0; r < comms_.ranks(); ++r) {
    std::byte* peer = peers_[static_cast<size_t>(r)];
    if (peer == nullptr) continue;
    uint64_t tag = 0;
    TIDE_CUDA_CHECK(cudaMemcpyAsync(&tag, peer + tagOffset_, sizeof(tag), cudaMemcpyDeviceToHost, stream));
    TIDE_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (tag != tagOf(r))
      throw FabricError(kDeviceErrorKind, "cuda fabric: rank " + std::to_string(comms_.rank()) +
                                              ": peer address of rank " + std::to_string(r) +
                                              " does not reach that rank's arena");
  }
}

uint64_t* SymmetricArena::counter(int id) const {
  if (id < 0 || id >= numCounters_) throwUsage("counter id " + std::to_string(id) + " out of range");
  return reinterpret_cast<uint64_t*>(base_ + counterOffset_) + id;
}

uint64_t* SymmetricArena::peerCounter(int worldRank, int id) const {
  if (id < 0 || id >= numCounters_) throwUsage("counter id " + std::to_string(id) + " out of range");
  std::byte* peer = peers_[static_cast<size_t>(worldRank)];
  return peer == nullptr ? nullptr : reinterpret_cast<uint64_t*>(peer + counterOffset_) + id;
}

int SymmetricArena::reachablePeers() const {
  int n = 0;
  for (std::byte* p : peers_) n += p != nullptr ? 1 : 0;
  return n;
}

}  // namespace tide::fabric::cuda
