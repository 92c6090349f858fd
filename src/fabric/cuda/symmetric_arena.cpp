#include "fabric/cuda/symmetric_arena.hpp"

#include <string>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/cuda/kernels/lsa_pointers.hpp"

namespace tide::fabric::cuda {

SymmetricArena::SymmetricArena(NcclComms& comms, int64_t userBytes, int numCounters, cudaStream_t stream)
    : DeviceArena(userBytes, numCounters, NCCL_WIN_REQUIRED_ALIGNMENT, comms.deadlineSeconds()), comms_(comms) {
  try {
    void* ptr = nullptr;
    TIDE_NCCL_CHECK(ncclMemAlloc(&ptr, static_cast<size_t>(windowBytes_)));
    base_ = static_cast<std::byte*>(ptr);
    initCountersAndTag(comms_.rank(), comms_.idDigest(), stream);

    // Collective over this host's ranks (NcclComms::windowComm); the communicator is nonblocking,
    // so NCCL sets window_ once the registration is done.
    TIDE_NCCL_ISSUE(ncclCommWindowRegister(comms_.windowComm(), base_, static_cast<size_t>(windowBytes_),
                                           &window_, NCCL_WIN_COLL_SYMMETRIC));
    comms_.awaitComm(comms_.windowComm(),
                     "rank " + std::to_string(comms_.rank()) + ": registering the arena's symmetric window");
    if (!isSymmetricWindow(window_))
      throw FabricError(kDeviceErrorKind,
                        "cuda fabric: rank " + std::to_string(comms_.rank()) +
                            ": ncclCommWindowRegister returned no symmetric window (needs CUDA P2P "
                            "between all local ranks and NCCL_CUMEM_ENABLE=1)");

    peers_.assign(static_cast<size_t>(comms_.ranks()), nullptr);
    const LsaTeam& team = comms_.lsaTeam();
    std::vector<void*> lsa;
    try {
      lsa = resolveLsaBases(window_, team.size, stream, comms_.deadlineSeconds());
    } catch (const FabricError& e) {
      noteSetupTimeout(e);  // the kernel may still run: its memory is not freed below
      throw;
    }
    for (int i = 0; i < team.size; ++i) peers_[static_cast<size_t>(team.first + i)] = static_cast<std::byte*>(lsa[static_cast<size_t>(i)]);
    comms_.barrier();  // every tag is written before anyone reads one
    // Also proves that our LSA team is NCCL's.
    verifyPeers(comms_.rank(), stream);
    // NCCL's own LSA address is an alias of the arena in its flat mapping;
    // hand out the allocation itself for this rank.
    peers_[static_cast<size_t>(comms_.rank())] = base_;
  } catch (...) {
    comms_.markBroken();  // a registration or barrier may be outstanding
    comms_.abortIfBroken();  // before freeing the window's memory (nccl_bootstrap.hpp)
    release();
    throw;
  }
}

SymmetricArena::~SymmetricArena() { release(); }

void SymmetricArena::release() noexcept {
  cudaSetDevice(comms_.device());
  // A broken communicator is aborted next: no call on it that a gone peer would have to join.
  if (window_ != nullptr && !comms_.broken()) ncclCommWindowDeregister(comms_.windowComm(), window_);
  if (base_ != nullptr && !keepAfterTimeout()) ncclMemFree(base_);
  window_ = nullptr;
  base_ = nullptr;
}

}  // namespace tide::fabric::cuda
