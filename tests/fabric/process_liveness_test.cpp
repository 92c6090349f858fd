// processGone against processes whose state the test controls: a running
// child, the same child once killed but not reaped (a zombie), and once
// reaped; this process itself.
#include "fabric/process_liveness.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

TEST(ProcessGone, PidOneIsNotGone) {
  // pid 1 runs for as long as this machine (or container) does. Not root, kill(1, 0)
  // fails with EPERM, which must not read as gone; as root, its state is read.
  EXPECT_FALSE(processGone(1));
}

}  // namespace
}  // namespace tide::fabric
