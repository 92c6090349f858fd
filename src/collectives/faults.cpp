#include "collectives/faults.hpp"

#include <stdexcept>

namespace tide::collectives {

const char* faultName(Fault f) {
  switch (f) {
    case Fault::kNone: return "none";
    case Fault::kDropCredit: return "drop-credit";
    case Fault::kSkipCompletionFence: return "skip-completion-fence";
    case Fault::kCallOrder: return "call-order";
    case Fault::kCorruptStagedChunk: return "corrupt-staged-chunk";
    case Fault::kStallPeer: return "stall-peer";
    case Fault::kSkipStaleZeroing: return "skip-stale-zeroing";
    case Fault::kReuseOutboxEarly: return "reuse-outbox-early";
    case Fault::kWrongLandingOffset: return "wrong-landing-offset";
    case Fault::kLoseSignal: return "lose-signal";
    case Fault::kDuplicatePut: return "duplicate-put";
    case Fault::kReleaseGradsEarly: return "release-grads-early";
  }
  return "unknown";
}

std::vector<Fault> allFaults() {
  std::vector<Fault> out;
  for (int i = 1; i <= static_cast<int>(Fault::kReleaseGradsEarly); ++i) out.push_back(static_cast<Fault>(i));
  return out;
}

Fault parseFault(const std::string& name) {
  if (name == "none") return Fault::kNone;
  for (Fault f : allFaults())
    if (name == faultName(f)) return f;
  throw std::invalid_argument("unknown fault '" + name + "'");
}

}  // namespace tide::collectives
