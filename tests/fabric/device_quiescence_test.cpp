// The registry of fabric/device_quiescence.hpp with plain probes: a device is
// quiescent when every endpoint enrolled on it says so, whatever the endpoints
// of other devices say; a withdrawn endpoint no longer counts.
#include "fabric/device_quiescence.hpp"

#include <gtest/gtest.h>

namespace tide::fabric {
namespace {

TEST(DeviceQuiescence, EveryEndpointOfTheDeviceMustAgree) {
  int a = 0, b = 0, other = 0;  // owners
  bool aIdle = true, bIdle = true, otherIdle = false;
  DeviceQuiescence::enroll(0, &a, [&] { return aIdle; });
  DeviceQuiescence::enroll(0, &b, [&] { return bIdle; });
  DeviceQuiescence::enroll(1, &other, [&] { return otherIdle; });
  EXPECT_TRUE(DeviceQuiescence::quiescent(0));  // device 1's busy endpoint does not count
  EXPECT_FALSE(DeviceQuiescence::quiescent(1));
  bIdle = false;
  EXPECT_FALSE(DeviceQuiescence::quiescent(0));  // asked now, not at enrollment
  DeviceQuiescence::withdraw(&b);
  EXPECT_TRUE(DeviceQuiescence::quiescent(0));
  DeviceQuiescence::withdraw(&a);
  DeviceQuiescence::withdraw(&other);
  EXPECT_TRUE(DeviceQuiescence::quiescent(1));
}

TEST(DeviceQuiescence, NoEndpointMeansQuiescent) { EXPECT_TRUE(DeviceQuiescence::quiescent(7)); }

TEST(DeviceQuiescence, WithdrawRemovesOnlyThatOwner) {
  int a = 0, b = 0;
  int askedA = 0, askedB = 0;
  DeviceQuiescence::enroll(2, &a, [&] { ++askedA; return true; });
  DeviceQuiescence::enroll(2, &b, [&] { ++askedB; return true; });
  DeviceQuiescence::withdraw(&a);
  EXPECT_TRUE(DeviceQuiescence::quiescent(2));
  EXPECT_EQ(askedA, 0);
  EXPECT_EQ(askedB, 1);
  DeviceQuiescence::withdraw(&b);
}

}  // namespace
}  // namespace tide::fabric
