// fabric::liesWithin at its edges: the rails that read only from the arena
// and TIDE-AG's choice of rail source depend on it.
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

}  // namespace
}  // namespace tide::fabric
