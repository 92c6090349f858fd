#include "fabric/cuda/host_profile.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace tide::fabric::cuda {

HostProfile::HostProfile() {
  const char* v = std::getenv("TIDE_HOST_PROFILE");
  enabled_ = v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0;
}

void HostProfile::report(int rank) const {
  if (!enabled_) return;
  static constexpr const char* kNames[kCount] = {"copy", "copy_graph", "sum", "land", "zero", "rail_put",
                                                 "signal", "wait", "record", "wait_event"};
  std::fprintf(stderr, "[tide host profile] rank %d: %-10s %9s %9s %11s %9s %9s\n", rank, "op", "calls",
               "items", "total(us)", "us/call", "us/item");
  for (int op = 0; op < kCount; ++op) {
    if (calls_[op] == 0) continue;
    const double us = static_cast<double>(ns_[op]) / 1e3;
    std::fprintf(stderr, "[tide host profile] rank %d: %-10s %9lld %9lld %11.1f %9.2f %9.2f\n", rank, kNames[op],
                 static_cast<long long>(calls_[op]), static_cast<long long>(items_[op]), us,
                 us / static_cast<double>(calls_[op]),
                 items_[op] > 0 ? us / static_cast<double>(items_[op]) : 0.0);
  }
  std::fflush(stderr);
}

}  // namespace tide::fabric::cuda
