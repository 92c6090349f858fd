#include "fabric/host/kv_store.hpp"

#include "tide/fabric.hpp"

namespace tide::fabric::host {

void storeBarrier(KeyValueStore& store, const std::string& key, int participants,
                  double timeoutSeconds) {
  const std::string arrived = key + "/arrived";
  const std::string open = key + "/open";
  // The last to arrive opens the barrier: waiters then need one key, not a
  // polled counter.
  if (store.add(arrived, 1) == participants) store.set(open, "1");
  try {
    store.get(open, timeoutSeconds);
  } catch (const FabricError& e) {
    throw FabricError(FabricError::Kind::kTimeout,
                      "barrier '" + key + "': " + std::to_string(store.add(arrived, 0)) + " of " +
                          std::to_string(participants) + " arrived within " +
                          std::to_string(timeoutSeconds) + " s (" + e.what() + ")");
  }
}

}  // namespace tide::fabric::host
