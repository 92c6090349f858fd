#include "fabric/small_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace tide::fabric {

std::optional<std::string> readSmallFile(const std::string& path, size_t maxBytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[4096];
  bool failed = false;
  while (out.size() < maxBytes) {
    const ssize_t got = ::read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) failed = true;
    if (got <= 0) break;
    out.append(buf, std::min(static_cast<size_t>(got), maxBytes - out.size()));
  }
  ::close(fd);
  if (failed) return std::nullopt;
  return out;
}

std::optional<std::string> firstWordOfFile(const std::string& path) {
  const std::optional<std::string> text = readSmallFile(path);
  if (!text) return std::nullopt;
  static constexpr const char* kSpace = " \t\r\n\v\f";
  const size_t begin = text->find_first_not_of(kSpace);
  if (begin == std::string::npos) return std::nullopt;
  return text->substr(begin, text->find_first_of(kSpace, begin) - begin);
}

}  // namespace tide::fabric
