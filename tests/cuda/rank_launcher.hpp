// Runs test ranks as forked processes, one per GPU, the way torchrun would:
// the parent touches no CUDA (forking after CUDA init is unsafe); rank 0 makes
// the NCCL unique id and hands it to the others through pipes.
#pragma once

#include <nccl.h>

#include <functional>
#include <string>

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

}  // namespace tide::test
