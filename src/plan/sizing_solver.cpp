// Sizing solver of App. G: Eq. 13 (sum CTAs), Eq. 14 (landing CTAs) and the
// rule that doubles the round width k while per-round waits dominate.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "tide/plan.hpp"

namespace tide::plan {

namespace {

// A calibration value as tide.make_plan's key gives it: `scale` converts the
// field's unit (B/s, s) to the key's (GB/s, ms), %g keeps a tiny or huge value
// readable (std::to_string printed -1e-6 ms as "-0.000000"); the field's own
// value, in its own unit, follows where the units differ.
std::string calibrationValueText(double v, double scale, const char* unit, const char* fieldUnit) {
  char text[96];
  if (scale == 1)
    std::snprintf(text, sizeof text, "%g", v);
  else
    std::snprintf(text, sizeof text, "%g %s (%g %s)", v * scale, unit, v, fieldUnit);
  return text;
}

// A CTA count the solver computed, as an int: past kMaxCtaBudget (or NaN) the
// calibration is refused with what it asked for, as a caller's budget past it
// is (RsOptions): such a budget spreads the sum or landing over every SM, and
// comes from a rate per CTA far too low or given in the wrong unit.
int ctaCount(double ctas, const char* what) {
  if (!(ctas <= static_cast<double>(kMaxCtaBudget))) {
    char count[32];  // %g: a huge count in a few digits, not std::to_string's hundreds
    std::snprintf(count, sizeof count, "%g", ctas);
    throw PlanError(Reason::kBadCalibration, std::string("the calibration asks for ") + count + " " + what +
                                                 " CTAs, more than a CTA budget holds (" +
                                                 std::to_string(kMaxCtaBudget) +
                                                 "): a rate per CTA far too low, or not in GB/s?");
  }
  return std::max(1, static_cast<int>(ctas));
}

}  // namespace

void Calibration::validate() const {
  // Each field by its name (tide.make_plan's key in parentheses, in GB/s or ms there).
  struct Field {
    const char* name;
    double value, scale;
    const char* unit;
  };
  const Field positive[] = {{"nicBw (nic_gbps)", nicBw, 1e-9, "GB/s"},
                            {"fabricBw (fabric_gbps)", fabricBw, 1e-9, "GB/s"},
                            {"sumBwPerCta (sum_gbps_per_cta)", sumBwPerCta, 1e-9, "GB/s"},
                            {"landBwPerCta (land_gbps_per_cta)", landBwPerCta, 1e-9, "GB/s"},
                            {"landCap (land_cap_gbps)", landCap, 1e-9, "GB/s"},
                            {"skew", skew, 1, ""},
                            {"tail", tail, 1, ""}};
  for (const Field& f : positive)
    if (!(f.value > 0) || !std::isfinite(f.value))
      throw PlanError(Reason::kBadCalibration, std::string("calibration ") + f.name +
                                                   " must be positive and finite, got " +
                                                   calibrationValueText(f.value, f.scale, f.unit, "B/s"));
  if (!(roundWait >= 0) || !std::isfinite(roundWait))
    throw PlanError(Reason::kBadCalibration, "calibration roundWait (round_wait_ms) must be finite and >= 0, got " +
                                                 calibrationValueText(roundWait, 1e3, "ms", "s"));
  if (maxRoundWidth < 1)
    throw PlanError(Reason::kBadCalibration,
                    "calibration maxRoundWidth must be >= 1, got " + std::to_string(maxRoundWidth));
}


int countNetworkRounds(int nodes, int waveWidth, int roundWidth) {
  if (nodes <= 1) return 0;
  // Wave width 0 would never advance (RsOptions reads 0 as L; this does not).
  if (waveWidth < 1 || roundWidth < 1)
    throw PlanError(Reason::kBadOption, "network rounds need wave width and round width >= 1, got " +
                                            std::to_string(waveWidth) + " and " + std::to_string(roundWidth));
  int rounds = 0;
  for (int first = 1; first <= nodes; first += waveWidth) {
    const int last = std::min(first + waveWidth - 1, nodes);
    const int remote = std::min(last, nodes - 1) - first + 1;  // contributor M is local
    if (remote > 0) rounds += (remote + roundWidth - 1) / roundWidth;
  }
  return rounds;
}

SolverResult solveSizing(const Topology& topo, int gradItemSize, int64_t outBytes, int waveWidth,
                         int passes, const Calibration& cal, GivenCtas given) {
  // The kernels cap their grids at the work, so a larger budget only misleads the plan's readers
  // (the paper's budgets are 4-16 sum and 1-4 landing CTAs; a GPU has a few hundred SMs).
  for (const auto& [name, ctas] : {std::pair<const char*, int>{"sum CTAs", given.sum}, {"landing CTAs", given.landing}})
    if (ctas < 0 || ctas > kMaxCtaBudget)
      throw PlanError(Reason::kBadOption, std::string(name) + " must be in 1.." + std::to_string(kMaxCtaBudget) +
                                              " (0: the solver's), got " + std::to_string(ctas));
  cal.validate();
  const int m = topo.nodes;
  const int l = topo.gpusPerNode;
  if (waveWidth < 1 || waveWidth > l || passes < 1 || gradItemSize < 1 || outBytes < 0)
    throw PlanError(Reason::kBadOption, "sizing needs wave width in 1..L=" + std::to_string(l) +
                                            ", passes >= 1, a gradient item size >= 1 and output bytes >= 0, got " +
                                            std::to_string(waveWidth) + ", " + std::to_string(passes) + ", " +
                                            std::to_string(gradItemSize) + ", " + std::to_string(outBytes));
  SolverResult r;
  // Eq. 13: enough local-sum throughput to feed the rail: per output
  // element the rail carries one fp32 partial (4 bytes) and the sum moves
  // L gradient items in and 4 bytes out. One node has no rail: there the sum
  // keeps pace with the copy engines' pushes, which carry (L-1) gradient
  // items per output element. (L = 1 on one node pushes nothing: the rail
  // form bounds that lone local sum.)
  const double sumBytesPerElem = l * gradItemSize + 4.0;
  const double feedBytesPerElem = m == 1 && l > 1 ? (l - 1.0) * gradItemSize : 4.0;
  const double feed = m == 1 ? cal.fabricBw : cal.nicBw;
  const double sumRatio = sumBytesPerElem / feedBytesPerElem * feed / cal.sumBwPerCta;
  r.sumCtas = given.sum > 0 ? given.sum : ctaCount(std::ceil(cal.skew * sumRatio - 1e-9), "sum");
  if (m == 1) {
    r.landingCtas = 0;
    r.roundWidth = 0;
    return r;
  }
  r.nicSeconds = static_cast<double>(m - 1) * static_cast<double>(outBytes) / cal.nicBw;
  // A rate that is positive and finite but tiny against the bytes to send
  // makes the wire time infinite, which the plan's JSON could only write as null.
  if (!std::isfinite(r.nicSeconds)) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "the calibration's NIC rate (%g B/s) makes the wire time of %g bytes infinite",
                  cal.nicBw, static_cast<double>(m - 1) * static_cast<double>(outBytes));
    throw PlanError(Reason::kBadCalibration, msg);
  }
  // Eq. 14: bound the final landing tail, capped by the fabric ceiling.
  const double capCtas = std::max(1.0, std::floor(cal.landCap / cal.landBwPerCta));
  const double perPass = static_cast<double>(outBytes) / passes;
  double tailCtas = std::ceil(perPass / (cal.tail * r.nicSeconds * cal.landBwPerCta) - 1e-9);
  if (!(tailCtas >= 1)) tailCtas = 1;  // no bytes to land (0 / 0)
  r.landingCtas = given.landing > 0 ? given.landing : ctaCount(std::min(capCtas, tailCtas), "landing");
  // k starts at min(2, M-1) and doubles up to k_max while waits dominate. App. G
  // states the rule at one pass (N_rounds(M-1, k, W) t_rnd > 0.1 t_NIC); a call of
  // P passes waits P times as many rounds against the same t_NIC, so all of them
  // count here (at one pass the two agree).
  const int kMax = std::max(1, std::min(cal.maxRoundWidth, m - 1));
  int k = std::min(2, kMax);
  while (k < kMax) {
    const int rounds = passes * countNetworkRounds(m, waveWidth, k);
    const int next = std::min(2 * k, kMax);
    const int nextRounds = passes * countNetworkRounds(m, waveWidth, next);
    if (rounds * cal.roundWait > 0.10 * r.nicSeconds && nextRounds < rounds)
      k = next;
    else
      break;
  }
  r.roundWidth = k;
  return r;
}

}  // namespace tide::plan
