// The copy-graph policy (fabric/copy_list_cache.hpp) with fake replays: when
// a list gets its replay, which replays stay under the cap, which lists are
// forgotten, and that every dropped replay is destroyed exactly once.
#include "fabric/copy_list_cache.hpp"

#include <gtest/gtest.h>

#include <map>
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

  // Lists first..first+n-1, each sighted twice: a replay each (within the cap).
  void replayEach(Cache& c, int64_t first, int64_t n) {
    for (int64_t l = first; l < first + n; ++l) {
      sight(c, l);
      sight(c, l);
    }
  }

  int sight(Cache& c, int64_t list) {
    return c.sight(
        key(list),
        [&] {
          for (int64_t d : declined)
            if (d == list) return 0;
          built[++next] = list;
          return next;
        },
        [&](int replay) { destroyed.push_back(replay); });
  }
};

TEST(CopyListCache, FirstSightingRemembersSecondBuildsLaterReplay) {
  Cache c(16, 8);
  Driver d;
  EXPECT_EQ(d.sight(c, 1), 0);  // first sighting: the plain way
  EXPECT_TRUE(d.built.empty());
  const int r = d.sight(c, 1);  // second: built and used
  ASSERT_NE(r, 0);
  EXPECT_EQ(d.built.at(r), 1);
  EXPECT_EQ(d.sight(c, 1), r);  // later: the same replay, not rebuilt
  EXPECT_EQ(d.built.size(), 1u);
  EXPECT_EQ(c.stats().hits, 2);
  EXPECT_EQ(c.stats().built, 1);
  EXPECT_EQ(d.sight(c, 2), 0);  // another list starts over
}

TEST(CopyListCache, KeysDifferInAnyWord) {
  Cache c(16, 8);
  Driver d;
  d.sight(c, 1);  // key(1) is {1, 8, 256}: remembered
  EXPECT_EQ(c.sight(Cache::Key{{1, 8, 255}}, [] { return 99; }, [](int) {}), 0);  // one word off: a first sighting
  EXPECT_EQ(c.sight(Cache::Key{{1, 9, 256}}, [] { return 99; }, [](int) {}), 0);
  EXPECT_EQ(c.sight(Cache::Key{{1, 8}}, [] { return 99; }, [](int) {}), 0);  // a prefix is another list
  EXPECT_EQ(c.sight(Cache::Key{{1, 8, 256}}, [] { return 99; }, [](int) {}), 99);  // key(1)'s second sighting
}

TEST(CopyListCache, DeclinedListIsNeverBuiltAgain) {
  Cache c(16, 8);
  Driver d;
  d.declined = {3};
  for (int i = 0; i < 5; ++i) EXPECT_EQ(d.sight(c, 3), 0);
  EXPECT_TRUE(d.built.empty());
  EXPECT_EQ(c.stats().built, 0);
  EXPECT_EQ(c.replays(), 0u);
}

TEST(CopyListCache, CapDropsTheLeastRecentlyUsedReplay) {
  constexpr int kCap = 4;
  Cache c(64, kCap);
  Driver d;
  for (int64_t l = 0; l < kCap; ++l) d.sight(c, l);
  std::map<int64_t, int> replay;
  for (int64_t l = 0; l < kCap; ++l) replay[l] = d.sight(c, l);  // replays of 0..3, used in that order
  d.sight(c, 0);                                                   // 0 used again: 1 is now the oldest
  d.sight(c, 9);
  EXPECT_NE(d.sight(c, 9), 0);  // a fifth replay: drops list 1's
  ASSERT_EQ(d.destroyed.size(), 1u);
  EXPECT_EQ(d.destroyed[0], replay[1]);
  EXPECT_EQ(c.replays(), static_cast<size_t>(kCap));
  EXPECT_EQ(c.stats().dropped, 1);
  EXPECT_EQ(d.sight(c, 0), replay[0]);  // kept
  EXPECT_EQ(d.sight(c, 1), 0);          // dropped and forgotten: a first sighting again
  EXPECT_NE(d.sight(c, 1), 0);          // rebuilt (dropping the now oldest, list 2's)
  ASSERT_EQ(d.destroyed.size(), 2u);
  EXPECT_EQ(d.destroyed[1], replay[2]);
}

TEST(CopyListCache, OneOffsMakeRoomAndReplaysStay) {
  Cache c(8, 8);
  Driver d;
  d.sight(c, 100);
  const int kept = d.sight(c, 100);
  ASSERT_NE(kept, 0);
  for (int64_t l = 0; l < 7; ++l) d.sight(c, l);  // fills the 8 remembered lists with one-offs
  EXPECT_EQ(c.lists(), 8u);
  d.sight(c, 50);  // full: the one-offs are forgotten, 50 remembered
  EXPECT_EQ(c.lists(), 2u);
  EXPECT_EQ(d.sight(c, 100), kept);  // the replay stayed
  EXPECT_NE(d.sight(c, 50), 0);      // 50's second sighting builds
  EXPECT_EQ(d.sight(c, 3), 0);       // 3 was forgotten: first sighting again
  EXPECT_TRUE(d.destroyed.empty());
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
