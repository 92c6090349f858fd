// The key-value store that multi-process ranks bootstrap through: a directory
// here (file_store.hpp); torch.distributed's store once the Python layer plugs
// it in. Kept to the three operations every such store has.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tide::fabric::host {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;

  // Stores `value` (any bytes) under `key`, replacing an earlier value.
  // Readers see the whole value or none of it.
  virtual void set(const std::string& key, const std::string& value) = 0;

  // Blocks until `key` exists and returns its value. Past `timeoutSeconds`
  // throws FabricError(kTimeout) naming the store and the key.
  virtual std::string get(const std::string& key, double timeoutSeconds) = 0;

  // Atomically adds `delta` to the integer under `key` (absent: 0) and
  // returns the new value; get() of that key returns it as decimal text, as
  // torch.distributed's stores do. add(key, 0) reads a counter.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
};

// Returns once `participants` callers have arrived at barrier `key`; past
// `timeoutSeconds` throws FabricError(kTimeout) saying how many arrived.
// Each key serves one barrier: use a fresh key for every crossing.
void storeBarrier(KeyValueStore& store, const std::string& key, int participants,
                  double timeoutSeconds);

// Every rank's `mine` (the same length on every rank), rank-major: each rank
// publishes its words under `key`/<rank> and reads every other rank's. Past
// `timeoutSeconds` throws FabricError(kTimeout) naming the ranks whose words
// never came. Each key serves one gather: use a fresh key for every one.
std::vector<uint64_t> storeAllGatherWords(KeyValueStore& store, const std::string& key, int rank, int ranks,
                                          const std::vector<uint64_t>& mine, double timeoutSeconds);

}  // namespace tide::fabric::host
