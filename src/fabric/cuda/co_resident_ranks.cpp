#include "fabric/cuda/co_resident_ranks.hpp"

#include <chrono>
#include <string>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/random_bits.hpp"
#include "fabric/seconds_text.hpp"

namespace tide::fabric::cuda {

CoResidentGroup::CoResidentGroup(int ranks, int device, double barrierTimeoutSeconds)
    : ranks_(ranks),
      device_(device),
      timeout_(barrierTimeoutSeconds),
      nonce_(freshRandom64()),
      bases_(static_cast<size_t>(ranks), nullptr),
      words_(static_cast<size_t>(ranks)) {
  if (ranks < 1 || device < 0 || barrierTimeoutSeconds <= 0)
    throwUsage("co-resident ranks: want at least one rank, a device ordinal and a positive barrier deadline");
  TIDE_CUDA_CHECK(cudaSetDevice(device));
  TIDE_CUDA_CHECK(cudaStreamCreateWithFlags(&control_, cudaStreamNonBlocking));
}

CoResidentGroup::~CoResidentGroup() {
  if (control_ != nullptr) cudaStreamDestroy(control_);
}

void CoResidentGroup::barrier(int rank) {
  std::unique_lock<std::mutex> lock(mu_);
  if (broken_)
    throw FabricError(FabricError::Kind::kPeerFailure,
                      "co-resident ranks: rank " + std::to_string(rank) + ": the group's barrier broke earlier");
  const uint64_t generation = generation_;
  if (++arrived_ == ranks_) {
    arrived_ = 0;
    ++generation_;
    cv_.notify_all();
    return;
  }
  // A barrier broken by another rank's deadline wakes this one too.
  if (!cv_.wait_for(lock, std::chrono::duration<double>(timeout_),
                    [&] { return generation_ != generation || broken_; })) {
    broken_ = true;
    cv_.notify_all();
    throw FabricError(FabricError::Kind::kTimeout,
                      "co-resident ranks: rank " + std::to_string(rank) + " waited " + secondsText(timeout_) +
                          " at a host barrier; " + std::to_string(arrived_) + " of " + std::to_string(ranks_) +
                          " ranks arrived");
  }
  if (broken_ && generation_ == generation)
    throw FabricError(FabricError::Kind::kPeerFailure,
                      "co-resident ranks: rank " + std::to_string(rank) + ": the group's barrier broke");
}

std::vector<std::byte*> CoResidentGroup::exchangeBases(int rank, std::byte* base) {
  if (rank < 0 || rank >= ranks_) throwUsage("co-resident ranks: rank " + std::to_string(rank) + " out of range");
  {
    std::lock_guard<std::mutex> lock(mu_);
    bases_[static_cast<size_t>(rank)] = base;
  }
  barrier(rank);
  std::lock_guard<std::mutex> lock(mu_);
  return bases_;
}

std::vector<uint64_t> CoResidentGroup::gatherWords(int rank, const std::vector<uint64_t>& mine) {
  if (rank < 0 || rank >= ranks_) throwUsage("co-resident ranks: rank " + std::to_string(rank) + " out of range");
  {
    std::lock_guard<std::mutex> lock(mu_);
    words_[static_cast<size_t>(rank)] = mine;
  }
  barrier(rank);  // every slot written
  std::vector<uint64_t> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& w : words_) {
      if (w.size() != mine.size())
        throwUsage("co-resident ranks: rank " + std::to_string(rank) + " gathers " + std::to_string(mine.size()) +
                   " words, another rank " + std::to_string(w.size()));
      all.insert(all.end(), w.begin(), w.end());
    }
  }
  barrier(rank);  // every slot read before a later gather writes one
  return all;
}

std::unique_ptr<DeviceArena> CoResidentGroup::makeArena(int rank, int64_t userBytes, int numCounters,
                                                        cudaStream_t stream) {
  return std::make_unique<CoResidentArena>(*this, rank, userBytes, numCounters, stream);
}

CoResidentArena::CoResidentArena(CoResidentGroup& group, int rank, int64_t userBytes, int numCounters,
                                 cudaStream_t stream)
    : DeviceArena(userBytes, numCounters, kDeviceMemoryAlign, group.timeoutSeconds()), group_(group) {
  allocateDeviceMemory();
  try {
    initCountersAndTag(rank, group.arenaNonce(), stream);
    peers_ = group.exchangeBases(rank, base_);  // every tag is written before anyone reads one
    verifyPeers(rank, stream);
  } catch (...) {
    release();
    throw;
  }
}

CoResidentArena::~CoResidentArena() { release(); }

void CoResidentArena::release() noexcept {
  // A peer's timed-out tag read may still be queued against this arena.
  if (setupTimedOut_) group_.noteArenaSetupTimeout();
  if (group_.arenaSetupTimedOut()) setupTimedOut_ = true;
  freeDeviceMemory();
}

}  // namespace tide::fabric::cuda
