// The CUDA fabric's own injected faults, checked on any ranks that share
// counters: NCCL ranks on GPUs of their own (tide_cuda_fabric_test) or
// co-resident ranks on one GPU (tide_co_resident_test --faults). A fault the
// fabric injects must act where it says it does, be counted once
// (fabricFaultFirings), and leave the other operations as they were.
#pragma once

#include <string>

#include "check.hpp"
#include "fabric/cuda/cuda_endpoint.hpp"

namespace tide::test {

// Every rank sends three signals to the next rank with loseSignalAfter = 1:
// the second is dropped, counted once, and the first and third arrive.
// Collective (it ends at barriers); counters counterBase .. counterBase + 2
// must be unused and zero. Needs at least two ranks.
inline void checkLostSignal(fabric::cuda::CudaEndpoint& ep, int rank, int ranks, int counterBase) {
  const int next = (rank + 1) % ranks;
  const int prev = (rank + ranks - 1) % ranks;
  fabric::FabricFaults f;
  f.loseSignalAfter = 1;  // the second remote signal is dropped
  ep.setFabricFaults(f);
  ep.setCallContext("lost_signal#0");
  for (int i = 0; i < 3; ++i) ep.signal(1, next, counterBase + i, 1);
  ep.synchronizeAll();
  TCHECK(ep.fabricFaultFirings() == 1,
         "the dropped signal counted " + std::to_string(ep.fabricFaultFirings()) + " times (want 1)");
  ep.setFabricFaults(fabric::FabricFaults{});
  TCHECK(ep.fabricFaultFirings() == 0, "setFabricFaults did not reset the firing count");
  ep.barrier();
  TCHECK(ep.counterValue(counterBase) == 1, "first signal from rank " + std::to_string(prev));
  TCHECK(ep.counterValue(counterBase + 1) == 0, "dropped signal arrived");
  TCHECK(ep.counterValue(counterBase + 2) == 1, "third signal from rank " + std::to_string(prev));
  ep.barrier();
}

}  // namespace tide::test
