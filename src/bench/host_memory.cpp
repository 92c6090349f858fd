#include "bench/host_memory.hpp"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "fabric/small_file.hpp"

namespace tide::bench {
namespace {

// Files are read without iostreams: libtide's iostreams crashed in a process
// with another libstdc++ loaded (kv_store.cpp, fabric/small_file.hpp).
std::vector<std::string> linesOf(const std::string& path) {
  std::vector<std::string> lines;
  const std::optional<std::string> text = fabric::readSmallFile(path);
  if (!text) return lines;
  size_t at = 0;
  while (at < text->size()) {
    const size_t end = std::min(text->find('\n', at), text->size());
    lines.push_back(text->substr(at, end - at));
    at = end + 1;
  }
  return lines;
}

std::optional<int64_t> readNumber(const std::string& path) {
  const std::optional<std::string> word = fabric::firstWordOfFile(path);
  if (!word || *word == "max") return std::nullopt;  // cgroup v2 "max": no limit
  try {
    size_t used = 0;
    const long long v = std::stoll(*word, &used);
    if (used != word->size() || v < 0) return std::nullopt;
    return static_cast<int64_t>(v);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<int64_t> memAvailable(const std::string& root) {
  for (const std::string& line : linesOf(root + "/proc/meminfo")) {
    long long kib = 0;
    char unit[4] = {};
    if (std::sscanf(line.c_str(), "MemAvailable: %lld %3s", &kib, unit) == 2 && std::string(unit) == "kB" && kib >= 0)
      return static_cast<int64_t>(kib) * 1024;
  }
  return std::nullopt;
}

// The process's cgroup path (v2: the "0::" line of /proc/self/cgroup; v1: the memory controller's).
std::optional<int64_t> cgroupRoom(const std::string& root) {
  for (const std::string& line : linesOf(root + "/proc/self/cgroup")) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::optional<int64_t> limit, usage;
    if (controllers.empty()) {  // v2
      const std::string dir = root + "/sys/fs/cgroup" + path;
      limit = readNumber(dir + "/memory.max");
      usage = readNumber(dir + "/memory.current");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {  // v1
      const std::string dir = root + "/sys/fs/cgroup/memory" + path;
      limit = readNumber(dir + "/memory.limit_in_bytes");
      usage = readNumber(dir + "/memory.usage_in_bytes");
    }
    if (limit && usage) return std::max<int64_t>(0, *limit - *usage);
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> hostMemoryAvailable(const std::string& root) {
  const std::optional<int64_t> mem = memAvailable(root), room = cgroupRoom(root);
  if (mem && room) return std::min(*mem, *room);
  return mem ? mem : room;
}

}  // namespace tide::bench
