// A KeyValueStore over a directory that every rank can reach (a local or
// shared file system). One file per key; writes land by rename, so a reader
// never sees half a value; counters are updated under flock, which the kernel
// releases when a holder dies, so a crashed rank cannot wedge the store.
#pragma once

#include <string>

#include "fabric/host/kv_store.hpp"

namespace tide::fabric::host {

class FileStore final : public KeyValueStore {
 public:
  // Creates `directory` if it is missing (not its parents). `lockTimeoutSeconds`
  // bounds add()'s wait for a counter's lock, the one wait with no deadline
  // of its own.
  explicit FileStore(std::string directory, double lockTimeoutSeconds = 30.0);

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, double timeoutSeconds) override;
  int64_t add(const std::string& key, int64_t delta) override;

  const std::string& directory() const { return dir_; }

 private:
  std::string valuePath(const std::string& key) const;
  std::string lockPath(const std::string& key) const;
  // Reads a value file; false if it does not exist (yet).
  bool tryRead(const std::string& path, std::string* value) const;
  void writeAtomically(const std::string& path, const std::string& value) const;

  std::string dir_;
  double lockTimeoutSeconds_;
};

}  // namespace tide::fabric::host
