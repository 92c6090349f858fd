// C API for host-fabric runs: the engine behind `tide bench --fabric host`.
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "bench/host_run.hpp"
#include "capi/errors.hpp"
#include "capi/plan_config.hpp"

namespace {

nlohmann::json statsJson(const tide::fabric::Stats& s) {
  return {{"copy_bytes", s.copyBytes}, {"rail_bytes", s.railBytes}, {"copy_descriptors", s.copyOps},
          {"rail_puts", s.railPuts},   {"sum_elems", s.sumElems},   {"land_elems", s.landElems}};
}

char* dupString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (!out) throw std::bad_alloc();
  std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

}  // namespace

TIDE_API tideResult_t tideHostRun(const tidePlanConfig_t* config, const tideHostRunOptions_t* options, char** json) {
  using namespace tide;
  return capi::guarded("tideHostRun", [&]() -> tideResult_t {
    if (!json) return capi::invalid("tideHostRun", "null json");
    *json = nullptr;
    if (!config) return capi::invalid("tideHostRun", "null config");
    if (!options) return capi::invalid("tideHostRun", "null options");
    if (options->iters < 1) return capi::invalid("tideHostRun", "iters must be >= 1");
    if (options->inputKind < 0 || options->inputKind > 2) return capi::invalid("tideHostRun", "unknown input kind");
    if (!(options->timeoutSeconds > 0 && options->timeoutSeconds <= 1e6))  // NaN and infinity fail too
      return capi::invalid("tideHostRun", "timeout must be in (0, 1e6] seconds");
    capi::PlanInputs in;
    bench::HostRunOptions o;
    try {
      in = capi::parsePlanConfig(config);
      o.fault.kind = collectives::parseFault(options->fault ? options->fault : "none");
    } catch (const std::invalid_argument& e) {
      return capi::invalid("tideHostRun", e.what());
    }
    o.topo = in.topo;
    o.specs = in.specs;
    o.gradDtype = in.gradDtype;
    o.planOptions = in.options;
    o.iters = options->iters;
    o.seed = options->seed;
    o.inputs = static_cast<bench::InputKind>(options->inputKind);
    o.timeoutSeconds = options->timeoutSeconds;
    o.fault.rank = options->faultRank;
    if (options->rails < 0 || options->rails > 2) return capi::invalid("tideHostRun", "rails must be 0, 1 or 2");
    o.rails = static_cast<fabric::host::HostRails>(options->rails);
    if (o.fault.rank < 0 || o.fault.rank >= o.topo.ranks()) return capi::invalid("tideHostRun", "fault rank out of range");
    bench::HostRunResult r;
    try {
      r = bench::runOnHost(o);
    } catch (const std::invalid_argument& e) {
      return capi::invalid("tideHostRun", e.what());
    }
    const plan::Plan& p = r.plan;
    nlohmann::json j;
    j["topology"] = {{"nodes", o.topo.nodes}, {"gpus_per_node", o.topo.gpusPerNode}, {"ranks", o.topo.ranks()}};
    j["rails"] = fabric::host::hostRailsName(o.rails);
    j["fault"] = collectives::faultName(o.fault.kind);
    j["fault_firings"] = r.faultFirings;
    // What the inputs were and so how the outputs were checked (integer sums exactly).
    static constexpr const char* kInputNames[] = {"normal", "integer", "nonfinite"};
    j["inputs"] = kInputNames[options->inputKind];
    j["error"] = r.error;
    // "error": the run stopped before every output was compared, so its counts are what
    // was found wrong until then, and no error figure is given (0 would read as exact).
    const char* verdict = !r.error.empty() ? "error" : nullptr;
    j["all_gather"] = {{"check", verdict ? verdict : r.allGather.ok ? "ok" : "failed"},
                       {"wrong_bytes", r.allGather.wrong},
                       {"seconds", r.allGather.seconds},
                       {"bytes", p.group.unshardedBytes()},
                       {"rounds", p.ag.rounds.size()},
                       {"descriptors", p.ag.descriptors},
                       {"traffic", statsJson(r.allGather.stats)}};
    j["reduce_scatter"] = {{"check", verdict ? verdict : r.reduceScatter.ok ? "ok" : "failed"},
                           {"wrong_elems", r.reduceScatter.wrong},
                           {"exact", o.inputs == bench::InputKind::kInteger},
                           // nccl-tests' size for a reduce-scatter: every rank's output, here fp32.
                           {"bytes", p.group.outBytes() * o.topo.ranks()},
                           {"seconds", r.reduceScatter.seconds},
                           {"waves", p.rs.waves.size()},
                           {"rounds", p.rs.networkRounds},
                           {"level1_descriptors", p.rs.level1Descriptors},
                           {"staging_bytes", p.rs.stagingBytes},
                           {"traffic", statsJson(r.reduceScatter.stats)}};
    if (!verdict) j["reduce_scatter"]["max_rel_err"] = r.reduceScatter.maxRelErr;
    *json = dupString(j.dump());
    if (!r.error.empty()) {
      capi::setLastError(tideTimeout, "fabric_failure", r.error);
      return tideTimeout;
    }
    return tideSuccess;
  });
}

TIDE_API const char* tideFaultNames(void) {
  static const std::string names = [] {
    std::string s;
    for (tide::collectives::Fault f : tide::collectives::allFaults()) {
      if (!s.empty()) s += ",";
      s += tide::collectives::faultName(f);
    }
    return s;
  }();
  return names.c_str();
}

TIDE_API void tideFreeString(char* s) { std::free(s); }
