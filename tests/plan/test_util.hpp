// Shared helpers for the plan-library tests: seeded randomness, random
// parameter groups, and byte-level expansion of copy descriptors.
//
// Every reference in these tests is computed independently of the library
// (brute-force simulation or the paper's formulas written out again); the
// helpers here only generate inputs and expand descriptors byte by byte.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "test_seed.hpp"
#include "tide/plan.hpp"

namespace tide_test {

using namespace tide::plan;

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  // Uniform in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }
  int irange(int lo, int hi) { return static_cast<int>(range(lo, hi)); }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(gen_); }
  bool coin(double p = 0.5) { return std::bernoulli_distribution(p)(gen_); }

 private:
  std::mt19937_64 gen_;
};

// Declares `rng`, seeded freshly, and prints the seed on any failure.
#define TIDE_SEEDED_RNG(rng)   \
  TIDE_TRACED_SEED(rng##Seed_); \
  ::tide_test::Rng rng(rng##Seed_)

inline int refItemSize(DType t) { return t == DType::kBF16 ? 2 : 4; }

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

inline int posMod(int64_t a, int64_t m) { return static_cast<int>(((a % m) + m) % m); }

inline std::string shapesToString(const std::vector<ParamSpec>& specs) {
  std::ostringstream os;
  os << "[";
  for (size_t p = 0; p < specs.size(); ++p) {
    os << (p ? ", " : "") << "(";
    for (size_t i = 0; i < specs[p].shape.size(); ++i) os << (i ? "," : "") << specs[p].shape[i];
    os << ")";
  }
  os << "] " << (specs.empty() ? "" : (specs[0].dtype == DType::kBF16 ? "bf16" : "fp32"));
  return os.str();
}

// Random group of `params` parameters. dim 0 is drawn around multiples of N
// (so that D < N, D == N, and ragged tails all occur); trailing dims are small.
inline std::vector<ParamSpec> randomSpecs(Rng& rng, int params, int ranks, int64_t maxDim0Mult,
                                          int maxTrailing, int maxNdim, DType dtype) {
  std::vector<ParamSpec> specs;
  for (int p = 0; p < params; ++p) {
    ParamSpec s;
    s.dtype = dtype;
    const int ndim = rng.irange(1, maxNdim);
    int64_t d0;
    switch (rng.irange(0, 3)) {
      case 0: d0 = rng.range(1, std::max<int64_t>(1, ranks - 1)); break;            // D < N
      case 1: d0 = ranks * rng.range(1, maxDim0Mult); break;                         // multiple of N
      case 2: d0 = ranks * rng.range(0, maxDim0Mult) + rng.range(1, ranks); break;   // ragged
      default: d0 = rng.range(1, ranks * maxDim0Mult + ranks); break;
    }
    s.shape.push_back(std::max<int64_t>(1, d0));
    for (int i = 1; i < ndim; ++i) s.shape.push_back(rng.range(1, maxTrailing));
    specs.push_back(std::move(s));
  }
  return specs;
}

// Independent reference geometry of Sec. 2.1.
struct RefParam {
  int64_t D = 0, K = 0, R = 0, s = 0, o = 0, outElems = 0, outOffset = 0;
};
struct RefLayout {
  int N = 0;
  int64_t S = 0, E = 0;
  int bAg = 2;
  std::vector<RefParam> p;
  // Parameter p of output element e (e in [0, E)).
  int paramOfElem(int64_t e) const {
    for (size_t i = 0; i < p.size(); ++i)
      if (e >= p[i].outOffset && e < p[i].outOffset + p[i].outElems) return static_cast<int>(i);
    return -1;
  }
};

inline RefLayout refLayout(int M, int L, const std::vector<ParamSpec>& specs) {
  RefLayout r;
  r.N = M * L;
  r.bAg = refItemSize(specs.at(0).dtype);
  for (const ParamSpec& s : specs) {
    RefParam q;
    q.D = s.shape[0];
    q.K = 1;
    for (size_t i = 1; i < s.shape.size(); ++i) q.K *= s.shape[i];
    q.R = ceilDiv(q.D, r.N);
    q.s = q.R * q.K * r.bAg;
    q.o = r.S;
    q.outElems = q.R * q.K;
    q.outOffset = r.E;
    r.S += q.s;
    r.E += q.outElems;
    r.p.push_back(q);
  }
  return r;
}

// ---------------------------------------------------------------- byte maps

// One byte moved by a copy: (src rank, region, index, byte) -> (dst ...).
struct ByteMove {
  int srcRank;
  int srcRegion;
  int srcIndex;
  int64_t srcByte;
  int dstRank;
  int dstRegion;
  int dstIndex;
  int64_t dstByte;
  auto operator<=>(const ByteMove&) const = default;
  bool operator==(const ByteMove&) const = default;
};

inline std::string describe(const CopyDesc& d) {
  std::ostringstream os;
  os << "{src r" << d.src.rank << " " << regionName(d.src.region) << "[" << d.src.index << "]+"
     << d.src.offset << " -> dst r" << d.dst.rank << " " << regionName(d.dst.region) << "["
     << d.dst.index << "]+" << d.dst.offset << " width " << d.width << " rows " << d.rows
     << " pitch " << d.srcPitch << "/" << d.dstPitch << "}";
  return os.str();
}

inline std::string describe(const ByteMove& m) {
  std::ostringstream os;
  os << "r" << m.srcRank << " " << regionName(static_cast<Region>(m.srcRegion)) << "["
     << m.srcIndex << "]+" << m.srcByte << " -> r" << m.dstRank << " "
     << regionName(static_cast<Region>(m.dstRegion)) << "[" << m.dstIndex << "]+" << m.dstByte;
  return os.str();
}

// Expands descriptors (strided or flat) byte by byte, straight from the
// documented CopyDesc semantics. Fails the test on malformed descriptors.
inline std::vector<ByteMove> expandBytes(const std::vector<CopyDesc>& descs) {
  std::vector<ByteMove> out;
  for (const CopyDesc& d : descs) {
    EXPECT_GT(d.width, 0) << describe(d);
    EXPECT_GE(d.rows, 1) << describe(d);
    EXPECT_GE(d.src.offset, 0) << describe(d);
    EXPECT_GE(d.dst.offset, 0) << describe(d);
    for (int64_t i = 0; i < d.rows; ++i)
      for (int64_t b = 0; b < d.width; ++b)
        out.push_back({d.src.rank, static_cast<int>(d.src.region), d.src.index,
                       d.src.offset + i * d.srcPitch + b, d.dst.rank,
                       static_cast<int>(d.dst.region), d.dst.index, d.dst.offset + i * d.dstPitch + b});
  }
  std::sort(out.begin(), out.end());
  return out;
}

// First difference between two sorted byte maps, for a readable failure.
inline std::string firstDifference(const std::vector<ByteMove>& a, const std::vector<ByteMove>& b) {
  std::vector<ByteMove> onlyA, onlyB;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(onlyA));
  std::set_difference(b.begin(), b.end(), a.begin(), a.end(), std::back_inserter(onlyB));
  std::ostringstream os;
  os << a.size() << " vs " << b.size() << " bytes; " << onlyA.size() << " only in first, "
     << onlyB.size() << " only in second";
  if (!onlyA.empty()) os << "; e.g. first has " << describe(onlyA.front());
  if (!onlyB.empty()) os << "; e.g. second has " << describe(onlyB.front());
  return os.str();
}

inline bool hasDuplicates(const std::vector<ByteMove>& sorted) {
  return std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
}

// Expected reason of a PlanError thrown by `fn`.
template <class Fn>
::testing::AssertionResult throwsReason(Fn&& fn, Reason want) {
  try {
    fn();
  } catch (const PlanError& e) {
    if (e.reason() == want) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "PlanError with reason " << reasonName(e.reason())
                                         << " (" << e.what() << "), wanted " << reasonName(want);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "threw a non-PlanError: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw, wanted " << reasonName(want);
}

}  // namespace tide_test
