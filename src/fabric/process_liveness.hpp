#pragma once
// Whether a peer rank's process still runs: the host fabric's gathers and
// waits name ranks whose process exited, and its segment sweep removes the
// shared memory of exited processes.

namespace tide::fabric {

// True if process `pid` has exited: no such process, or a zombie its parent
// has not reaped yet (a killed rank of a launcher still running). A zombie
// never touches its memory again, so both callers treat it as gone. A process
// whose main thread has exited while other threads run is not gone.
bool processGone(int pid);

}  // namespace tide::fabric
