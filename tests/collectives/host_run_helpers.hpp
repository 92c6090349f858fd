// Helpers shared by the host-fabric collective tests: fresh seeds, ragged
// parameter shapes, a base run per topology, the reference check of a run, and
// a fault's name as a test parameter name.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "bench/host_run.hpp"
#include "collectives/communicator.hpp"
#include "test_seed.hpp"

namespace tide::test {

using bench::HostRunOptions;
using plan::DType;
using plan::ParamSpec;

// A fresh seed per draw (tests/common/test_seed.hpp; TIDE_TEST_SEED=<n> gives every draw that seed, so
// a failing draw's printed seed replays it).
inline uint64_t freshSeed() { return tide_test::testSeed(); }

// Ragged shapes: padded tail rows, 1-D, 3-D, rows < ranks.
inline std::vector<ParamSpec> raggedShapes(std::mt19937_64& rng, int params, DType t, int maxRows) {
  std::vector<ParamSpec> specs;
  for (int p = 0; p < params; ++p) {
    ParamSpec s;
    s.dtype = t;
    const int kind = static_cast<int>(rng() % 3);
    const int64_t rows = 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(maxRows));
    if (kind == 0) s.shape = {rows};
    else if (kind == 1) s.shape = {rows, 1 + static_cast<int64_t>(rng() % 6)};
    else s.shape = {rows, 2, 1 + static_cast<int64_t>(rng() % 3)};
    specs.push_back(s);
  }
  return specs;
}

inline HostRunOptions baseOptions(int m, int l, uint64_t seed, DType ag = DType::kBF16, DType grad = DType::kBF16) {
  std::mt19937_64 rng(seed);
  HostRunOptions o;
  o.topo = plan::Topology::make(m, l);
  o.specs = raggedShapes(rng, 2 + static_cast<int>(rng() % 4), ag, 3 * m * l + 5);
  o.gradDtype = grad;
  o.seed = seed;
  o.iters = 2;
  o.timeoutSeconds = 20;
  return o;
}

inline void expectOk(const bench::HostRunResult& r) {
  EXPECT_EQ(r.error, "");
  EXPECT_TRUE(r.allGather.ok) << r.allGather.wrong << " landing bytes wrong";
  EXPECT_TRUE(r.reduceScatter.ok) << r.reduceScatter.wrong << " output elements wrong, max rel err "
                                  << r.reduceScatter.maxRelErr;
}

struct Topo {
  int m, l;
};

// A fault's name as a gtest parameter name ('-' is not allowed there).
inline std::string faultTestName(collectives::Fault fault) {
  std::string n = collectives::faultName(fault);
  for (char& ch : n)
    if (ch == '-') ch = '_';
  return n;
}

}  // namespace tide::test
