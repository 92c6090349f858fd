#include "fabric/host/shm_segment.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace tide::fabric::host {
namespace {

[[noreturn]] void throwError(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

std::byte* mapShared(int fd, size_t bytes, const std::string& name) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throwError(errno, "cannot map shared memory " + name);
  return static_cast<std::byte*>(p);
}

}  // namespace

ShmSegment::ShmSegment(std::string name, std::byte* data, size_t size)
    : name_(std::move(name)), data_(data), size_(size) {}

ShmSegment ShmSegment::create(const std::string& name, size_t bytes) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throwError(errno, "cannot create shared memory " + name);
  // posix_fallocate returns its error instead of setting errno.
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throwError(err, "cannot reserve " + std::to_string(bytes) + " bytes of shared memory for " + name +
                        " (is /dev/shm large enough?)");
  }
  std::byte* data = nullptr;
  try {
    data = mapShared(fd, bytes, name);
  } catch (...) {
    ::close(fd);
    ::shm_unlink(name.c_str());
    throw;
  }
  ::close(fd);  // the mapping keeps the object
  return ShmSegment(name, data, bytes);
}

ShmSegment ShmSegment::open(const std::string& name) {
  const int fd = ::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) throwError(errno, "cannot open shared memory " + name);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throwError(err, "cannot size shared memory " + name);
  }
  if (st.st_size <= 0) {
    // No call failed: errno would name whatever failed last.
    ::close(fd);
    throw std::runtime_error("shared memory " + name +
                             " has size 0: its creator has not sized it yet, or died before it did");
  }
  const auto bytes = static_cast<size_t>(st.st_size);
  std::byte* data = nullptr;
  try {
    data = mapShared(fd, bytes, name);
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  return ShmSegment(name, data, bytes);
}

bool ShmSegment::unlink(const std::string& name) noexcept {
  return ::shm_unlink(name.c_str()) == 0 || errno == ENOENT;
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    unmap();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

ShmSegment::~ShmSegment() { unmap(); }

void ShmSegment::unmap() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace tide::fabric::host
