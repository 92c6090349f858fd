// 64 unpredictable bits for what must differ between jobs and communicators
// (job ids, arena tag nonces), not for test data: the OS's entropy, not a
// seeded generator, so two processes started together never draw alike.
#pragma once

#include <cstdint>
#include <random>

namespace tide::fabric {

inline uint64_t freshRandom64() {
  std::random_device rd;
  return (uint64_t{rd()} << 32) ^ rd();
}

}  // namespace tide::fabric
