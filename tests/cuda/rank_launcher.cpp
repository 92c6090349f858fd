#include "rank_launcher.hpp"

#include <execinfo.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace tide::test {

namespace {

using Clock = std::chrono::steady_clock;

bool writeAll(int fd, const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool readAll(int fd, void* data, size_t n) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// A crash in a test process says where it happened: run under compute-sanitizer, a rank once died of
// signal 11 with nothing reported and its stdout (a file: fully buffered) lost with it (BENCHMARKS.md,
// session 55 run 3). So SIGSEGV, SIGBUS, SIGILL and SIGFPE print the stack to stderr (addresses with
// module offsets, for addr2line) before the default action ends the process with the same signal.
// SIGABRT is left alone: the fail-stop tests expect it, and abort()'s callers print their own
// message. A handler already in place (a tool's, inherited from the launcher) is kept: it may need
// the fault's own signal information.
void printStackThenDie(int sig) {
  static const char head[] = "test process: fatal signal, stack follows\n";
  (void)!write(STDERR_FILENO, head, sizeof(head) - 1);
  void* frames[64];
  backtrace_symbols_fd(frames, backtrace(frames, 64), STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

void reportCrashes() {
  void* warm[1];
  backtrace(warm, 1);  // loads the unwinder now: its first call may allocate, which a signal handler must not
  for (const int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) {
    struct sigaction present {};
    if (sigaction(sig, nullptr, &present) != 0 || present.sa_handler != SIG_DFL) continue;
    struct sigaction action {};
    action.sa_handler = printStackThenDie;
    sigemptyset(&action.sa_mask);
    sigaction(sig, &action, nullptr);
  }
}

// Pipes that carry rank 0's NCCL unique id to ranks 1..ranks-1 ([r] for rank r).
struct IdPipes {
  std::vector<int> readEnd, writeEnd;
  explicit IdPipes(int ranks) : readEnd(static_cast<size_t>(ranks), -1), writeEnd(static_cast<size_t>(ranks), -1) {}
  bool open() {
    for (size_t r = 1; r < readEnd.size(); ++r) {
      int fds[2];
      if (pipe(fds) != 0) return false;
      readEnd[r] = fds[0];
      writeEnd[r] = fds[1];
    }
    return true;
  }
  void closeAll() {
    for (size_t r = 1; r < readEnd.size(); ++r) {
      close(readEnd[r]);
      close(writeEnd[r]);
    }
  }
};

// Forks rank r: it takes (rank 0: makes) the unique id, runs body and exits
// with its return value; with stderrFd >= 0 its stderr goes there. Returns
// the child's pid (negative when fork failed).
pid_t forkRank(int r, int ranks, IdPipes& ids, int stderrFd,
               const std::function<int(int, const ncclUniqueId&)>& body) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the launcher
  if (stderrFd >= 0) dup2(stderrFd, STDERR_FILENO);
  reportCrashes();
  ncclUniqueId id{};
  if (r == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) _exit(3);
    for (int peer = 1; peer < ranks; ++peer)
      if (!writeAll(ids.writeEnd[static_cast<size_t>(peer)], &id, sizeof(id))) _exit(3);
  } else if (!readAll(ids.readEnd[static_cast<size_t>(r)], &id, sizeof(id))) {
    _exit(3);
  }
  std::fflush(stdout);
  const int rc = body(r, id);
  std::fflush(stdout);
  std::fflush(stderr);
  _exit(rc);
}

// How a reaped child ended (`status` from waitpid), `t0` its start.
void recordEnd(ChildOutcome& out, int status, Clock::time_point t0) {
  out.seconds = since(t0);
  out.exited = !out.timedOut && WIFEXITED(status);
  out.exitCode = out.exited ? WEXITSTATUS(status) : 0;
  out.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

// Reaps the ranks' processes (pids[r] < 0: never started, skipped) as they
// end, killing those still running after timeoutSeconds from t0; every 20 ms
// it calls tick(r) for each rank not yet reaped (tick may be empty), and
// onEnd(r, how) once per reaped rank.
void superviseRanks(const std::vector<pid_t>& pids, double timeoutSeconds, Clock::time_point t0,
                    const std::function<void(size_t)>& tick,
                    const std::function<void(size_t, const ChildOutcome&)>& onEnd) {
  std::vector<bool> reaped(pids.size(), false);
  for (size_t r = 0; r < pids.size(); ++r) reaped[r] = pids[r] < 0;
  size_t remaining = static_cast<size_t>(std::count(reaped.begin(), reaped.end(), false));
  while (remaining > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const bool late = since(t0) > timeoutSeconds;
    for (size_t r = 0; r < pids.size(); ++r) {
      if (reaped[r]) continue;
      if (tick) tick(r);
      ChildOutcome end;
      int status = 0;
      if (waitpid(pids[r], &status, WNOHANG) != pids[r]) {
        if (!late) continue;
        end.timedOut = true;
        kill(pids[r], SIGKILL);
        waitpid(pids[r], &status, 0);
      }
      reaped[r] = true;
      --remaining;
      recordEnd(end, status, t0);
      onEnd(r, end);
    }
  }
}

}  // namespace

int launchRanks(int ranks, double timeoutSeconds,
                const std::function<int(int, const ncclUniqueId&)>& body) {
  IdPipes ids(ranks);
  if (!ids.open()) return ranks;
  std::vector<pid_t> pids;
  for (int r = 0; r < ranks; ++r) {
    const pid_t pid = forkRank(r, ranks, ids, -1, body);
    if (pid < 0) return ranks;
    pids.push_back(pid);
  }
  ids.closeAll();
  int failed = 0;
  superviseRanks(pids, timeoutSeconds, Clock::now(), nullptr, [&](size_t r, const ChildOutcome& end) {
    if (end.exited && end.exitCode == 0) return;
    ++failed;
    if (end.timedOut)
      std::fprintf(stderr, "rank %zu: still running after %.0f s, killed\n", r, timeoutSeconds);
    else
      std::fprintf(stderr, "rank %zu: %s %d\n", r, end.exited ? "exit code" : "killed by signal",
                   end.exited ? end.exitCode : end.signal);
  });
  return failed;
}

ChildOutcome runCapturingStderr(double timeoutSeconds, const std::function<int()>& body) {
  ChildOutcome out;
  int fds[2];
  if (pipe(fds) != 0) return out;
  const auto t0 = Clock::now();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    reportCrashes();
    const int rc = body();
    std::fflush(stderr);
    _exit(rc);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  int status = 0;
  bool reaped = false;
  char buf[4096];
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    poll(&p, 1, 20);
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof(buf))) > 0) out.stderrText.append(buf, static_cast<size_t>(n));
    if (!reaped && waitpid(pid, &status, WNOHANG) == pid) reaped = true;
    if (reaped && n <= 0) break;
    if (!reaped && since(t0) > timeoutSeconds) {
      out.timedOut = true;
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      reaped = true;
    }
  }
  close(fds[0]);
  recordEnd(out, status, t0);
  return out;
}

