// Host fabric life cycle: tearing a world down while waits, delays or stalls
// are pending, a delay or stall that ends once the job fails, and
// the job's first failure record shared by every rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "expect_usage_error.hpp"
#include "fabric/host/failure_record.hpp"
#include "fabric/host/host_fabric.hpp"
#include "fabric/host/host_kernels.hpp"

namespace tide::fabric::host {
namespace {

using Clock = std::chrono::steady_clock;

// Holds queue q of `ep` until its world goes (tear-down drops the tasks it never ran): an op that
// should have been refused but was let through then fails its test by being accepted, and is never
// run against memory outside an arena.
void holdQueue(Endpoint& ep, int q) { ep.delay(q, 60.0); }

// Waits that can never pass (counters nobody signals, and a queue waiting on
// such a queue's event) end as soon as the world goes, not at their deadline,
// and the tear-down neither hangs nor touches a queue it already destroyed
// (a task in waitCompleted() on a sibling queue must leave before that queue
// goes). Repeated: the old order failed only under some interleavings.
TEST(HostWorldTearDown, PendingWaitsEndPromptly) {
  HostOptions o;
  o.queues = 8;
  o.timeoutSeconds = 60.0;
  for (int round = 0; round < 60; ++round) {
    const auto start = Clock::now();
    {
      HostWorld world(plan::Topology::make(1, 2), 1 << 12, o);
      for (int r = 0; r < 2; ++r) {
        Endpoint& ep = world.endpoint(r);
        ep.wait(1, 0, 1, 1 - r, "a signal nobody sends");
        // A chain: queue q waits inside queue q-1's waitCompleted(), which waits on q-2's...
        for (int q = 2; q < o.queues; ++q) ep.waitEvent(q, q - 1, ep.record(q - 1));
      }
      // Let the queues start their waits before the world goes (some rounds not).
      if (round % 2 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(round % 8));
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_LT(seconds, 5.0) << "round " << round << ": tear-down waited for the waits' deadline";
  }
}

// An injected delay or stall far longer than any deadline holds its queue
// only until the world goes: tear-down does not sit it out.
TEST(HostWorldTearDown, LongDelaysAndStallsEndPromptly) {
  for (const bool stall : {false, true}) {
    const auto start = Clock::now();
    {
      HostWorld world(plan::Topology::make(1, 2), 1 << 12, HostOptions{});
      Endpoint& ep = world.endpoint(0);
      if (stall) {
        FabricFaults faults;
        faults.stallSeconds = 30.0;
        ep.setFabricFaults(faults);
        ep.zero(0, ep.arena(), 1);  // the queue stalls before this op
      } else {
        ep.delay(0, 30.0);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the queue is idling by now
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_LT(seconds, 5.0) << (stall ? "stall" : "delay") << ": tear-down waited for it to end";
  }
}

// Once the job has failed (here a peer's wait times out), a rank idling in a
// delay or stall gives up like any wait: its queue fails with a peer failure
// soon after, not when the idling would have ended.
TEST(HostWorldFailure, LongDelaysAndStallsEndOnceTheJobFails) {
  for (const bool stall : {false, true}) {
    HostOptions o;
    o.timeoutSeconds = 0.2;
    HostWorld world(plan::Topology::make(1, 2), 1 << 12, o);
    Endpoint& idler = world.endpoint(0);
    Endpoint& waiter = world.endpoint(1);
    const auto start = Clock::now();
    if (stall) {
      FabricFaults faults;
      faults.stallSeconds = 30.0;
      idler.setFabricFaults(faults);
      idler.zero(0, idler.arena(), 1);
    } else {
      idler.delay(0, 30.0);
    }
    waiter.wait(0, 0, 1, 0, "a signal nobody sends");
    try {
      waiter.synchronize(0);
      ADD_FAILURE() << "the wait for a signal nobody sends passed";
    } catch (const FabricError& e) {
      EXPECT_EQ(e.kind(), FabricError::Kind::kTimeout) << e.what();
    }
    try {
      idler.synchronize(0);
      ADD_FAILURE() << (stall ? "stall" : "delay") << ": ended without failing after the job failed";
    } catch (const FabricError& e) {
      EXPECT_EQ(e.kind(), FabricError::Kind::kPeerFailure) << e.what();
      EXPECT_NE(std::string(e.what()).find("ended early: stopped, a peer failed"), std::string::npos) << e.what();
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    EXPECT_LT(seconds, 5.0) << (stall ? "stall" : "delay") << ": ran on after the job failed";
  }
}

// A queue task that fails with an exception of its own (not a FabricError: a
// failed allocation, say) records the job's failure like a fabric error does:
// a peer waiting on that rank hears of it at once, with the task's message, not
// at its deadline, and the failing rank's own synchronize reports it.
TEST(HostWorldFailure, ATaskFailingWithAForeignErrorFailsTheJob) {
  HostOptions o;
  o.timeoutSeconds = 30.0;  // far beyond the 5 s the test allows: only the failure record ends the wait
  HostWorld world(plan::Topology::make(1, 2), 1 << 12, o);
  Endpoint& failing = world.endpoint(0);
  Endpoint& waiter = world.endpoint(1);
  FabricFaults faults;
  faults.failTaskAfter = 1;  // the second task: the first one runs
  failing.setFabricFaults(faults);
  std::memset(failing.arena(), 0x5a, 8);
  failing.zero(0, failing.arena(), 4);
  failing.zero(0, failing.arena() + 4, 4);
  const auto start = Clock::now();
  waiter.wait(0, 0, 1, 0, "a signal the failing rank never sends");
  try {
    waiter.synchronize(0);
    ADD_FAILURE() << "the wait on a failed rank passed";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kPeerFailure) << e.what();
    EXPECT_NE(std::string(e.what()).find("rank 0: a queue task failed: an injected task failure"), std::string::npos)
        << e.what();
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "the peer waited for its deadline instead of the failure record";
  try {
    failing.synchronize(0);
    ADD_FAILURE() << "the failing rank's synchronize passed";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("an injected task failure"), std::string::npos) << e.what();
  }
  EXPECT_EQ(failing.fabricFaultFirings(), 1);
  const std::vector<std::byte> zeroed(failing.arena(), failing.arena() + 4);
  EXPECT_EQ(zeroed, std::vector<std::byte>(4, std::byte{0})) << "the task before the failing one did not run";
  EXPECT_EQ(static_cast<unsigned char>(failing.arena()[4]), 0x5a) << "the failing task ran";
}

// A queue whose task waits for a phase of another queue (waitEvent) finishes
// nothing while that phase runs: a host wait on it once failed the job when
// the phase, progressing task by task, outlasted the stall limit (2 T + 1 s).
// Progress of any queue now counts; a single task that outlasts the limit
// with nothing else finishing is still a stall, reported with the call.
TEST(HostWorldProgress, AWaitOnALongProgressingPhaseIsNoStall) {
  HostOptions o;
  o.timeoutSeconds = 0.1;  // stall limit 1.2 s
  HostWorld world(plan::Topology::make(1, 1), 1 << 12, o);
  Endpoint& ep = world.endpoint(0);
  ep.setCallContext("long_phase#1");
  for (int i = 0; i < 20; ++i) ep.delay(1, 0.1);  // 2 s of phase, a task every 0.1 s
  const uint64_t phaseEnd = ep.record(1);
  ep.waitEvent(0, 1, phaseEnd);
  const uint64_t after = ep.record(0);
  const auto start = Clock::now();
  EXPECT_NO_THROW(ep.synchronizeEvent(0, after));
  EXPECT_NO_THROW(ep.synchronize(0));
  EXPECT_GE(std::chrono::duration<double>(Clock::now() - start).count(), 1.9);

  ep.setCallContext("one_long_task#2");
  ep.delay(0, 3.0);  // one task past the limit, nothing else finishing
  try {
    ep.synchronize(0);
    ADD_FAILURE() << "a queue that finished nothing for 3 s passed";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kTimeout) << e.what();
    const std::string what = e.what();
    EXPECT_NE(what.find("no task of any queue finished within 1.2 s"), std::string::npos) << what;
    EXPECT_NE(what.find("(in one_long_task#2)"), std::string::npos) << what;
  }
}

// Two-sided rails: a send whose group gave up (its receiver came too late)
// is withdrawn with it. Its source is the caller's again once the caller hears
// of the failure (here it is reused at once), so a receiver that comes later
// must not copy from it: it stops on the job's failure instead, and its
// arena keeps what it held.
TEST(HostWorldRails, ALateReceiverNeverReadsAFailedSendsSource) {
  HostOptions o;
  o.rails = HostRails::kSendRecv;
  o.timeoutSeconds = 0.2;
  HostWorld world(plan::Topology::make(2, 1), 1 << 12, o);
  Endpoint& sender = world.endpoint(0);
  Endpoint& receiver = world.endpoint(1);
  std::vector<std::byte> source(64, std::byte{1});
  receiver.delay(0, 0.8);  // the receive comes long after the send's deadline
  receiver.railRecv(0, 0, 0, 64, 5, 1);
  receiver.record(0);  // ends the rail group: it is issued
  sender.railPut(0, 1, 0, source.data(), 64, -1, 0);
  EXPECT_THROW(sender.synchronize(0), FabricError);
  std::fill(source.begin(), source.end(), std::byte{0xEE});  // the caller reuses its buffer
  try {
    receiver.synchronize(0);
    ADD_FAILURE() << "the late receive completed after its send had failed";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kPeerFailure) << e.what();
  }
  EXPECT_EQ(receiver.arena()[0], std::byte{0}) << "the receiver copied from the failed send's source";
  EXPECT_EQ(receiver.counterValue(5), 0u);
}

// A copy or zeroing that starts in a rank's arena and runs past its end is
// refused when issued (a usage error naming the arena and the overrun), not
// written into whatever the heap holds next; ranges inside an arena, and
// memory outside every arena (the caller's), go through.
TEST(HostWorldArenas, RangesRunningPastAnArenaAreRefused) {
  constexpr int64_t kArena = 1 << 12;
  HostWorld world(plan::Topology::make(1, 2), kArena, HostOptions{});
  Endpoint& ep = world.endpoint(0);
  std::byte* mine = ep.arena();
  std::byte* peer = ep.peerArena(1);
  // Distinct bytes both ways: into the peer arena's last 64 bytes, and back out of this arena's.
  std::vector<std::byte> user(64), back(64, std::byte{0xA5});
  for (size_t i = 0; i < user.size(); ++i) user[i] = static_cast<std::byte>(0x31 + 3 * i);
  for (int64_t i = 0; i < 64; ++i) mine[kArena - 64 + i] = static_cast<std::byte>(0xC0 ^ i);
  ep.copy(0, {CopyOp{peer + kArena - 64, user.data(), 64, 1, 0, 0}});   // ends at the peer arena's end
  ep.copy(0, {CopyOp{back.data(), mine + kArena - 64, 64, 1, 0, 0}});
  ep.synchronizeAll();
  EXPECT_EQ(0, std::memcmp(peer + kArena - 64, user.data(), 64)) << "the copy into the peer arena's end";
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_EQ(back[static_cast<size_t>(i)], static_cast<std::byte>(0xC0 ^ i)) << "byte " << i << " read back";
  auto refused = [&](auto&& issue, const std::string& words) {
    try {
      issue();
      ADD_FAILURE() << "not refused: " << words;
    } catch (const FabricError& e) {
      EXPECT_EQ(e.kind(), FabricError::Kind::kUsage);
      EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    }
  };
  refused([&] { ep.copy(0, {CopyOp{peer + kArena - 63, user.data(), 64, 1, 0, 0}}); },
          "copy destination at offset 4033 of rank 1's arena runs 1 byte(s) past its end");
  refused([&] { ep.copy(0, {CopyOp{user.data(), mine + 100, 32, 2, kArena - 120, 32}}); },
          "copy source at offset 100 of rank 0's arena runs");
  refused([&] { ep.zero(0, mine + kArena - 8, 9); }, "zeroed range");
  // Negative extents, refused at issue (they once reached memmove and memset as huge sizes: a crash).
  refused([&] { ep.zero(0, mine, -1); }, "zeroing -1 bytes (negative)");
  refused([&] { ep.copy(0, {CopyOp{mine, user.data(), -16, 1, 0, 0}}); }, "copy of width -16 and 1 rows");
  refused([&] { ep.copy(0, {CopyOp{mine, user.data(), 16, -2, 16, 16}}); }, "and -2 rows: the width may not be");
  // What the CUDA fabric refuses too: a copy of no rows, and a null address where there are bytes.
  refused([&] { ep.copy(0, {CopyOp{mine, user.data(), 16, 0, 16, 16}}); }, "and 0 rows: the width may not be");
  refused([&] { ep.copy(0, {CopyOp{nullptr, user.data(), 16, 1, 0, 0}}); }, "copy of width 16 with a null destination");
  refused([&] { ep.copy(0, {CopyOp{mine, nullptr, 16, 1, 0, 0}}); }, "copy of width 16 with a null source");
  ep.synchronizeAll();
}

// One copy call whose ops meet where one writes (fabric/copy_batch_overlap)
// is refused when issued, with nothing copied: on GPUs its ops run in any
// order, here one after another, so CPU runs would pass what GPUs garble.
TEST(HostWorldArenas, CopyBatchesWhoseOpsMeetAreRefused) {
  HostWorld world(plan::Topology::make(1, 2), 1 << 12, HostOptions{});
  Endpoint& ep = world.endpoint(0);
  std::byte* a = ep.arena();
  std::memset(a, 0x11, 256);
  std::memset(a + 1024, 0x22, 256);
  try {
    ep.copy(0, {CopyOp{a + 1024, a, 128, 1, 0, 0}, CopyOp{a + 512, a + 1100, 64, 1, 0, 0}});
    ADD_FAILURE() << "a batch that reads what it writes was not refused";
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kUsage);
    EXPECT_NE(std::string(e.what()).find("rank 0: copy of 2 ops: op 0 writes row 0"), std::string::npos) << e.what();
  }
  ep.synchronizeAll();
  EXPECT_EQ(a[1024], std::byte{0x22}) << "a refused batch wrote";
  ep.copy(0, {CopyOp{a + 1024, a, 128, 1, 0, 0}, CopyOp{a + 512, a + 1200, 56, 1, 0, 0}});  // disjoint: runs
  ep.synchronizeAll();
  EXPECT_EQ(a[1024], std::byte{0x11});
}

// A rail transfer's offset and size are checked against the arena without
// their sum, which can wrap: such a put is refused, not written far outside
// the peer's arena.
TEST(HostWorldArenas, RailRangesWhoseEndWrapsAreRefused) {
  for (const HostRails rails : {HostRails::kPut, HostRails::kSendRecv}) {
    HostOptions o;
    o.rails = rails;
    HostWorld world(plan::Topology::make(2, 1), 1 << 12, o);
    Endpoint& ep = world.endpoint(0);
    std::vector<std::byte> user(64);
    const int64_t huge = std::numeric_limits<int64_t>::max() - 1;
    EXPECT_THROW(ep.railPut(0, 1, huge, user.data(), 64, -1, 0), FabricError) << hostRailsName(rails);
    EXPECT_THROW(ep.railPut(0, 1, 64, user.data(), huge, -1, 0), FabricError) << hostRailsName(rails);
    if (rails == HostRails::kSendRecv) {
      EXPECT_THROW(ep.railRecv(0, 1, huge, 64, -1, 0), FabricError) << hostRailsName(rails);
    }
    ep.discardDeferredRails();
  }
  HostWorld world(plan::Topology::make(1, 2), 1 << 12, HostOptions{});
  Endpoint& ep = world.endpoint(0);
  std::vector<std::byte> user(64);
  const int64_t huge = std::numeric_limits<int64_t>::max() - 1;
  EXPECT_THROW(ep.copy(0, {CopyOp{ep.peerArena(1) + 100, user.data(), huge, 1, 0, 0}}), FabricError);
  EXPECT_THROW(ep.copy(0, {CopyOp{ep.peerArena(1) + 100, user.data(), 64, 3, 64, huge / 2}}), FabricError);
  EXPECT_THROW(ep.zero(0, ep.arena() + 8, huge), FabricError);
}

// A strided copy's pitches are at least its width, as cudaMemcpy2D requires
// (the CUDA fabric refuses the rest too). A negative or smaller pitch once
// passed the arena check, which bounded only the span's end: a destination
// pitch of -16 wrote 16 bytes before the arena. A flat copy (one row) ignores
// its pitches.
TEST(HostWorldArenas, CopyPitchesBelowTheWidthAreRefused) {
  HostWorld world(plan::Topology::make(1, 1), 1 << 12, HostOptions{});
  Endpoint& ep = world.endpoint(0);
  std::byte* a = ep.arena();
  std::vector<std::byte> user(64);
  for (size_t i = 0; i < user.size(); ++i) user[i] = static_cast<std::byte>(i + 1);
  holdQueue(ep, 0);
  expectUsageError([&] { ep.copy(0, {CopyOp{a, user.data(), 8, 2, 8, -16}}); },
                "rank 0: strided copy of 2 rows of 8 bytes with source pitch 8 and destination pitch -16");
  expectUsageError([&] { ep.copy(0, {CopyOp{a, user.data(), 8, 2, 8, 4}}); }, "destination pitch 4");  // rows overlap
  expectUsageError([&] { ep.copy(0, {CopyOp{user.data(), a + 64, 8, 2, -64, 8}}); }, "source pitch -64");
  expectUsageError([&] { ep.copy(0, {CopyOp{a, user.data(), 8, 2, 0, 8}}); }, "source pitch 0");
  ep.copy(1, {CopyOp{a + 256, user.data(), 8, 1, -5, -7}});  // flat: its pitches are unused
  ep.copy(1, {CopyOp{a + 512, user.data(), 8, 2, 8, 16}});
  ep.synchronize(1);
  EXPECT_EQ(0, std::memcmp(a + 256, user.data(), 8));
  EXPECT_EQ(0, std::memcmp(a + 512, user.data(), 8));
  EXPECT_EQ(0, std::memcmp(a + 528, user.data() + 8, 8));
}

// A rail put's source is bounded like a copy's, in every rails mode: one that
// starts in an arena and runs past its end was read past it (the destination
// alone was checked; RMA rails refused it, for lying outside the window). A
// list of puts is checked whole before any piece of it is issued, as the
// CUDA fabric's copy-engine rails check theirs.
TEST(HostWorldArenas, RailPutSourcesRunningPastAnArenaAreRefused) {
  constexpr int64_t kArena = 1 << 12;
  for (const HostRails rails : {HostRails::kPut, HostRails::kSendRecv, HostRails::kRma}) {
    SCOPED_TRACE(hostRailsName(rails));
    HostOptions o;
    o.rails = rails;
    HostWorld world(plan::Topology::make(2, 1), kArena, o);
    Endpoint& ep = world.endpoint(0);
    holdQueue(ep, 0);
    expectUsageError([&] { ep.railPut(0, 1, 0, ep.arena() + 4000, 4096, -1, 0); },
                  "rank 0: rail put source at offset 4000 of rank 0's arena runs 4000 byte(s) past its end");
    const std::vector<Endpoint::RailPiece> pieces = {{0, ep.arena(), 64}, {64, ep.arena() + kArena - 32, 64}};
    expectUsageError([&] { ep.railPuts(0, 1, pieces, -1, 0); },
                  "rail put source at offset 4064 of rank 0's arena runs 32 byte(s) past its end");
    // Pieces onto overlapping bytes: a batch the CUDA fabric would run in any order.
    const std::vector<Endpoint::RailPiece> onto = {{128, ep.arena(), 64}, {0, ep.arena() + 64, 64},
                                                   {160, ep.arena() + 128, 8}};
    expectUsageError([&] { ep.railPuts(0, 1, onto, -1, 0); },
                     "rank 0: rail puts to rank 1 onto overlapping bytes: pieces 0 [128, 192) and 2 [160, 168) of its arena");
    EXPECT_EQ(ep.stats().railPuts, 0) << "a refused list left a piece issued";
    ep.discardDeferredRails();
  }
}

// Sums and landings are bounded like copies: each piece's destination rows
// and what each source row reads (its valid elements, not the piece's width),
// a landing's destination and sources; a source's valid counts are one per
// row (the CUDA fabric's rule; fewer were read past their end). A
// destination whose rows go down (a negative pitch) is bounded below too.
TEST(HostWorldArenas, SumAndLandingRangesOutsideAnArenaAreRefused) {
  constexpr int64_t kArena = 1 << 12;
  constexpr int64_t kFloats = kArena / 4;
  HostWorld world(plan::Topology::make(1, 1), kArena, HostOptions{});
  Endpoint& ep = world.endpoint(0);
  auto* f = reinterpret_cast<float*>(ep.arena());
  std::vector<uint16_t> grads(256, 0x3f80);  // bf16 1.0
  std::vector<float> out(64, -1.0f), in(64, 2.0f);
  auto sumOf = [](SumPiece piece) {
    SumOp op;
    op.srcType = plan::DType::kBF16;
    op.pieces = {std::move(piece)};
    return op;
  };
  holdQueue(ep, 0);
  expectUsageError([&] { ep.sum(0, sumOf({f + kFloats - 4, 64, 1, 64, {{grads.data(), 64, {64}}}})); },
                "rank 0: sum destination at offset 4080 of rank 0's arena runs 240 byte(s) past its end");
  expectUsageError([&] { ep.sum(0, sumOf({f, -4, 2, 4, {{grads.data(), 4, {4, 4}}}})); },
                "rank 0: sum destination at offset 0 of rank 0's arena runs 16 byte(s) before its start");
  expectUsageError([&] { ep.sum(0, sumOf({out.data(), 64, 1, 64, {{ep.arena() + kArena - 64, 64, {64}}}})); },
                "rank 0: sum source at offset 4032 of rank 0's arena runs 64 byte(s) past its end");
  expectUsageError([&] { ep.sum(0, sumOf({out.data(), 8, 2, 8, {{grads.data(), 8, {8}}}})); },
                "rank 0: sum piece 0: source 0 has 1 valid count(s) for 2 rows");
  expectUsageError([&] { ep.sum(0, sumOf({out.data(), 8, 2, 0, {{grads.data(), 8, {8}}}})); },
                "has 1 valid count(s) for 2 rows");  // no element, but the checker reads a count per row
  expectUsageError([&] { ep.sum(0, sumOf({out.data(), 8, 2, -8, {{grads.data(), 8, {8, 8}}}})); },
                "rank 0: sum piece 0: 2 rows of -8 elements");
  LandOp land;
  land.dst = f + kFloats - 4;
  land.elems = 64;
  land.sources = {in.data()};
  expectUsageError([&] { ep.land(0, land); },
                "rank 0: landing destination at offset 4080 of rank 0's arena runs 240 byte(s) past its end");
  land.dst = out.data();
  land.elems = 16;
  land.sources = {in.data(), f + kFloats - 8};
  expectUsageError([&] { ep.land(0, land); },
                "rank 0: landing source at offset 4064 of rank 0's arena runs 32 byte(s) past its end");
  land.clearSources = true;
  expectUsageError([&] { ep.land(0, land); }, "rank 0: landing source (read, then cleared) at offset 4064");
  land.sources = {in.data()};
  land.elems = -1;  // once cleared as a huge size_t
  expectUsageError([&] { ep.land(0, land); }, "rank 0: landing: -1 elements (negative)");

  // A source row reads only its valid elements: here the last row's end is
  // the arena's, where rows x elems would run past it.
  auto* tail = reinterpret_cast<uint16_t*>(ep.arena() + kArena - 64);
  for (int i = 0; i < 32; ++i) tail[i] = static_cast<uint16_t>(0x3f80 + (i << 4));
  ep.sum(1, sumOf({out.data(), 32, 2, 32, {{tail, 16, {16, 16}}}}));
  ep.synchronize(1);
  for (int r = 0; r < 2; ++r)
    for (int x = 0; x < 32; ++x)
      EXPECT_EQ(out[static_cast<size_t>(r * 32 + x)], x < 16 ? bf16ToFloat(tail[r * 16 + x]) : 0.0f) << r << ", " << x;
}

// Every rank's arena starts all zero (fabric.hpp): the reduce-scatter's pull landing reads a
// wave's unused inbox blocks as zeros before any call has written them.
TEST(HostWorldArenas, ArenasStartZeroed) {
  for (int round = 0; round < 2; ++round) {  // the second world may reuse the first one's memory
    HostWorld world(plan::Topology::make(2, 2), 1 << 16, HostOptions{});
    for (int r = 0; r < world.ranks(); ++r) {
      std::byte* a = world.endpoint(r).arena();
      EXPECT_EQ(std::count(a, a + (1 << 16), std::byte{0}), 1 << 16) << "rank " << r << ", world " << round;
      std::memset(a, 0xA5, 1 << 16);  // what a reused block would hold
    }
  }
}

// Rules the CUDA kernels need (reduce_op_rules.hpp), refused here too so that a CPU run refuses
// what a GPU would trap on (a misaligned element) or race over (overlapping destination rows, a
// landing onto one of its own sources); the same shapes aligned and apart are accepted.
TEST(HostWorldArenas, SumAndLandingLayoutsAGpuCannotRunAreRefused) {
  HostWorld world(plan::Topology::make(1, 1), 1 << 12, HostOptions{});
  Endpoint& ep = world.endpoint(0);
  auto* f = reinterpret_cast<float*>(ep.arena());
  auto* bytes = reinterpret_cast<std::byte*>(ep.arena());
  std::vector<uint16_t> grads(256, 0x3f80);  // bf16 1.0
  auto sumOf = [](SumPiece piece, plan::DType t = plan::DType::kBF16) {
    SumOp op;
    op.srcType = t;
    op.pieces = {std::move(piece)};
    return op;
  };
  holdQueue(ep, 0);
  expectUsageError([&] { ep.sum(0, sumOf({reinterpret_cast<float*>(bytes + 2), 8, 1, 8, {{grads.data(), 8, {8}}}})); },
                   "rank 0: sum piece 0: its destination is not 4-byte aligned");
  expectUsageError([&] { ep.sum(0, sumOf({f, 8, 1, 8, {{bytes + 1, 8, {8}}}})); },
                   "rank 0: sum piece 0: its source 0 is not 2-byte aligned");
  expectUsageError([&] { ep.sum(0, sumOf({f, 8, 1, 8, {{bytes + 2, 8, {8}}}}, plan::DType::kFP32)); },
                   "its source 0 is not 4-byte aligned");
  expectUsageError([&] { ep.sum(0, sumOf({f, 4, 2, 8, {{grads.data(), 8, {8, 8}}}})); },
                   "rank 0: sum piece 0: its destination rows overlap (pitch 4 below 8 elements a row)");
  LandOp land;
  land.dst = f;
  land.elems = 16;
  land.sources = {f + 64, f + 8};  // the second overlaps the destination's last 8 floats
  expectUsageError([&] { ep.land(0, land); }, "rank 0: landing: its destination overlaps its source 1");
  land.sources = {f + 64, f};
  expectUsageError([&] { ep.land(0, land); }, "its destination overlaps its source 1");
  land.sources = {reinterpret_cast<float*>(bytes + 258)};
  expectUsageError([&] { ep.land(0, land); }, "its source 0 is not 4-byte aligned");
  land.sources = {f + 64, f + 70};  // shifted onto each other: a GPU thread would clear what another reads
  land.clearSources = true;
  expectUsageError([&] { ep.land(0, land); }, "landing: it clears its sources, and source 0 partly overlaps source 1");
  land.clearSources = false;
  // The pieces of one sum run at once on a GPU: one may not read what another writes.
  SumOp two = sumOf({f + 128, 8, 1, 8, {{grads.data(), 8, {8}}}});
  two.pieces.push_back(SumPiece{f + 256, 8, 1, 8, {{bytes + 4 * 132, 4, {4}}}});
  expectUsageError([&] { ep.sum(0, two); }, "rank 0: sum of 2 piece(s): piece 0's destination row 0");

  // Aligned and apart: accepted and run (a landing may clear one source given twice, and a sum
  // may read its own destination element for element).
  ep.sum(1, sumOf({f + 128, 8, 2, 8, {{grads.data(), 8, {8, 8}}}}));
  ep.sum(1, sumOf({f + 128, 8, 2, 8, {{f + 128, 8, {8, 8}}, {f + 300, 8, {8, 8}}}}, plan::DType::kFP32));
  land.sources = {f + 128};
  land.dst = f + 512;
  ep.land(1, land);
  ep.synchronize(1);
  for (int x = 0; x < 16; ++x) EXPECT_EQ(f[512 + x], 1.0f) << x;
  land.sources = {f + 128, f + 128};
  land.clearSources = true;
  ep.land(1, land);
  ep.synchronize(1);
  for (int x = 0; x < 16; ++x) {
    EXPECT_EQ(f[512 + x], 2.0f) << x;  // the one source, read twice
    EXPECT_EQ(f[128 + x], 0.0f) << x;  // and cleared
  }
}

// Shapes the CUDA fabric cannot launch (reduce_op_rules.hpp), refused here too, before any
// address is bounded: no destination, no source or more than the kernels hold, a null source,
// a sum row past 32-bit indexing.
TEST(HostWorldArenas, SumAndLandingShapesAGpuCannotLaunchAreRefused) {
  HostWorld world(plan::Topology::make(1, 1), 1 << 12, HostOptions{});
  Endpoint& ep = world.endpoint(0);
  auto* f = reinterpret_cast<float*>(ep.arena());
  std::vector<uint16_t> grads(256, 0x3f80);  // bf16 1.0
  auto sumOf = [](SumPiece piece) {
    SumOp op;
    op.pieces = {std::move(piece)};
    return op;
  };
  holdQueue(ep, 0);
  expectUsageError([&] { ep.sum(0, sumOf({nullptr, 0, 0, 0, {{grads.data(), 8, {}}}})); },
                   "rank 0: sum piece 0: no destination");
  expectUsageError([&] { ep.sum(0, sumOf({f, 8, 1, 8, {}})); }, "rank 0: sum piece 0: 0 sources (1..16 taken)");
  const SumSource one{grads.data(), 8, {8}};
  expectUsageError([&] { ep.sum(0, sumOf({f, 8, 1, 8, std::vector<SumSource>(17, one)})); },
                   "rank 0: sum piece 0: 17 sources (1..16 taken)");
  expectUsageError([&] { ep.sum(0, sumOf({f, 8, 1, 8, {one, {nullptr, 8, {8}}}})); },
                   "rank 0: sum piece 0: source 1 is null");
  const int64_t wide = int64_t{INT32_MAX} + 1;
  expectUsageError([&] { ep.sum(0, sumOf({f, wide, 1, wide, {{grads.data(), wide, {8}}}})); },
                   "rank 0: sum piece 0: rows of 2147483648 elements (at most 2^31 - 1)");
  LandOp land;
  land.elems = 8;
  land.sources = {f + 64};
  expectUsageError([&] { ep.land(0, land); }, "rank 0: landing: no destination");
  land.dst = f;
  land.sources = {};
  expectUsageError([&] { ep.land(0, land); }, "rank 0: landing: 0 sources (1..16 taken)");
  land.sources = std::vector<float*>(17, f + 64);
  expectUsageError([&] { ep.land(0, land); }, "rank 0: landing: 17 sources (1..16 taken)");
  land.sources = {f + 64, nullptr};
  expectUsageError([&] { ep.land(0, land); }, "rank 0: landing: source 1 is null");

  // Sixteen sources are taken (and run).
  ep.sum(1, sumOf({f + 128, 8, 1, 8, std::vector<SumSource>(16, one)}));
  land.sources = std::vector<float*>(16, f + 128);
  land.dst = f + 512;
  ep.land(1, land);
  ep.synchronize(1);
  for (int x = 0; x < 8; ++x) EXPECT_EQ(f[512 + x], 256.0f) << x;
}

// Every fabric writes a NaN result as the GPU's canonical NaN (fabric.hpp), whatever payload an
// input NaN carried or whatever NaN the CPU's arithmetic made (inf - inf gives 0xFFC00000 on x86).
TEST(HostWorldArenas, NaNResultsAreWrittenCanonical) {
  HostWorld world(plan::Topology::make(1, 1), 1 << 12, HostOptions{});
  Endpoint& ep = world.endpoint(0);
  auto* f = reinterpret_cast<float*>(ep.arena());
  auto bitsOf = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    return u;
  };
  // bf16 sources: a NaN with a payload and its sign set, +inf and -inf, and finite values.
  std::vector<uint16_t> a = {0xFFA5, 0x7F80, 0x3F80, 0x7FC1}, b = {0x3F80, 0xFF80, 0x4000, 0x3F80};
  SumOp op;
  op.pieces = {SumPiece{f, 4, 1, 4, {{a.data(), 4, {4}}, {b.data(), 4, {4}}}}};
  ep.sum(0, op);
  // fp32 landing of the sum's row and a source holding a signalling-pattern NaN.
  const uint32_t signalling = 0x7F800001u;
  std::memcpy(f + 64, &signalling, sizeof signalling);
  for (int x = 1; x < 4; ++x) f[64 + x] = 1.0f;
  LandOp land;
  land.dst = f + 128;
  land.elems = 4;
  land.sources = {f, f + 64};
  ep.land(0, land);
  ep.synchronize(0);
  EXPECT_EQ(bitsOf(f[0]), kCanonicalNanBits) << "a NaN input's payload";
  EXPECT_EQ(bitsOf(f[1]), kCanonicalNanBits) << "inf + -inf";
  EXPECT_EQ(f[2], 3.0f);
  EXPECT_EQ(bitsOf(f[3]), kCanonicalNanBits) << "a quiet NaN with a payload";
  EXPECT_EQ(bitsOf(f[128]), kCanonicalNanBits) << "landing: a NaN source";
  EXPECT_EQ(bitsOf(f[129]), kCanonicalNanBits) << "landing: NaN + 1";
  EXPECT_EQ(f[130], 4.0f);
}

// Event kNoEvent stands for nothing to wait for: taken by every fabric as complete, never recorded.
TEST(HostWorldEvents, TheNoEventIsCompleteAndNeverRecorded) {
  HostWorld world(plan::Topology::make(1, 1), 1 << 12, HostOptions{});
  Endpoint& ep = world.endpoint(0);
  EXPECT_TRUE(ep.eventLive(0, Endpoint::kNoEvent));
  EXPECT_TRUE(ep.eventLive(1, Endpoint::kNoEvent));
  holdQueue(ep, 1);  // a queue that never finishes: a wait on its real events would hang
  EXPECT_NO_THROW(ep.waitEvent(0, 1, Endpoint::kNoEvent));
  EXPECT_NO_THROW(ep.synchronizeEvent(1, Endpoint::kNoEvent));
  EXPECT_THROW(ep.waitEvent(0, 99, Endpoint::kNoEvent), FabricError);  // the source queue is checked still
  EXPECT_NO_THROW(ep.synchronize(0));
  for (int i = 0; i < 3; ++i) EXPECT_NE(ep.record(0), Endpoint::kNoEvent);
}

// Many ranks fail at once: exactly one message is recorded, and a rank that
// sees the failure reads one whole message, never one being written.
TEST(FailureRecord, OneWholeMessageWins) {
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> state{0};
    char buffer[RankMemory::kFailureBytes] = {};
    constexpr int kWriters = 6;
    std::vector<std::string> messages;
    for (int w = 0; w < kWriters; ++w) messages.push_back(std::string(600, static_cast<char>('a' + w)));
    std::atomic<int> winners{0};
    std::atomic<bool> go{false};
    std::vector<std::string> seen(3);
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w)
      threads.emplace_back([&, w] {
        while (!go.load()) std::this_thread::yield();
        if (recordFirstFailure(state, buffer, sizeof buffer, messages[static_cast<size_t>(w)])) ++winners;
      });
    for (size_t r = 0; r < seen.size(); ++r)
      threads.emplace_back([&, r] {
        while (!go.load()) std::this_thread::yield();
        // Bounded: should no writer win, the reader gives up and the checks below fail, not hang.
        const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (!jobFailed(&state) && std::chrono::steady_clock::now() < until) std::this_thread::yield();
        seen[r] = jobFailed(&state) ? firstFailure(state, buffer) : "(no failure recorded within 10 s)";
      });
    go = true;
    for (auto& t : threads) t.join();
    ASSERT_EQ(winners.load(), 1) << "round " << round;
    const std::string recorded(buffer);
    ASSERT_EQ(recorded.size(), 600u) << "round " << round;
    EXPECT_EQ(recorded, std::string(600, recorded[0])) << "round " << round << ": a mixed message";
    for (const std::string& s : seen) EXPECT_EQ(s, recorded) << "round " << round << ": a reader saw another text";
  }
}

TEST(FailureRecord, LongMessagesAreCutToTheBuffer) {
  std::atomic<int> state{0};
  char buffer[16];
  EXPECT_FALSE(jobFailed(&state));
  EXPECT_FALSE(jobFailed(nullptr));
  ASSERT_TRUE(recordFirstFailure(state, buffer, sizeof buffer, std::string(100, 'x')));
  EXPECT_TRUE(jobFailed(&state));
  EXPECT_EQ(firstFailure(state, buffer), std::string(15, 'x'));
  EXPECT_FALSE(recordFirstFailure(state, buffer, sizeof buffer, "later"));
  EXPECT_EQ(firstFailure(state, buffer), std::string(15, 'x'));
}

}  // namespace
}  // namespace tide::fabric::host
