// Runs test ranks as forked processes, one per GPU, the way torchrun would:
// the parent touches no CUDA (forking after CUDA init is unsafe); rank 0 makes
// the NCCL unique id and hands it to the others through pipes.
#pragma once

#include <nccl.h>

#include <functional>
#include <string>
#include <vector>

namespace tide::test {

// Child r runs body(r, id); its return value is its exit code. Returns the
// number of ranks that failed (crash, non-zero exit, or past the timeout).
int launchRanks(int ranks, double timeoutSeconds,
                const std::function<int(int rank, const ncclUniqueId& id)>& body);

struct ChildOutcome {
  bool exited = false;     // exited normally (else: signalled or timed out)
  int exitCode = 0;
  int signal = 0;
  bool timedOut = false;
  double seconds = 0;
  std::string stderrText;
};

// One forked child running `body` with its stderr captured.
ChildOutcome runCapturingStderr(double timeoutSeconds, const std::function<int()>& body);

// launchRanks with each rank's outcome and stderr (also passed on to this
// process's stderr line by line as it comes, so logs keep it), for a test
// that must tell how its ranks ended: e.g. a wait that a watchdog failed stop.
std::vector<ChildOutcome> launchRanksCapturing(int ranks, double timeoutSeconds,
                                               const std::function<int(int rank, const ncclUniqueId& id)>& body);

}  // namespace tide::test
