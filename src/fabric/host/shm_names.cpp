#include "fabric/host/shm_names.hpp"

#include <sys/mman.h>  // shm_unlink
#include <sys/stat.h>
#include <unistd.h>  // geteuid

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

#include "fabric/host/shm_segment.hpp"
#include "fabric/process_liveness.hpp"

namespace tide::fabric::host {
namespace {

// Where Linux keeps the names of shm_open: the only way to find names nobody
// published.
constexpr char kShmDirectory[] = "/dev/shm";
constexpr std::string_view kNamePrefix = "tide-";

// A decimal as std::to_string writes it (no sign, no leading zero), at most `max`.
std::optional<int64_t> parseDecimal(std::string_view s, int64_t max) {
  if (s.empty() || (s.size() > 1 && s[0] == '0')) return std::nullopt;
  int64_t v = 0;
  const auto [end, err] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (err != std::errc() || end != s.data() + s.size() || v < 0 || v > max) return std::nullopt;
  return v;
}

struct SegmentName {
  std::string jobId;
  int rank = 0;
  pid_t pid = 0;
  uint64_t pidNamespace = 0;  // 0: not in the name
};

// `file` (a /dev/shm entry) parsed, only if shmSegmentName could have made it:
// a sweep must never take another program's object, nor a name whose pid it
// misread.
std::optional<SegmentName> parseSegmentName(std::string_view file) {
  if (!file.starts_with(kNamePrefix)) return std::nullopt;
  file.remove_prefix(kNamePrefix.size());
  if (file.size() < kJobIdChars + 1 || file[kJobIdChars] != '-') return std::nullopt;
  const std::string_view job = file.substr(0, kJobIdChars);
  if (!std::all_of(job.begin(), job.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    return std::nullopt;
  file.remove_prefix(kJobIdChars + 1);
  const size_t dash = file.find('-');
  if (dash == std::string_view::npos || file.substr(dash, 2) != "-p") return std::nullopt;
  const auto rank = parseDecimal(file.substr(0, dash), std::numeric_limits<int>::max());
  file.remove_prefix(dash + 2);
  const size_t nsDash = file.find('-');
  const auto pid = parseDecimal(file.substr(0, nsDash), std::numeric_limits<pid_t>::max());
  // pid 0 would make kill() ask about our own process group.
  if (!rank || !pid || *pid == 0) return std::nullopt;
  uint64_t pidNamespace = 0;
  if (nsDash != std::string_view::npos) {
    if (file.substr(nsDash, 2) != "-n") return std::nullopt;
    const auto ns = parseDecimal(file.substr(nsDash + 2), std::numeric_limits<int64_t>::max());
    if (!ns || *ns == 0) return std::nullopt;  // an unknown namespace is left out, never written as 0
    pidNamespace = static_cast<uint64_t>(*ns);
  }
  return SegmentName{std::string(job), static_cast<int>(*rank), static_cast<pid_t>(*pid), pidNamespace};
}

// EPERM: it exists, under another user.
double secondsSinceModified(const struct stat& st) {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
         1e-9 * static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec);
}

// Calls `visit(file, parsed)` for every entry of /dev/shm in the format of
// shmSegmentName. False if /dev/shm could not be listed (a missing one is no
// failure: no shared memory was ever made there).
template <typename Visit>
bool forEachSegmentName(Visit&& visit, std::error_code& ec) {
  namespace fs = std::filesystem;
  ec.clear();
  fs::directory_iterator it(kShmDirectory, ec);
  for (const fs::directory_iterator end; !ec && it != end; it.increment(ec)) {
    const std::string file = it->path().filename().string();
    if (const std::optional<SegmentName> name = parseSegmentName(file)) visit(file, *name);
  }
  if (ec == std::errc::no_such_file_or_directory) ec.clear();
  return !ec;
}

}  // namespace

uint64_t currentPidNamespace() noexcept {
  struct stat st {};
  // An nsfs inode fits in 63 bits; a larger one could not be parsed back from the name.
  if (::stat("/proc/self/ns/pid", &st) != 0 || st.st_ino > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return 0;
  return static_cast<uint64_t>(st.st_ino);
}

std::string shmSegmentName(const std::string& jobId, int rank, pid_t pid, uint64_t pidNamespace) {
  // Appended, not summed: GCC 12 warns of a bogus overlap (-Wrestrict) in the sum.
  std::string name = "/";
  name.append(kNamePrefix).append(jobId).append("-").append(std::to_string(rank)).append("-p");
  name.append(std::to_string(pid));
  if (pidNamespace != 0) name.append("-n").append(std::to_string(pidNamespace));
  return name;
}

int sweepSegmentsOfDeadProcesses(double unknownNamespaceMinAgeSeconds) noexcept {
  int removed = 0;
  try {
    const uid_t self = ::geteuid();
    const uint64_t ownNamespace = currentPidNamespace();
    std::error_code ec;
    forEachSegmentName(
        [&](const std::string& file, const SegmentName& name) {
          const std::string path = std::string(kShmDirectory) + "/" + file;
          struct stat st {};
          // Another user's names are none of ours (and /dev/shm's sticky bit would refuse us).
          if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != self) return;
          if (name.pidNamespace != 0) {
            // Another namespace's pid names some process of its own, or none: not ours to ask about.
            if (name.pidNamespace != ownNamespace) return;
          } else if (secondsSinceModified(st) < unknownNamespaceMinAgeSeconds) {
            return;
          }
          if (!processGone(name.pid)) return;
          if (::shm_unlink(("/" + file).c_str()) == 0) {
            ++removed;
            std::fprintf(stderr, "[tide] host fabric: removed %s left by process %d, which is gone\n", path.c_str(),
                         static_cast<int>(name.pid));
          } else if (errno != ENOENT) {  // ENOENT: another rank's sweep got there first
            std::fprintf(stderr, "[tide] host fabric: cannot remove %s left by process %d, which is gone: %s\n",
                         path.c_str(), static_cast<int>(name.pid), std::strerror(errno));
          }
        },
        ec);
    if (ec)
      std::fprintf(stderr, "[tide] host fabric: cannot look for segments of gone processes in %s: %s\n", kShmDirectory,
                   ec.message().c_str());
  } catch (...) {
    // Out of memory at worst: the leftovers wait for the next sweep.
  }
  return removed;
}

void unlinkNamesOfJob(const std::string& jobId, int ranks) noexcept {
  try {
    std::error_code ec;
    forEachSegmentName(
        [&](const std::string& file, const SegmentName& name) {
          if (name.jobId == jobId && name.rank < ranks) ShmSegment::unlink("/" + file);
        },
        ec);
  } catch (...) {
    // Out of memory at worst: what is left, a later bootstrap's sweep removes.
  }
}

}  // namespace tide::fabric::host
