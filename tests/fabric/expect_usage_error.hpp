// One assertion the fabric tests share: a call refused as a usage error, with
// the words a user needs in its message.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tide/fabric.hpp"

namespace tide::fabric {

// `call` throws a FabricError of kind kUsage whose message holds `words`.
template <typename Call>
void expectUsageError(Call&& call, const std::string& words) {
  try {
    call();
    ADD_FAILURE() << "not refused; wanted a usage error with: " << words;
  } catch (const FabricError& e) {
    EXPECT_EQ(e.kind(), FabricError::Kind::kUsage) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

}  // namespace tide::fabric
