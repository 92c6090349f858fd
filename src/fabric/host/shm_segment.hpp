// One POSIX shared-memory object mapped into this process. The mapping lives
// as long as the ShmSegment; the name can be unlinked much earlier (the
// object stays alive while any process maps it), which is how the
// multi-process host fabric leaves nothing behind in /dev/shm after a crash.
#pragma once

#include <cstddef>
#include <string>

namespace tide::fabric::host {

class ShmSegment {
 public:
  ShmSegment() = default;
  // Creates `name` (which must not exist) with `bytes` zero bytes reserved up
  // front, so a full /dev/shm fails here with a message, not later with
  // SIGBUS on first touch.
  static ShmSegment create(const std::string& name, size_t bytes);
  // Maps an existing object whole.
  static ShmSegment open(const std::string& name);
  // Removes the name. False only on a real error: a missing name is fine
  // (another rank got there first). Never throws: it runs on error paths.
  static bool unlink(const std::string& name) noexcept;

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  ShmSegment(std::string name, std::byte* data, size_t size);
  void unmap();

  std::string name_;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace tide::fabric::host
