#include "fabric/host/file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <thread>

#include "fabric/random_bits.hpp"
#include "fabric/seconds_text.hpp"
#include "tide/fabric.hpp"

namespace tide::fabric::host {
namespace {

using Clock = std::chrono::steady_clock;

// Closes on scope exit (which also drops an flock held through it).
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

[[noreturn]] void throwErrno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

Clock::time_point deadlineAfter(double seconds) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

// Keys may hold any byte; file names get [A-Za-z0-9._-] as is and %XX for the rest.
std::string encodeKey(const std::string& key) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
        c == '-') {
      out += ch;
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (out.size() > 240)
    throw FabricError(FabricError::Kind::kUsage, "file store: key too long for a file name: '" + key + "'");
  return out;
}

// Polling back-off: quick for keys that appear at once, cheap for long waits.
void backOff(std::chrono::microseconds& pause) {
  std::this_thread::sleep_for(pause);
  pause = std::min(pause * 2, std::chrono::microseconds(5000));
}

}  // namespace

FileStore::FileStore(std::string directory, double lockTimeoutSeconds)
    : dir_(std::move(directory)), lockTimeoutSeconds_(lockTimeoutSeconds) {
  // A directory that cannot serve is the caller's input (a usage error), whatever the reason.
  if (dir_.empty()) throw FabricError(FabricError::Kind::kUsage, "file store: empty directory name");
  struct stat st {};
  if (::stat(dir_.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) throw FabricError(FabricError::Kind::kUsage, "file store: not a directory: " + dir_);
    return;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);  // with its parents
  if (ec)
    throw FabricError(FabricError::Kind::kUsage, "file store: cannot create " + dir_ + ": " + ec.message());
}

std::string FileStore::valuePath(const std::string& key) const { return dir_ + "/v_" + encodeKey(key); }
std::string FileStore::lockPath(const std::string& key) const { return dir_ + "/l_" + encodeKey(key); }

bool FileStore::tryRead(const std::string& path, std::string* value) const {
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return false;
    throwErrno("file store: cannot open " + path);
  }
  value->clear();
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throwErrno("file store: cannot read " + path);
    if (n == 0) return true;
    value->append(buf, static_cast<size_t>(n));
  }
}

void FileStore::writeAtomically(const std::string& path, const std::string& value) const {
  // Unique among this process's threads (counter) and among processes: the
  // pid alone is not, since writers in pid namespaces of their own (containers
  // sharing the directory, other hosts on a shared file system) may have equal
  // pids, and forked ones equal counters; so random bits too.
  static std::atomic<uint64_t> serial{0};
  std::string tmp = dir_ + "/.tmp-";
  tmp.append(std::to_string(::getpid())).append("-").append(std::to_string(serial.fetch_add(1)));
  tmp.append("-").append(std::to_string(freshRandom64()));
  {
    const FileDescriptor fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) throwErrno("file store: cannot create " + tmp);
    size_t done = 0;
    while (done < value.size()) {
      const ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        errno = err;
        throwErrno("file store: cannot write " + tmp);
      }
      done += static_cast<size_t>(n);
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    errno = err;
    throwErrno("file store: cannot rename " + tmp + " to " + path);
  }
}

void FileStore::set(const std::string& key, const std::string& value) { writeAtomically(valuePath(key), value); }

std::string FileStore::get(const std::string& key, double timeoutSeconds) {
  const std::string path = valuePath(key);
  const auto deadline = deadlineAfter(timeoutSeconds);
  std::chrono::microseconds pause(100);
  std::string value;
  while (!tryRead(path, &value)) {
    if (Clock::now() > deadline)
      throw FabricError(FabricError::Kind::kTimeout, "file store " + dir_ + ": timed out after " +
                                                          secondsText(timeoutSeconds) +
                                                          " waiting for key '" + key + "'");
    backOff(pause);
  }
  return value;
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  const std::string lock = lockPath(key);
  const FileDescriptor fd(::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (fd.get() < 0) throwErrno("file store: cannot open " + lock);
  const auto deadline = deadlineAfter(lockTimeoutSeconds_);
  std::chrono::microseconds pause(50);
  while (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) throwErrno("file store: cannot lock " + lock);
    if (Clock::now() > deadline)
      throw FabricError(FabricError::Kind::kTimeout, "file store " + dir_ + ": timed out after " +
                                                          secondsText(lockTimeoutSeconds_) +
                                                          " waiting for the lock of counter '" + key + "'");
    backOff(pause);
  }
  const std::string path = valuePath(key);
  std::string text;
  int64_t value = 0;
  if (tryRead(path, &text)) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size())
      throw FabricError(FabricError::Kind::kUsage,
                        "file store " + dir_ + ": key '" + key + "' holds '" + text + "', not a counter");
  }
  value += delta;
  writeAtomically(path, std::to_string(value));
  return value;  // the lock drops when fd closes
}

}  // namespace tide::fabric::host
