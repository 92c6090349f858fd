// The copy-graph policy (fabric/copy_list_cache.hpp) with fake replays: when
// a list gets its replay, which replays stay under the cap, which lists are
// forgotten, and that every dropped replay is destroyed exactly once.
#include "fabric/copy_list_cache.hpp"

#include <gtest/gtest.h>

#include <map>
#include <stdexcept>
#include <vector>

namespace tide::fabric {
namespace {

using Cache = CopyListCache<int>;  // replay handles: 1, 2, ...; 0 is none

Cache::Key key(int64_t list) { return Cache::Key{{list, 7 * list + 1, 256}}; }

// Builds numbered replays (or declines the lists in `declined`) and records
// what it built and destroyed.
struct Driver {
  int next = 0;
  std::map<int, int64_t> built;  // replay -> list
  std::vector<int> destroyed;
  std::vector<int64_t> declined;

  int sight(Cache& c, int64_t list, bool isVolatile = false) {
    return c.sight(key(list), [isVolatile] { return isVolatile; });
  }

  // The owner's safe point: every wanted list built.
  size_t build(Cache& c) {
    return c.buildWanted(
        [&](const Cache::Key& k) {
          const int64_t list = k.words[0];
          for (int64_t d : declined)
            if (d == list) return 0;
          built[++next] = list;
          return next;
        },
        [&](int replay) { destroyed.push_back(replay); });
  }

  // Two sightings: the list is wanted at the next safe point (unless the policy holds it back).
  void sightTwice(Cache& c, int64_t list, bool isVolatile = false) {
    sight(c, list, isVolatile);
    sight(c, list, isVolatile);
  }

  // A list's way to its replay: two sightings, a safe point, a sighting.
  int replayOf(Cache& c, int64_t list, bool isVolatile = false) {
    sightTwice(c, list, isVolatile);
    build(c);
    return sight(c, list, isVolatile);
  }

