// One fresh random seed per test, printed on failure and replayable.
//
// Tests draw fresh inputs on every run (a fixed seed would test one input
// forever); a failure must still be reproducible, so every seed is traced and
// TIDE_TEST_SEED=<n> replays it. Shared by the plan, fabric, collectives and
// C API tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>

namespace tide_test {

// A fresh 64-bit seed from std::random_device; TIDE_TEST_SEED=<n> replays one.
inline uint64_t testSeed() {
  if (const char* s = std::getenv("TIDE_TEST_SEED")) return std::strtoull(s, nullptr, 10);
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace tide_test

// Declares `const uint64_t name`, freshly seeded, and prints it with its replay
// line on any failure in the enclosing scope.
#define TIDE_TRACED_SEED(name)                                                                  \
  const uint64_t name = ::tide_test::testSeed();                                                \
  SCOPED_TRACE("seed " + std::to_string(name) + " (replay with TIDE_TEST_SEED=" +               \
               std::to_string(name) + ")")
