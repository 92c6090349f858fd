// Makes an endpoint's device current for a scope and gives the calling
// thread's back at its end. A thread may drive endpoints on several devices
// (or have torch's current device elsewhere): events, kernels, graphs and
// allocations must go to the endpoint's device, and the caller's choice of
// current device must survive the call.
#pragma once

#include <cuda_runtime.h>

namespace tide::fabric::cuda {

class DeviceScope {
 public:
  // Never throws (destructors use it too): should the switch fail, the CUDA
  // calls inside the scope fail with their own errors.
  explicit DeviceScope(int device) noexcept {
    if (cudaGetDevice(&previous_) == cudaSuccess && previous_ != device)
      switched_ = cudaSetDevice(device) == cudaSuccess;
  }
  DeviceScope(DeviceScope&& other) noexcept : previous_(other.previous_), switched_(other.switched_) {
    other.switched_ = false;
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;
  DeviceScope& operator=(DeviceScope&&) = delete;
  ~DeviceScope() {
    if (switched_) cudaSetDevice(previous_);
  }

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace tide::fabric::cuda
