// Device-scoped setup (a kernel's shared-memory opt-in, loading the kernels)
// done once per CUDA device of the process: ranks of one process may drive
// several GPUs. Bit d of `done` stands for device d; two threads may both run
// the setup of one device, so it must be idempotent.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "fabric/cuda/cuda_check.hpp"

namespace tide::fabric::cuda::kernels {

template <class Setup>
void oncePerDevice(std::atomic<uint64_t>& done, Setup&& setup) {
  int device = 0;
  TIDE_CUDA_CHECK(cudaGetDevice(&device));
  // Past 64 devices no bit is free: the (idempotent) setup runs every time instead of being
  // skipped for a device whose bit another one set.
  if (device < 0 || device >= 64) return setup();
  const uint64_t bit = uint64_t{1} << device;
  if ((done.load() & bit) != 0) return;
  setup();
  done.fetch_or(bit);
}

}  // namespace tide::fabric::cuda::kernels
