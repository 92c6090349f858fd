// A duration as messages print it: "%.4g s" gives "10 s", "0.25 s", "30 s" for
// a deadline left at 29.9995 s, and "1e-09 s", where std::to_string gave
// "10.000000 s" and turned a nanosecond into "0.000000 s".
#pragma once

#include <cstdio>
#include <string>

namespace tide::fabric {

inline std::string secondsText(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g s", seconds);
  return text;
}

}  // namespace tide::fabric
