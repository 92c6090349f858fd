// C API for plans: tidePlanCreate / tidePlanGetJson / tidePlanDestroy.
#include <string>
#include <vector>

#include "capi/errors.hpp"
#include "plan/plan_json.hpp"

struct tidePlan {
  tide::plan::Plan plan;
  std::string json;
};

namespace {

tide::plan::DType toDtype(tideDataType_t t) {
  if (t == tideBF16) return tide::plan::DType::kBF16;
  if (t == tideFP32) return tide::plan::DType::kFP32;
  throw tide::plan::PlanError(tide::plan::Reason::kUnsupportedDtype,
                              "unknown dtype code " + std::to_string(static_cast<int>(t)));
}

}  // namespace

TIDE_API tideResult_t tidePlanCreate(const tidePlanConfig_t* config, tidePlan_t* out) {
  using namespace tide::plan;
  return tide::capi::guarded("tidePlanCreate", [&]() -> tideResult_t {
    if (!config || !out) return tide::capi::invalid("tidePlanCreate", "null config or output");
    *out = nullptr;
    if (config->numParams < 0) return tide::capi::invalid("tidePlanCreate", "negative numParams");
    if (config->numParams > 0 && (!config->ndims || !config->dtypes))
      return tide::capi::invalid("tidePlanCreate", "null ndims or dtypes");
    const Topology topo = Topology::make(config->nodes, config->gpusPerNode);
    std::vector<ParamSpec> specs(static_cast<size_t>(config->numParams));
    size_t at = 0;
    for (size_t p = 0; p < specs.size(); ++p) {
      const int nd = config->ndims[p];
      if (nd < 0 || nd > 16) return tide::capi::invalid("tidePlanCreate", "ndims out of range");
      if (nd > 0 && !config->dims) return tide::capi::invalid("tidePlanCreate", "null dims");
      specs[p].shape.assign(config->dims + at, config->dims + at + nd);
      specs[p].dtype = toDtype(config->dtypes[p]);
      at += static_cast<size_t>(nd);
    }
    PlanOptions opt;
    opt.rs.mode = config->mode == tideSlotReuse ? Mode::kSlotReuse : Mode::kInPlace;
    if (config->mode != tideInPlace && config->mode != tideSlotReuse)
      return tide::capi::invalid("tidePlanCreate", "unknown mode");
    opt.rs.waveWidth = config->waveWidth;
    opt.rs.roundWidth = config->roundWidth;
    opt.rs.passes = config->passes == 0 ? 1 : config->passes;
    opt.rs.sumCtas = config->sumCtas;
    opt.rs.landingCtas = config->landingCtas;
    if (const tideCalibration_t* c = config->calibration) {
      opt.rs.calibration.nicBw = c->nicBw;
      opt.rs.calibration.sumBwPerCta = c->sumBwPerCta;
      opt.rs.calibration.landBwPerCta = c->landBwPerCta;
      opt.rs.calibration.landCap = c->landCap;
      opt.rs.calibration.roundWait = c->roundWait;
    }
    auto* handle = new tidePlan{makePlan(topo, specs, toDtype(config->gradDtype), opt), {}};
    handle->json = planToJson(handle->plan);
    *out = handle;
    return tideSuccess;
  });
}

TIDE_API tideResult_t tidePlanGetJson(tidePlan_t plan, const char** json) {
  if (!plan || !json) return tide::capi::invalid("tidePlanGetJson", "null plan or output");
  *json = plan->json.c_str();
  return tideSuccess;
}

TIDE_API tideResult_t tidePlanDestroy(tidePlan_t plan) {
  delete plan;
  return tideSuccess;
}
