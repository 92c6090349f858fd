// How much more host memory this process may take before the kernel's OOM
// killer stops it. With overcommit, a too-large allocation succeeds and the
// process is killed without a message when the pages are first touched, so
// a run that knows its need refuses up front instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tide::bench {

// The smallest of MemAvailable (/proc/meminfo) and what the process's memory
// cgroup still allows (v2 memory.max - memory.current, or v1
// memory.limit_in_bytes - memory.usage_in_bytes), in bytes; nullopt when
// none of them can be read. `root` prefixes the paths (tests).
std::optional<int64_t> hostMemoryAvailable(const std::string& root = "");

}  // namespace tide::bench
