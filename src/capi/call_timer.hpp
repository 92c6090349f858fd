// Host time spent inside one kind of C API call, summed over its successful
// calls (tideCommStats_t's allGather* and reduceScatter* fields).
#pragma once

#include <chrono>
#include <cstdint>

namespace tide::capi {

struct CallTimer {
  // Taken at a call's entry; add() at its successful return counts the call.
  struct Started {
    std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
  };

  int64_t calls = 0;
  int64_t ns = 0;

  void add(const Started& started) {
    ns += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - started.at).count();
    ++calls;
  }
};

}  // namespace tide::capi
