// How long the host waits on a fabric's work that spans several in-queue
// waits or the peers' own start: bootstrap (every rank must arrive) and
// drains (a queue may hold a wait that ends only at its own deadline). Twice
// the wait deadline plus 10 s, so that a peer failing stop at its deadline is
// heard from first. Both fabrics use it; tests that time these deadlines
// state the same formula.
#pragma once

namespace tide::fabric {

inline double hostDeadlineSeconds(double waitSeconds) { return 2 * waitSeconds + 10; }

}  // namespace tide::fabric
