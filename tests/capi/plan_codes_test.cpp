// tidePlanCreate with enum fields holding codes outside their enumerations,
// as a C caller may store them: refused, naming the field and the code. The
// library reads such fields as the ints they are (loading 7 as tideMode_t is
// undefined behaviour in C++, which the sanitizer build aborts on).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "tide/tide.h"
#include "test_seed.hpp"

namespace {

// A valid one-parameter config; `set` then writes a raw code into one enum field.
struct Config {
  int ndims[1] = {2};
  int64_t dims[2] = {64, 32};
  tideDataType_t dtypes[1] = {tideBF16};
  tidePlanConfig_t c{};
  Config() {
    c.nodes = 1;
    c.gpusPerNode = 2;
    c.numParams = 1;
    c.ndims = ndims;
    c.dims = dims;
    c.dtypes = dtypes;
    c.gradDtype = tideBF16;
    c.mode = tideInPlace;
    c.landing = tideLandPull;
  }
};

template <typename Enum>
void setCode(Enum& field, int code) {
  static_assert(sizeof(Enum) == sizeof(int));
  std::memcpy(&field, &code, sizeof code);
}

std::string refusal(const tidePlanConfig_t& c) {
  tidePlan_t plan = nullptr;
  const tideResult_t r = tidePlanCreate(&c, &plan);
  if (r == tideSuccess) {
    tidePlanDestroy(plan);
    return "";
  }
  return tideGetLastError();
}

TEST(PlanCodes, CodesOutsideTheEnumsAreRefusedNamingTheField) {
  TIDE_TRACED_SEED(seed);
  std::mt19937_64 rng(seed);
  const int code = 2 + static_cast<int>(rng() % 1000);  // no enum here has a value of 2 or more
  SCOPED_TRACE("code " + std::to_string(code));
  const std::string n = std::to_string(code);
  {
    Config k;
    EXPECT_EQ(refusal(k.c), "");  // the base config is valid
  }
  {
    Config k;
    setCode(k.dtypes[0], code);
    EXPECT_NE(refusal(k.c).find("dtypes[0]: unknown dtype code " + n), std::string::npos) << refusal(k.c);
  }
  {
    Config k;
    setCode(k.c.gradDtype, -code);
    EXPECT_NE(refusal(k.c).find("gradDtype: unknown dtype code -" + n), std::string::npos) << refusal(k.c);
  }
  {
    Config k;
    setCode(k.c.mode, code);
    EXPECT_NE(refusal(k.c).find("unknown mode " + n), std::string::npos) << refusal(k.c);
  }
  {
    Config k;
    setCode(k.c.landing, code);
    EXPECT_NE(refusal(k.c).find("unknown landing " + n), std::string::npos) << refusal(k.c);
  }
}

}  // namespace
