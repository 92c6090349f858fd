// fabric::liesWithin and rangesMeet at their edges: the rails that read only from
// the arena, TIDE-AG's choice of rail source and its shard checks depend on them.
#include "fabric/byte_range.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <vector>

namespace tide::fabric {
namespace {

TEST(LiesWithin, RangesInsideAndAtTheEdges) {
  std::vector<std::byte> arena(64);
  const std::byte* base = arena.data();
  EXPECT_TRUE(liesWithin(base, 64, base, 64));
  EXPECT_TRUE(liesWithin(base + 10, 54, base, 64));  // ends exactly at the end
  EXPECT_TRUE(liesWithin(base + 64, 0, base, 64));   // empty, at the end
  EXPECT_TRUE(liesWithin(base + 3, 0, base, 64));
}

TEST(LiesWithin, RangesOutsideOrCrossingAnEdge) {
  std::vector<std::byte> storage(128);
  const std::byte* base = storage.data() + 32;
  EXPECT_FALSE(liesWithin(base + 10, 55, base, 64));  // one byte past the end
  EXPECT_FALSE(liesWithin(base + 65, 0, base, 64));   // starts past the end
  EXPECT_FALSE(liesWithin(base - 1, 1, base, 64));    // starts before the base
  EXPECT_FALSE(liesWithin(base - 1, 10, base, 64));   // crosses the start
  EXPECT_FALSE(liesWithin(base, 1, base, 0));         // empty arena
  EXPECT_FALSE(liesWithin(base, -1, base, 64));       // negative length
  EXPECT_FALSE(liesWithin(base, 1, base, -1));        // negative size
}

TEST(LiesWithin, LengthsThatWouldWrapTheAddressSpace) {
  std::vector<std::byte> arena(64);
  EXPECT_FALSE(liesWithin(arena.data() + 8, INT64_MAX, arena.data(), 64));
}

TEST(OffsetRangesMeet, SharedBytesOnlyAndSymmetric) {
  // Against a brute force over small ranges: they meet iff some byte lies in both.
  for (int64_t a = 0; a < 12; ++a)
    for (int64_t an = 1; an < 6; ++an)
      for (int64_t b = 0; b < 12; ++b)
        for (int64_t bn = 1; bn < 6; ++bn) {
          bool shared = false;
          for (int64_t x = a; x < a + an; ++x) shared |= x >= b && x < b + bn;
          EXPECT_EQ(offsetRangesMeet(a, an, b, bn), shared) << a << "+" << an << " vs " << b << "+" << bn;
          EXPECT_EQ(offsetRangesMeet(b, bn, a, an), shared);
        }
}

TEST(RangesMeet, SharedBytesOnlyAgainstABruteForce) {
  std::vector<std::byte> storage(32);
  const std::byte* base = storage.data() + 8;  // [base, base + 8)
  for (int64_t at = -8; at < 16; ++at)
    for (int64_t n = 0; n < 12; ++n) {
      bool shared = false;
      for (int64_t x = at; x < at + n; ++x) shared |= x >= 0 && x < 8;
      EXPECT_EQ(rangesMeet(base + at, n, base, 8), shared) << at << "+" << n;
    }
  EXPECT_FALSE(rangesMeet(base, 4, base, 0));  // an empty base meets nothing
}

TEST(RangesMeet, RangesFarApartDoNotWrap) {
  std::vector<std::byte> storage(64);
  EXPECT_FALSE(rangesMeet(storage.data() + 32, INT64_MAX, storage.data(), 16));  // starts past it
  EXPECT_TRUE(rangesMeet(storage.data(), INT64_MAX, storage.data() + 32, 16));   // runs over it
}

TEST(OffsetRangesMeet, OffsetsNearTheTopDoNotWrap) {
  EXPECT_FALSE(offsetRangesMeet(INT64_MAX - 4, 4, 0, 16));
  EXPECT_TRUE(offsetRangesMeet(INT64_MAX - 4, 4, INT64_MAX - 2, 1));
  EXPECT_FALSE(offsetRangesMeet(0, INT64_MAX, INT64_MAX, 1));
}

}  // namespace
}  // namespace tide::fabric
