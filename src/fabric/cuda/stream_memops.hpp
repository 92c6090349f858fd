// Stream memory operations (cuStreamWriteValue64 / cuStreamWaitValue64),
// reached through the runtime's driver entry points so that the fabric does
// not link libcuda directly.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace tide::fabric::cuda {

class StreamMemOps {
 public:
  // Resolves the entry points once per process; throws if the driver lacks them.
  static const StreamMemOps& get();

  // After all earlier work on `stream`: *addr := value (with the default
  // memory barrier, so earlier copies are visible before the value).
  void write(cudaStream_t stream, uint64_t* addr, uint64_t value) const;
  // `stream` blocks until (int64)(*addr - value) >= 0.
  void waitGeq(cudaStream_t stream, const uint64_t* addr, uint64_t value) const;

 private:
  StreamMemOps();
  void* write_ = nullptr;
  void* wait_ = nullptr;
};

}  // namespace tide::fabric::cuda
