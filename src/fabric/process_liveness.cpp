#include "fabric/process_liveness.hpp"

#include <signal.h>

#include <cerrno>
#include <optional>
#include <string>

#include "fabric/small_file.hpp"

namespace tide::fabric {

bool processGone(int pid) {
  if (::kill(pid, 0) != 0) return errno == ESRCH;  // EPERM: it runs, under another user
  const std::optional<std::string> stat = readSmallFile("/proc/" + std::to_string(pid) + "/stat", 4096);
  if (!stat) return false;
  const size_t paren = stat->rfind(')');  // "pid (comm) state ...": comm may hold spaces and parentheses
  return paren != std::string::npos && paren + 2 < stat->size() &&
         ((*stat)[paren + 2] == 'Z' || (*stat)[paren + 2] == 'X');
}

}  // namespace tide::fabric
