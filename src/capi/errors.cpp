#include "capi/errors.hpp"

namespace tide::capi {
namespace {
thread_local std::string lastMessage;
thread_local std::string lastReason = "ok";
}  // namespace

const char* lastErrorMessage() { return lastMessage.c_str(); }
const char* lastErrorReason() { return lastReason.c_str(); }

void setLastError(tideResult_t, const std::string& reason, const std::string& message) {
  lastReason = reason;
  lastMessage = message;
}

void clearLastError() {
  lastReason = "ok";
  lastMessage.clear();
}

tideResult_t invalid(const char* call, const std::string& message) {
  setLastError(tideInvalidArgument, "bad_argument", std::string(call) + ": " + message);
  return tideInvalidArgument;
}

}  // namespace tide::capi

TIDE_API const char* tideGetLastError(void) { return tide::capi::lastErrorMessage(); }
TIDE_API const char* tideGetLastReason(void) { return tide::capi::lastErrorReason(); }

TIDE_API const char* tideGetErrorString(tideResult_t result) {
  switch (result) {
    case tideSuccess: return "success";
    case tideInvalidArgument: return "invalid argument";
    case tidePlanRejected: return "plan rejected";
    case tideInternalError: return "internal error";
    case tideTimeout: return "timeout";
    case tideProtocolError: return "protocol error";
    case tideUnavailable: return "unavailable";
  }
  return "unknown result";
}
