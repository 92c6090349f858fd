// Whether the TIDE work of this process on a device could drain without more
// host work (the CUDA fabric's policy, without CUDA so that it is tested on CPUs). Some driver calls wait for the whole device context to idle:
// cudaGraphInstantiate did (an H200 with co-resident ranks, BENCHMARKS.md,
// session 12), as does a lazily loaded kernel's first launch. Made while a
// TIDE stream waits for a counter that only later host work sets (this
// thread's next enqueue, or a peer's that waits for it), such a call never
// returns. So they are made only where every TIDE endpoint of the process on
// that device has no watched wait outstanding and every queue it owns is idle.
//
// Endpoints of one device driven by several threads (co-resident ranks as
// threads) would let another thread enqueue such a wait between the check and
// the call. So every endpoint operation holds its device's gate shared, from
// before its first stream call until after it has registered what it
// enqueued; the check and the call hold it exclusively, and only ever try for
// it: an operation that waits on the host while it holds the gate (for a peer's
// credit) can then never deadlock against a build, which is simply left for a
// later call.
#pragma once

#include <functional>
#include <shared_mutex>

namespace tide::fabric {

class DeviceQuiescence {
 public:
  // true: the endpoint's work could drain by itself right now.
  using Probe = std::function<bool()>;
  static void enroll(int device, const void* owner, Probe probe);
  static void withdraw(const void* owner);
  // An endpoint whose teardown timed out leaves waits on its streams that may
  // never complete (destroying a stream does not cancel them): `device` is
  // never quiescent again in this process, so no later graph build there waits
  // for them without a deadline.
  static void markNeverDrains(int device);
  // Every enrolled endpoint on `device` says so (each probe asked in turn).
  static bool quiescent(int device);

  // The gate of `device`, held shared by each endpoint operation (see above).
  // Devices may share a gate (a fixed table): that only makes builds rarer.
  static std::shared_mutex& gate(int device);
  // Runs `call` only where no other thread is inside an operation on the
  // device (the gate taken exclusively, without waiting) and the device is
  // quiescent; returns whether it ran. The calling thread must not hold the
  // gate.
  static bool runIfQuiescent(int device, const std::function<void()>& call);
};

}  // namespace tide::fabric
