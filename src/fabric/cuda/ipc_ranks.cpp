#include "fabric/cuda/ipc_ranks.hpp"

#include <cstring>
#include <string>
#include <utility>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/host_deadline.hpp"
#include "fabric/random_bits.hpp"

namespace tide::fabric::cuda {

IpcGroup::IpcGroup(host::KeyValueStore& store, std::string prefix, int rank, int ranks, int device,
                   double timeoutSeconds)
    : store_(store), prefix_(std::move(prefix)), rank_(rank), ranks_(ranks), device_(device), timeout_(timeoutSeconds) {
  if (ranks < 1 || rank < 0 || rank >= ranks || device < 0 || timeoutSeconds <= 0)
    throwUsage("IPC ranks: want 0 <= rank < ranks, a device ordinal and a positive deadline");
}

void IpcGroup::barrier(int rank) {
  if (rank != rank_) throwUsage("IPC ranks: this process is rank " + std::to_string(rank_));
  host::storeBarrier(store_, prefix_ + "/barrier/" + std::to_string(barriers_++), ranks_, timeout_);
}

std::vector<uint64_t> IpcGroup::gatherWords(int rank, const std::vector<uint64_t>& mine) {
  if (rank != rank_) throwUsage("IPC ranks: this process is rank " + std::to_string(rank_));
  // The host deadline of the other fabrics' exchanges (2 T + 10 s), not a wait's T.
  return host::storeAllGatherWords(store_, prefix_ + "/words/" + std::to_string(gathers_++), rank_, ranks_, mine,
                                   hostDeadlineSeconds(timeout_));
}

std::unique_ptr<DeviceArena> IpcGroup::makeArena(int rank, int64_t userBytes, int numCounters, cudaStream_t stream) {
  if (rank != rank_) throwUsage("IPC ranks: this process is rank " + std::to_string(rank_));
  return std::make_unique<IpcArena>(*this, rank, userBytes, numCounters, stream);
}

IpcArena::IpcArena(IpcGroup& group, int rank, int64_t userBytes, int numCounters, cudaStream_t stream)
    : DeviceArena(userBytes, numCounters, kDeviceMemoryAlign, group.timeoutSeconds()), rank_(rank) {
  allocateDeviceMemory();
  peers_.assign(static_cast<size_t>(group.ranks()), nullptr);
  try {
    // The tag nonce: drawn by rank 0 for this arena, read by the others after a barrier (so
    // never an earlier arena's under the same key) and before they write a tag.
    const std::string key = group.prefix() + "/arena/";
    if (rank == 0) group.store().set(key + "nonce", std::to_string(freshRandom64()));
    group.barrier(rank);
    initCountersAndTag(rank, std::stoull(group.store().get(key + "nonce", group.timeoutSeconds())), stream);
    cudaIpcMemHandle_t mine{};
    TIDE_CUDA_CHECK(cudaIpcGetMemHandle(&mine, base_));
    group.store().set(key + std::to_string(rank), std::string(reinterpret_cast<const char*>(&mine), sizeof mine));
    group.barrier(rank);  // every tag is written before anyone reads one
    for (int r = 0; r < group.ranks(); ++r) {
      if (r == rank) {
        peers_[static_cast<size_t>(r)] = base_;
        continue;
      }
      const std::string bytes = group.store().get(key + std::to_string(r), group.timeoutSeconds());
      if (bytes.size() != sizeof(cudaIpcMemHandle_t))
        throw FabricError(kDeviceErrorKind, "IPC ranks: rank " + std::to_string(rank) + ": rank " + std::to_string(r) +
                                                "'s arena handle has " + std::to_string(bytes.size()) + " bytes");
      cudaIpcMemHandle_t theirs{};
      std::memcpy(&theirs, bytes.data(), sizeof theirs);
      void* peer = nullptr;
      TIDE_CUDA_CHECK(cudaIpcOpenMemHandle(&peer, theirs, cudaIpcMemLazyEnablePeerAccess));
      peers_[static_cast<size_t>(r)] = static_cast<std::byte*>(peer);
    }
    verifyPeers(rank, stream);
  } catch (...) {
    release();
    throw;
  }
}

IpcArena::~IpcArena() { release(); }

void IpcArena::release() noexcept {
  // After a setup wait that timed out, a copy from a peer's mapping may still be queued: kept open.
  const bool keep = keepAfterTimeout();
  for (size_t r = 0; r < peers_.size() && !keep; ++r)
    if (peers_[r] != nullptr && static_cast<int>(r) != rank_) cudaIpcCloseMemHandle(peers_[r]);
  peers_.clear();
  freeDeviceMemory();
}

}  // namespace tide::fabric::cuda