  // Lists first..first+n-1, each brought to its replay in turn (within the cap).
  void replayEach(Cache& c, int64_t first, int64_t n) {
    for (int64_t l = first; l < first + n; ++l) replayOf(c, l);
  }
};

TEST(CopyListCache, SecondSightingIsWantedAndBuiltAtTheSafePoint) {
  Cache c(16, 8);
  Driver d;
  EXPECT_EQ(d.sight(c, 1), 0);  // first sighting: the plain way
  EXPECT_FALSE(c.hasWanted());
  EXPECT_EQ(d.sight(c, 1), 0);  // second: wanted, still the plain way (no build here)
  EXPECT_TRUE(c.hasWanted());
  EXPECT_TRUE(d.built.empty());
  EXPECT_EQ(d.sight(c, 1), 0);  // wanted once, not twice
  EXPECT_EQ(d.build(c), 1u);    // the safe point builds it
  EXPECT_FALSE(c.hasWanted());
  ASSERT_EQ(d.built.size(), 1u);
  const int r = d.built.begin()->first;
  EXPECT_EQ(d.built.at(r), 1);
  EXPECT_EQ(d.sight(c, 1), r);  // later: the same replay, not rebuilt
  EXPECT_EQ(d.sight(c, 1), r);
  EXPECT_EQ(d.build(c), 0u);
  EXPECT_EQ(d.built.size(), 1u);
  EXPECT_EQ(c.stats().hits, 2);
  EXPECT_EQ(c.stats().built, 1);
  EXPECT_EQ(d.sight(c, 2), 0);  // another list starts over
}

TEST(CopyListCache, SafePointBuildsInTheOrderListsBecameWanted) {
  Cache c(16, 8);
  Driver d;
  for (int64_t l : {5, 3, 9}) d.sight(c, l);
  for (int64_t l : {9, 5}) d.sight(c, l);  // 3 seen once: not wanted
  EXPECT_EQ(d.build(c), 2u);
  ASSERT_EQ(d.built.size(), 2u);
  EXPECT_EQ(d.built.at(1), 9);
  EXPECT_EQ(d.built.at(2), 5);
  EXPECT_EQ(d.sight(c, 3), 0);  // its second sighting: wanted now
  EXPECT_EQ(d.build(c), 1u);
  EXPECT_EQ(d.built.at(3), 3);
}

TEST(CopyListCache, ABuildThatThrowsLeavesItsListAndTheRestWanted) {
  Cache c(16, 8);
  Driver d;
  for (int64_t l : {4, 6, 8}) d.sightTwice(c, l);
  // The build of 6 throws (a driver failure the owner reports): 4 is built, 6 and 8 stay wanted.
  EXPECT_THROW(c.buildWanted(
                   [&](const Cache::Key& k) {
                     if (k.words[0] == 6) throw std::runtime_error("upload failed");
                     d.built[++d.next] = k.words[0];
                     return d.next;
                   },
                   [&](int replay) { d.destroyed.push_back(replay); }),
               std::runtime_error);
  ASSERT_EQ(d.built.size(), 1u);
  EXPECT_EQ(d.built.at(1), 4);
  EXPECT_TRUE(c.hasWanted());
  EXPECT_EQ(d.sight(c, 6), 0);  // still wanted: not queued twice
  EXPECT_EQ(d.build(c), 2u);    // the next safe point builds both, in their order
  EXPECT_EQ(d.built.at(2), 6);
  EXPECT_EQ(d.built.at(3), 8);
  EXPECT_EQ(d.sight(c, 6), 2);
  EXPECT_EQ(d.sight(c, 8), 3);
  EXPECT_EQ(c.stats().built, 3);
  EXPECT_FALSE(c.hasWanted());
}

TEST(CopyListCache, KeysDifferInAnyWord) {
  Cache c(16, 8);
  Driver d;
  d.sight(c, 1);  // key(1) is {1, 8, 256}: remembered
  EXPECT_EQ(c.sight(Cache::Key{{1, 8, 255}}), 0);  // one word off: a first sighting
  EXPECT_EQ(c.sight(Cache::Key{{1, 9, 256}}), 0);
  EXPECT_EQ(c.sight(Cache::Key{{1, 8}}), 0);  // a prefix is another list
  EXPECT_FALSE(c.hasWanted());
  EXPECT_EQ(c.sight(Cache::Key{{1, 8, 256}}), 0);  // key(1)'s second sighting
  EXPECT_EQ(d.build(c), 1u);
  EXPECT_EQ(d.built.at(1), 1);
}

TEST(CopyListCache, DeclinedListIsNeverBuiltAgain) {
  Cache c(16, 8);
  Driver d;
  d.declined = {3};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(d.sight(c, 3), 0);
    EXPECT_EQ(d.build(c), 0u);
  }
  EXPECT_TRUE(d.built.empty());
  EXPECT_FALSE(c.hasWanted());  // declined once, never wanted again
  EXPECT_EQ(c.stats().built, 0);
  EXPECT_EQ(c.replays(), 0u);
}

TEST(CopyListCache, CapDropsTheLeastRecentlyUsedReplay) {
  constexpr int kCap = 4;
  Cache c(64, kCap);
  Driver d;
  std::map<int64_t, int> replay;
  for (int64_t l = 0; l < kCap; ++l) replay[l] = d.replayOf(c, l);  // replays of 0..3, used in that order
  d.sight(c, 0);                                                     // 0 used again: 1 is now the oldest
  EXPECT_NE(d.replayOf(c, 9), 0);  // a fifth replay: drops list 1's
  ASSERT_EQ(d.destroyed.size(), 1u);
  EXPECT_EQ(d.destroyed[0], replay[1]);
  EXPECT_EQ(c.replays(), static_cast<size_t>(kCap));
  EXPECT_EQ(c.stats().dropped, 1);
  EXPECT_EQ(d.sight(c, 0), replay[0]);  // kept
  EXPECT_EQ(d.sight(c, 1), 0);          // dropped and forgotten: a first sighting again
  EXPECT_NE(d.replayOf(c, 1), 0);       // rebuilt (dropping the now oldest, list 2's)
  ASSERT_EQ(d.destroyed.size(), 2u);
  EXPECT_EQ(d.destroyed[1], replay[2]);
}

TEST(CopyListCache, OneOffsMakeRoomAndReplaysStay) {
  Cache c(8, 8);
  Driver d;
  const int kept = d.replayOf(c, 100);
  ASSERT_NE(kept, 0);
  for (int64_t l = 0; l < 7; ++l) d.sight(c, l);  // fills the 8 remembered lists with one-offs
  EXPECT_EQ(c.lists(), 8u);
  d.sight(c, 50);  // full: the one-offs are forgotten, 50 remembered
  EXPECT_EQ(c.lists(), 2u);
  EXPECT_EQ(d.sight(c, 100), kept);  // the replay stayed
  EXPECT_NE(d.replayOf(c, 50), 0);   // 50 gets its replay
  EXPECT_EQ(d.sight(c, 3), 0);       // 3 was forgotten: first sighting again
  EXPECT_TRUE(d.destroyed.empty());
}

TEST(CopyListCache, ListsBuiltAtOneSafePointAreDroppedInBuildOrder) {
  Cache c(64, 2);
  Driver d;
  const int old = d.replayOf(c, 7);  // launched before the others were built
  for (int64_t l : {1, 2, 3}) d.sight(c, l);
  for (int64_t l : {1, 2, 3}) d.sight(c, l);
  EXPECT_EQ(d.build(c), 3u);  // the cap of 2: list 7's older replay goes first, then list 1's
  ASSERT_EQ(d.destroyed.size(), 2u);
  EXPECT_EQ(d.destroyed[0], old);
  EXPECT_EQ(d.built.at(d.destroyed[1]), 1);
  EXPECT_NE(d.sight(c, 2), 0);
  EXPECT_NE(d.sight(c, 3), 0);
}

TEST(CopyListCache, WantedListForgottenBeforeTheSafePointIsNotBuilt) {
  Cache c(4, 8);
  Driver d;
  d.sightTwice(c, 1);  // wanted
  for (int64_t l = 10; l < 13; ++l) d.sight(c, l);
  d.sight(c, 20);  // full: lists without a replay are forgotten, 1 among them
  EXPECT_EQ(d.build(c), 0u);
  EXPECT_TRUE(d.built.empty());
  EXPECT_EQ(d.sight(c, 1), 0);  // a first sighting again
}

TEST(CopyListCache, FullOfReplaysRemembersNoMore) {
  Cache c(2, 8);
  Driver d;
  d.replayEach(c, 0, 2);
  EXPECT_EQ(c.replays(), 2u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d.sight(c, 5), 0);  // no room and no one-off to forget: never built
  EXPECT_EQ(c.lists(), 2u);
  EXPECT_EQ(c.stats().built, 2);
}

TEST(CopyListCache, ForEachReplayVisitsEveryLiveReplayOnce) {
  Cache c(64, 3);
  Driver d;
  d.replayEach(c, 0, 5);  // two past the cap of 3
  std::vector<int> live;
  c.forEachReplay([&](int r) { live.push_back(r); });
  EXPECT_EQ(live.size(), 3u);
  EXPECT_EQ(d.destroyed.size(), 2u);
  for (int r : live)
    for (int gone : d.destroyed) EXPECT_NE(r, gone);  // destroyed once, never handed back
}

}  // namespace
}  // namespace tide::fabric

