// C API for plans: tidePlanCreate / tidePlanGetJson / tidePlanDestroy.
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "capi/errors.hpp"
#include "capi/live_handles.hpp"
#include "capi/plan_config.hpp"
#include "plan/plan_json.hpp"

struct tidePlan {
  tide::plan::Plan plan;
  std::string json;
};

namespace tide::capi {
namespace {

// Plans handed out and not destroyed yet; a call holds a reference for its
// duration, so a destroy on another thread never frees a plan being read.
SharedHandles<tidePlan>& livePlans() {
  static SharedHandles<tidePlan> handles;
  return handles;
}

// Dimensions a parameter may have: bounds what is read from `dims` for one
// parameter before its shape is checked (tensors of PyTorch have at most 64,
// the parameters FSDP2 shards a handful).
constexpr int kMaxDims = 16;

// The code a C enum field holds, read as the int it is: a C caller may store
// any int there (7 as a dtype, say), and C++ may not load a value outside an
// enumeration's values as that enumeration (undefined behaviour, which UBSan
// reports), so every check below compares ints.
template <typename Enum>
int codeOf(const Enum& field) {
  static_assert(sizeof(Enum) == sizeof(int), "the C API's enums are int-sized");
  int code = 0;
  std::memcpy(&code, &field, sizeof code);
  return code;
}

// `field` names the config field in the refusal (a parameter's dtype or gradDtype).
plan::DType toDtype(int code, const std::string& field) {
  if (code == tideBF16) return plan::DType::kBF16;
  if (code == tideFP32) return plan::DType::kFP32;
  throw plan::PlanError(plan::Reason::kUnsupportedDtype,
                        field + ": unknown dtype code " + std::to_string(code) + " (tideBF16 or tideFP32)");
}

}  // namespace

PlanInputs parsePlanConfig(const tidePlanConfig_t* config) {
  using namespace tide::plan;
  if (!config) throw std::invalid_argument("null config");
  if (config->numParams < 0) throw std::invalid_argument("negative numParams");
  // Before the arrays are read: a garbage count must not size an allocation or run past them.
  if (config->numParams > kMaxParams)
    throw PlanError(Reason::kTooManyParams, "the group has " + std::to_string(config->numParams) +
                                                " parameters (at most " + std::to_string(kMaxParams) + ")");
  if (config->numParams > 0 && (!config->ndims || !config->dtypes)) throw std::invalid_argument("null ndims or dtypes");
  PlanInputs in;
  in.topo = Topology::make(config->nodes, config->gpusPerNode);
  in.specs.resize(static_cast<size_t>(config->numParams));
  size_t at = 0;
  for (size_t p = 0; p < in.specs.size(); ++p) {
    const int nd = config->ndims[p];
    if (nd < 0 || nd > kMaxDims)
      throw std::invalid_argument("parameter " + std::to_string(p) + ": ndims " + std::to_string(nd) +
                                  " outside 0.." + std::to_string(kMaxDims));
    if (nd > 0 && !config->dims) throw std::invalid_argument("parameter " + std::to_string(p) + ": null dims");
    in.specs[p].shape.assign(config->dims + at, config->dims + at + nd);
    in.specs[p].dtype = toDtype(codeOf(config->dtypes[p]), "dtypes[" + std::to_string(p) + "]");
    at += static_cast<size_t>(nd);
  }
  const int mode = codeOf(config->mode);
  if (mode != tideInPlace && mode != tideSlotReuse)
    throw std::invalid_argument("unknown mode " + std::to_string(mode) + " (tideInPlace or tideSlotReuse)");
  in.options.rs.mode = mode == tideSlotReuse ? Mode::kSlotReuse : Mode::kInPlace;
  in.options.rs.waveWidth = config->waveWidth;
  in.options.rs.roundWidth = config->roundWidth;
  in.options.rs.passes = config->passes == 0 ? 1 : config->passes;
  in.options.rs.sumCtas = config->sumCtas;
  in.options.rs.landingCtas = config->landingCtas;
  const int landing = codeOf(config->landing);
  if (landing != tideLandPull && landing != tideLandPush)
    throw std::invalid_argument("unknown landing " + std::to_string(landing) + " (tideLandPull or tideLandPush)");
  in.options.rs.landing = landing == tideLandPush ? plan::Landing::kPush : plan::Landing::kPull;
  if (config->railLane != 0 && config->railLane != 1)
    throw PlanError(Reason::kBadOption, "railLane must be 0 or 1, got " + std::to_string(config->railLane));
  in.options.rs.railLane = config->railLane == 1;
  in.options.ag.railLane = config->railLane == 1;
  if (const tideCalibration_t* c = config->calibration) {
    in.options.rs.calibration.nicBw = c->nicBw;
    in.options.rs.calibration.sumBwPerCta = c->sumBwPerCta;
    in.options.rs.calibration.landBwPerCta = c->landBwPerCta;
    in.options.rs.calibration.landCap = c->landCap;
    in.options.rs.calibration.roundWait = c->roundWait;
    // Exactly 0 keeps the default (an older caller's zeroed field); any other value goes to
    // Calibration::validate, which refuses a negative, NaN or infinite rate (it became the default).
    if (c->fabricBw != 0) in.options.rs.calibration.fabricBw = c->fabricBw;
  }
  in.gradDtype = toDtype(codeOf(config->gradDtype), "gradDtype");
  return in;
}

}  // namespace tide::capi

TIDE_API tideResult_t tidePlanCreate(const tidePlanConfig_t* config, tidePlan_t* out) {
  using namespace tide::plan;
  return tide::capi::guarded("tidePlanCreate", [&]() -> tideResult_t {
    if (!config || !out) return tide::capi::invalid("tidePlanCreate", "null config or output");
    *out = nullptr;
    tide::capi::PlanInputs in;
    try {
      in = tide::capi::parsePlanConfig(config);
    } catch (const std::invalid_argument& e) {
      return tide::capi::invalid("tidePlanCreate", e.what());
    }
    auto handle = std::make_shared<tidePlan>(tidePlan{makePlan(in.topo, in.specs, in.gradDtype, in.options), {}});
    handle->json = planToJson(handle->plan);
    *out = tide::capi::livePlans().add(std::move(handle));
    return tideSuccess;
  });
}

TIDE_API tideResult_t tidePlanGetJson(tidePlan_t plan, const char** json) {
  return tide::capi::guarded("tidePlanGetJson", [&]() -> tideResult_t {
    if (!plan || !json) return tide::capi::invalid("tidePlanGetJson", "null plan or output");
    const std::shared_ptr<tidePlan> held = tide::capi::livePlans().acquire(plan);
    if (!held) return tide::capi::invalid("tidePlanGetJson", "unknown or destroyed plan");
    *json = held->json.c_str();
    return tideSuccess;
  });
}

TIDE_API tideResult_t tidePlanDestroy(tidePlan_t plan) {
  return tide::capi::guarded("tidePlanDestroy", [&]() -> tideResult_t {
    if (!plan) return tideSuccess;  // like free(NULL)
    if (!tide::capi::livePlans().remove(plan))
      return tide::capi::invalid("tidePlanDestroy", "unknown or already destroyed plan");
    return tideSuccess;  // freed with the last reference (a concurrent tidePlanGetJson's, or the registry's)
  });
}
