// Minimal checks for the GPU tests (no GoogleTest on the GPU machines): a
// failed check prints where and why and counts; the process exits non-zero.
#pragma once

#include <cstdio>
#include <string>

namespace tide::test {

inline int& failures() {
  static int n = 0;
  return n;
}

inline int& rankForLog() {
  static int r = -1;
  return r;
}

inline void fail(const char* file, int line, const std::string& what) {
  ++failures();
  std::fprintf(stderr, "[rank %d] FAIL %s:%d: %s\n", rankForLog(), file, line, what.c_str());
  std::fflush(stderr);
}

}  // namespace tide::test

#define TCHECK(cond, msg)                                                                 \
  do {                                                                                   \
    if (!(cond)) ::tide::test::fail(__FILE__, __LINE__, std::string(#cond) + ": " + (msg)); \
  } while (0)

#define TCUDA(expr)                                                                          \
  do {                                                                                      \
    const cudaError_t e_ = (expr);                                                          \
    if (e_ != cudaSuccess) {                                                                \
      ::tide::test::fail(__FILE__, __LINE__, std::string(#expr) + ": " + cudaGetErrorString(e_)); \
      std::exit(2);                                                                         \
    }                                                                                       \
  } while (0)