namespace tide::fabric {
namespace {

// Volatile lists (gradients from a caching allocator) whose addresses do not
// recur: after the probe builds, building stops while the replays go unused,
// and the lists keep going the plain way.
TEST(CopyListCache, VolatileListsThatDoNotRecurStopBeingBuiltAfterTheProbe) {
  Cache c(4096, 1024, {.probeBuilds = 4, .launchesPerBuild = 3});
  Driver d;
  // Each "step" sights a fresh volatile list twice (built), then never again.
  for (int64_t list = 1; list <= 4; ++list) {
    d.sightTwice(c, list, true);
    EXPECT_EQ(d.build(c), 1u) << list;
  }
  EXPECT_EQ(c.stats().volatileBuilt, 4);
  EXPECT_FALSE(c.volatileBuildsPay());  // 4 built, 0 launched
  for (int64_t list = 5; list <= 20; ++list) {
    EXPECT_EQ(d.sight(c, list, true), 0);
    EXPECT_EQ(d.sight(c, list, true), 0);
    EXPECT_FALSE(c.hasWanted()) << list;
    EXPECT_EQ(d.build(c), 0u);
  }
  EXPECT_EQ(c.stats().volatileSkipped, 16);
  EXPECT_EQ(c.stats().built, 4);
  // Stable lists are not held back by the volatile ones.
  EXPECT_NE(d.replayOf(c, 100), 0);
  EXPECT_EQ(c.stats().built, 5);
  EXPECT_EQ(c.stats().volatileBuilt, 4);
}

// Once the volatile replays already built are launched often enough, building
// resumes; launches of stable replays do not count toward it.
TEST(CopyListCache, VolatileBuildingResumesWhenItsReplaysAreLaunched) {
  Cache c(4096, 1024, {.probeBuilds = 2, .launchesPerBuild = 3});
  Driver d;
  const int a = d.replayOf(c, 1, true);  // built and launched once
  const int b = d.replayOf(c, 2, true);
  ASSERT_NE(a, 0);
  ASSERT_NE(b, 0);
  EXPECT_EQ(c.stats().volatileHits, 2);
  const int stable = d.replayOf(c, 50);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(d.sight(c, 50), stable);
  EXPECT_FALSE(c.volatileBuildsPay());  // 2 volatile launches for 2 builds: under 3 each
  d.sightTwice(c, 3, true);
  EXPECT_EQ(d.build(c), 0u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(d.sight(c, 1, true), a);  // 6 volatile launches: 3 per build
  EXPECT_TRUE(c.volatileBuildsPay());
  d.sight(c, 3, true);  // its next second-or-later sighting tests again
  EXPECT_EQ(d.build(c), 1u);
  EXPECT_NE(d.sight(c, 3, true), 0);
  EXPECT_EQ(c.stats().volatileBuilt, 3);
  EXPECT_EQ(c.stats().volatileSkipped, 1);
}

// Lists that became wanted together are tested one by one as they are built:
// the probe ends at exactly probeBuilds even when more were wanted at once.
TEST(CopyListCache, TheProbeEndsWithinOneSafePoint) {
  Cache c(4096, 1024, {.probeBuilds = 3, .launchesPerBuild = 2});
  Driver d;
  for (int64_t list = 1; list <= 6; ++list) d.sightTwice(c, list, true);
  EXPECT_TRUE(c.hasWanted());
  EXPECT_EQ(d.build(c), 3u);
  EXPECT_EQ(c.stats().volatileBuilt, 3);
  EXPECT_EQ(c.stats().volatileSkipped, 3);
  EXPECT_FALSE(c.hasWanted());
  EXPECT_NE(d.sight(c, 1, true), 0);  // the three built replay
  EXPECT_EQ(d.sight(c, 6, true), 0);  // the others go the plain way
}

}  // namespace
}  // namespace tide::fabric
