// processGone against processes whose state the test controls: a running
// child, the same child once killed but not reaped (a zombie), and once
// reaped; a child whose main thread exited while another runs; this process
// itself.
#include "fabric/process_liveness.hpp"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

namespace tide::fabric {
namespace {

TEST(ProcessGone, RunningZombieAndReapedChild) {
  EXPECT_FALSE(processGone(static_cast<int>(::getpid())));
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    for (;;) ::pause();
  }
  EXPECT_FALSE(processGone(child)) << "a running child counted as gone";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);  // dead, not reaped
  ASSERT_EQ(::kill(child, 0), 0) << "the child was reaped already: no zombie to test";
  EXPECT_TRUE(processGone(child)) << "a zombie counted as running";
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(processGone(child)) << "a reaped child counted as running";
}

// The main thread leaves (as with pthread_exit) while another thread runs on: the
// leader's own state reads Z, yet the process lives.
TEST(ProcessGone, ProcessWhoseMainThreadExitedIsNotGone) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::thread([] {
      for (;;) ::pause();
    }).detach();
    // The exit system call ends this thread only; pthread_exit would unwind through gtest's catch-all.
    ::syscall(SYS_exit, 0);
  }
  // Until the leader's exit shows, the child is trivially alive: wait for it, then ask.
  const std::string stat = "/proc/" + std::to_string(child) + "/stat";
  const auto start = std::chrono::steady_clock::now();
  bool leaderExited = false;
  while (!leaderExited && std::chrono::steady_clock::now() - start < std::chrono::seconds(5)) {
    std::ifstream in(stat);
    const std::string line((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = line.rfind(')');
    leaderExited = paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
    if (!leaderExited) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_TRUE(leaderExited) << "the child's main thread never showed as exited";
  EXPECT_FALSE(processGone(child)) << "a process with a running thread counted as gone";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  ASSERT_EQ(::waitpid(child, nullptr, 0), child);
  EXPECT_TRUE(processGone(child));
}

TEST(ProcessGone, PidOneIsNotGone) {
  // pid 1 runs for as long as this machine (or container) does. Not root, kill(1, 0)
  // fails with EPERM, which must not read as gone; as root, its state is read.
  EXPECT_FALSE(processGone(1));
}

}  // namespace
}  // namespace tide::fabric
