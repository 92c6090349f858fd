// Whether the TIDE work of this process on a device could drain without more
// host work (the CUDA fabric's policy, without CUDA so that it is tested on CPUs). Some driver calls wait for the whole device context to idle:
// cudaGraphInstantiate did (an H200 with co-resident ranks, BENCHMARKS.md,
// session 12), as does a lazily loaded kernel's first launch. Made while a
// TIDE stream waits for a counter that only later host work sets (this
// thread's next enqueue, or a peer's that waits for it), such a call never
// returns. So they are made only where every TIDE endpoint of the process on
// that device has no watched wait outstanding and every queue it owns is idle.
#pragma once

#include <functional>

namespace tide::fabric {

class DeviceQuiescence {
 public:
  // true: the endpoint's work could drain by itself right now.
  using Probe = std::function<bool()>;
  static void enroll(int device, const void* owner, Probe probe);
  static void withdraw(const void* owner);
  // Every enrolled endpoint on `device` says so (checked in turn, not atomically:
  // the endpoints of a device are meant to be driven by one thread).
  static bool quiescent(int device);
};

}  // namespace tide::fabric
