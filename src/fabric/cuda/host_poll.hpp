// The host's wait for device work: poll a CUDA query under a deadline, so
// that a copy, kernel or peer that never finishes fails the wait with a
// message instead of hanging the caller. Shared by the endpoint's drains and
// the NCCL bootstrap's waits.
#pragma once

#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>

#include "fabric/cuda/cuda_check.hpp"
#include "fabric/seconds_text.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric::cuda {

// Returns once `query()` (cudaStreamQuery, cudaEventQuery, ...) gives
// cudaSuccess. `unfinished()` says what is awaited as a failure
// ("cuda fabric: rank 0: queue 3 did not drain"), made only on one: the
// query's error is thrown as `unfinished() (CUDA error ...)`, and once
// `limitSeconds` have passed a kTimeout FabricError says
// `unfinished() within N s` and `hint`. A query may throw for a failure
// seen elsewhere (NCCL's asynchronous errors). The first polls only yield,
// keeping short waits short; later ones sleep `backoff`, so a long wait
// leaves the core to others.
template <typename Query, typename Unfinished>
void pollUntilDone(Query&& query, double limitSeconds, std::chrono::microseconds backoff, Unfinished&& unfinished,
                   const std::string& hint = {}) {
  constexpr int kYieldingPolls = 1000;
  const auto start = std::chrono::steady_clock::now();
  for (int polls = 0;; ++polls) {
    const cudaError_t e = query();
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) {
      throw FabricError(kDeviceErrorKind, unfinished() + " (CUDA error " + cudaGetErrorName(e) + ": " +
                                              cudaGetErrorString(e) + ")");
    }
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > limitSeconds)
      throw FabricError(FabricError::Kind::kTimeout,
                        unfinished() + " within " + secondsText(limitSeconds) + hint);
    if (polls < kYieldingPolls) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(backoff);
    }
  }
}

// pollUntilDone over `stream` (the arena's and the LSA addresses' setup
// waits): its work done, or a FabricError naming unfinished() and saying the
// device is blocked.
template <typename Unfinished>
void pollStreamUntilDone(cudaStream_t stream, double limitSeconds, Unfinished&& unfinished) {
  pollUntilDone([stream] { return cudaStreamQuery(stream); }, limitSeconds, std::chrono::microseconds(200),
                std::forward<Unfinished>(unfinished), " (the device is blocked)");
}

}  // namespace tide::fabric::cuda
