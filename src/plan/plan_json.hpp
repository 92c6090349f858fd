// JSON view of a plan (the keys tests, docs and `tide plan --json` rely on).
#pragma once

#include <string>

#include "tide/plan.hpp"

namespace tide::plan {

std::string planToJson(const Plan& plan, int indent = -1);

}  // namespace tide::plan
