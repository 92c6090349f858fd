// A deadline over a call that cannot be timed from inside: a collective
// setup call on a blocking NCCL communicator (the RMA rails' window
// registration and deregistration) returns only when every peer has made it,
// and a peer that never does would hang this rank forever. Nothing can
// release such a call, so past the deadline the process fails stop with a
// message naming the call, as the wait watchdog does for a blocked stream.
// Without CUDA, so that CPUs test it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "fabric/seconds_text.hpp"
#include "fabric/stall_monitor.hpp"

namespace tide::fabric {

// Runs call() and returns what it returns; if it has not returned within
// limitSeconds, writes "<who>: FATAL: <what> has not returned after N s
// (deadline T; <hint>): aborting the process (fail stop)." and aborts.
template <typename Call>
decltype(auto) callUnderFailStopDeadline(double limitSeconds, const std::string& who, const std::string& what,
                                         const std::string& hint, Call&& call) {
  StallMonitor monitor(limitSeconds, [&](double seconds) {
    std::fprintf(stderr, "%s: FATAL: %s has not returned after %.1f s (deadline %s; %s): aborting the process "
                 "(fail stop).\n",
                 who.c_str(), what.c_str(), seconds, secondsText(limitSeconds).c_str(), hint.c_str());
    std::fflush(stderr);
    std::abort();
  });
  monitor.enter();
  struct Leave {
    StallMonitor& m;
    ~Leave() { m.leave(); }
  } leave{monitor};
  return std::forward<Call>(call)();
}

}  // namespace tide::fabric