std::vector<ChildOutcome> launchRanksCapturing(int ranks, double timeoutSeconds,
                                               const std::function<int(int, const ncclUniqueId&)>& body) {
  std::vector<ChildOutcome> out(static_cast<size_t>(ranks));
  IdPipes ids(ranks);
  if (!ids.open()) return out;  // every rank "not exited": failed
  std::vector<pid_t> pids(static_cast<size_t>(ranks), -1);
  std::vector<int> errRead(static_cast<size_t>(ranks), -1);
  const auto t0 = Clock::now();
  for (int r = 0; r < ranks; ++r) {
    int fds[2];
    if (pipe(fds) != 0) break;
    pids[static_cast<size_t>(r)] = forkRank(r, ranks, ids, fds[1], body);
    close(fds[1]);
    errRead[static_cast<size_t>(r)] = fds[0];
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
  }
  ids.closeAll();
  // Reads what rank r wrote so far; passes on its complete lines (all, at the end).
  std::vector<std::string> pending(static_cast<size_t>(ranks));
  auto drain = [&](size_t r, bool last) {
    char buf[4096];
    ssize_t n;
    while (errRead[r] >= 0 && (n = read(errRead[r], buf, sizeof(buf))) > 0) {
      out[r].stderrText.append(buf, static_cast<size_t>(n));
      pending[r].append(buf, static_cast<size_t>(n));
    }
    const size_t cut = last ? pending[r].size() : pending[r].rfind('\n') + 1;  // npos + 1 == 0
    if (cut > 0) {
      std::fwrite(pending[r].data(), 1, cut, stderr);
      pending[r].erase(0, cut);
    }
  };
  superviseRanks(pids, timeoutSeconds, t0, [&](size_t r) { drain(r, false); },
                 [&](size_t r, const ChildOutcome& end) {
                   std::string text = std::move(out[r].stderrText);
                   out[r] = end;
                   out[r].stderrText = std::move(text);
                 });
  for (size_t r = 0; r < pids.size(); ++r) {
    drain(r, true);
    if (errRead[r] >= 0) close(errRead[r]);
  }
  return out;
}

}  // namespace tide::test
