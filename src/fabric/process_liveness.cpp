#include "fabric/process_liveness.hpp"

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "fabric/small_file.hpp"

namespace tide::fabric {

namespace {

// The state letter of a /proc/.../stat line ('?' where unreadable): "pid (comm) state ...",
// where comm may hold spaces and parentheses.
char stateOf(const std::string& statPath) {
  const std::optional<std::string> stat = readSmallFile(statPath, 4096);
  if (!stat) return '?';
  const size_t paren = stat->rfind(')');
  return paren != std::string::npos && paren + 2 < stat->size() ? (*stat)[paren + 2] : '?';
}

bool exitedState(char state) { return state == 'Z' || state == 'X'; }

}  // namespace

bool processGone(int pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;  // EPERM: it runs, under another user
  const std::string proc = "/proc/" + std::to_string(pid);
  if (!exitedState(stateOf(proc + "/stat"))) return false;
  // The leader shows Z from the moment its own thread exits (pthread_exit in main), while the
  // process's other threads may still run: gone only when no thread of it is left running.
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(proc + "/task", ec)) {
    const char state = stateOf(task.path().string() + "/stat");
    if (state != '?' && !exitedState(state)) return false;
  }
  return true;
}

}  // namespace tide::fabric
