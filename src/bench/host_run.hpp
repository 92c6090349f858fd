// Runs TIDE-AG and TIDE-RS on the host fabric (ranks as threads) with fresh
// random inputs, checks every output against an independent reference
// (byte-exact gather, float64 sums), and reports traffic and time. Used by
// the tests and by `tide bench --fabric host`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/random_inputs.hpp"
#include "collectives/communicator.hpp"
#include "collectives/faults.hpp"
#include "fabric/host/host_rails.hpp"
#include "tide/fabric.hpp"
#include "tide/plan.hpp"

namespace tide::bench {

struct HostRunOptions {
  plan::Topology topo;
  std::vector<plan::ParamSpec> specs;
  plan::DType gradDtype = plan::DType::kBF16;
  plan::PlanOptions planOptions;
  int iters = 1;
  uint64_t seed = 0;
  InputKind inputs = InputKind::kRandomNormal;
  float alpha = 1.0f;
  bool accumulate = false;
  double timeoutSeconds = 5.0;
  collectives::FaultConfig fault;
  bool keepOutputs = false;  // return every rank's last outputs (determinism tests)
  bool checkProtocol = false;  // run the protocol checker (slow; tests)
  fabric::host::HostRails rails = fabric::host::HostRails::kPut;  // how rails travel (HostOptions::rails)
  bool inPlaceShard = false;   // one node: the host writes each shard into its own landing rows, AG in place
  collectives::IssueOptions issue;  // how the communicators issue (the same bits either way)
};

struct CollectiveReport {
  bool ok = false;            // every output matched its reference
  double maxRelErr = 0;       // RS: max |y - ref| / max(1, |ref|_inf)
  int64_t wrong = 0;          // elements (RS) or bytes (AG) that did not match
  double seconds = 0;         // median wall time per call, the first (warm-up) call left out when more ran
  fabric::Stats stats;        // summed over ranks, per call
};

struct HostRunResult {
  CollectiveReport allGather;
  CollectiveReport reduceScatter;
  std::string error;          // a fabric error (deadline, peer failure), empty if none
  // How often the injected fault acted on its rank (its collectives' and its
  // fabric's counts): 0 means this run gave it nothing to act on, so "not
  // detected" would say nothing about the checks.
  int64_t faultFirings = 0;
  plan::Plan plan;
  std::vector<std::vector<uint8_t>> landings;  // per rank, last call (keepOutputs)
  std::vector<std::vector<float>> outputs;     // per rank, last call (keepOutputs)
};

HostRunResult runOnHost(const HostRunOptions& options);
// The host memory runOnHost counts before it starts, in bytes (it refuses a run
// needing more than the host has): every rank's arena, shard, gradients and
// their reference copy, output (twice when accumulating), one float64 reference.
double hostRunMemoryNeed(const HostRunOptions& options);

}  // namespace tide::bench
