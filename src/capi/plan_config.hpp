// Translation of the C API's plan configuration into the plan library's types.
#pragma once

#include <vector>

#include "tide/plan.hpp"
#include "tide/tide.h"

namespace tide::capi {

struct PlanInputs {
  plan::Topology topo;
  std::vector<plan::ParamSpec> specs;
  plan::DType gradDtype = plan::DType::kBF16;
  plan::PlanOptions options;
};

// Throws PlanError (or std::invalid_argument for malformed pointers).
PlanInputs parsePlanConfig(const tidePlanConfig_t* config);

}  // namespace tide::capi
