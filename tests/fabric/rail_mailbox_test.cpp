// The host fabric's send/recv mailbox on its own: a group's sends reach their
// receivers in order; however a group ends, no receiver reads a send's source
// after it (undelivered sends are withdrawn, one being copied is awaited);
// a receive whose copy fails releases its message undelivered; a stopped
// receiver takes nothing.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fabric/host/rail_mailbox.hpp"

namespace tide::fabric::host {
namespace {

using Clock = std::chrono::steady_clock;
using Message = RailMailbox::Message;

constexpr double kWithdrawSeconds = 30.0;  // far beyond any wait these tests expect

auto never = [] { return false; };
auto always = [] { return true; };
auto noAnnounce = [](uint64_t) {};

RailMailbox::Deadline in(std::chrono::milliseconds ms) { return Clock::now() + ms; }
RailMailbox::Deadline far() { return Clock::now() + std::chrono::seconds(30); }

double secondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

TEST(RailMailbox, AGroupsSendsAreReceivedInOrderAndDelivered) {
  RailMailbox box(2);
  const std::vector<int> first{1, 2, 3}, second{4, 5};
  std::vector<uint64_t> announced;
  RailMailbox::GroupSends sends(box, 0, kWithdrawSeconds);
  sends.post(1, first.data(), 12, [&](uint64_t seq) { announced.push_back(seq); });
  sends.post(1, second.data(), 8, [&](uint64_t seq) { announced.push_back(seq); });
  EXPECT_EQ(announced, (std::vector<uint64_t>{1, 2}));
  for (const std::vector<int>* expected : {&first, &second}) {
    std::vector<int> landed(expected->size());
    EXPECT_TRUE(box.receive(0, 1, far(), never, [&](const Message& m) {
      ASSERT_EQ(m.bytes, static_cast<int64_t>(landed.size() * sizeof(int)));
      std::memcpy(landed.data(), m.src, static_cast<size_t>(m.bytes));
    }));
    EXPECT_EQ(landed, *expected);
  }
  for (const auto& m : sends.posted()) EXPECT_TRUE(box.awaitDelivery(*m, far(), never));
}

// The group gave up before its receiver came: the send is gone with it, so
// the late receiver finds nothing to read (its source is the caller's again).
TEST(RailMailbox, AGroupThatEndsWithdrawsItsUntakenSends) {
  RailMailbox box(2);
  const int source = 7;
  {
    RailMailbox::GroupSends sends(box, 0, kWithdrawSeconds);
    sends.post(1, &source, sizeof source, noAnnounce);
  }
  bool copied = false;
  EXPECT_FALSE(box.receive(0, 1, in(std::chrono::milliseconds(50)), never, [&](const Message&) { copied = true; }));
  EXPECT_FALSE(copied);
}

// A receiver that holds the send when its group ends is copying it: the
// group's end waits until that copy is over, whether the receive delivers
// the message or its copy fails.
TEST(RailMailbox, AGroupEndingWhileItsSendIsCopiedWaitsForTheCopy) {
  for (const bool copyFails : {false, true}) {
    RailMailbox box(2);
    const int source = 7;
    std::atomic<bool> copying{false}, copyOver{false};
    std::thread receiver;
    {
      RailMailbox::GroupSends sends(box, 0, kWithdrawSeconds);
      sends.post(1, &source, sizeof source, noAnnounce);
      receiver = std::thread([&] {
        try {
          box.receive(0, 1, far(), never, [&](const Message&) {
            copying = true;
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            copyOver = true;
            if (copyFails) throw std::runtime_error("copy failed");
          });
        } catch (const std::runtime_error&) {
        }
      });
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (!copying && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      if (!copying) ADD_FAILURE() << "the receiver's copy never started within 10 s";
    }
    EXPECT_TRUE(copyOver) << (copyFails ? "failing" : "delivering") << " copy: the group ended during it";
    receiver.join();
  }
}

// A failed copy passes its exception on and leaves the message released but
// undelivered: the sender sees no delivery, and its group ends without waiting.
TEST(RailMailbox, AReceiveWhoseCopyThrowsReleasesTheMessageUndelivered) {
  RailMailbox box(2);
  const int source = 7;
  const auto start = Clock::now();
  {
    RailMailbox::GroupSends sends(box, 0, kWithdrawSeconds);
    sends.post(1, &source, sizeof source, noAnnounce);
    EXPECT_THROW(box.receive(0, 1, far(), never, [](const Message&) { throw std::runtime_error("bad size"); }),
                 std::runtime_error);
    const Message& m = *sends.posted().front();
    EXPECT_TRUE(m.taken);
    EXPECT_TRUE(m.released);
    EXPECT_FALSE(m.delivered);
    EXPECT_FALSE(box.awaitDelivery(m, in(std::chrono::milliseconds(50)), never));
  }
  EXPECT_LT(secondsSince(start), 5.0) << "the group waited to withdraw a released send";
}

// Delivery releases the message too: the group ends at once, with nothing to
// withdraw and nothing reported.
TEST(RailMailbox, AGroupWhoseSendsWereDeliveredEndsAtOnce) {
  RailMailbox box(2);
  const int source = 7;
  const auto start = Clock::now();
  {
    RailMailbox::GroupSends sends(box, 0, kWithdrawSeconds);
    sends.post(1, &source, sizeof source, noAnnounce);
    int landed = 0;
    ASSERT_TRUE(box.receive(0, 1, far(), never, [&](const Message& m) { std::memcpy(&landed, m.src, sizeof landed); }));
    EXPECT_EQ(landed, 7);
    const Message& m = *sends.posted().front();
    EXPECT_TRUE(m.delivered);
    EXPECT_TRUE(m.released);
  }
  EXPECT_LT(secondsSince(start), 5.0);
}

// Once the job has failed a receiver takes nothing, even with messages
// queued (their senders may have given up); the message stays queued.
TEST(RailMailbox, AStoppedReceiverTakesNothing) {
  RailMailbox box(2);
  const int source = 7;
  RailMailbox::GroupSends sends(box, 0, kWithdrawSeconds);
  sends.post(1, &source, sizeof source, noAnnounce);
  bool copied = false;
  EXPECT_FALSE(box.receive(0, 1, far(), always, [&](const Message&) { copied = true; }));
  EXPECT_FALSE(copied);
  EXPECT_FALSE(sends.posted().front()->taken);
}

// A receiver waiting on an empty channel gets the message posted meanwhile;
// one whose deadline passes first gets nothing.
TEST(RailMailbox, AReceiverWaitsForTheSendUntilItsDeadline) {
  RailMailbox box(2);
  EXPECT_FALSE(box.receive(0, 1, in(std::chrono::milliseconds(50)), never, [](const Message&) {}));
  const int source = 7;
  RailMailbox::GroupSends sends(box, 0, kWithdrawSeconds);
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    sends.post(1, &source, sizeof source, noAnnounce);
  });
  int landed = 0;
  EXPECT_TRUE(box.receive(0, 1, far(), never, [&](const Message& m) { std::memcpy(&landed, m.src, sizeof landed); }));
  sender.join();
  EXPECT_EQ(landed, 7);
}

}  // namespace
}  // namespace tide::fabric::host
