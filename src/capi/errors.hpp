// Thread-local last error of the C API, and the guard that turns C++
// exceptions into result codes at the boundary.
#pragma once

#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

#include "tide/fabric.hpp"
#include "tide/plan.hpp"
#include "tide/tide.h"

#define TIDE_API extern "C" __attribute__((visibility("default")))

namespace tide::capi {

void setLastError(tideResult_t result, const std::string& reason, const std::string& message);
void clearLastError();
const char* lastErrorMessage();
const char* lastErrorReason();

// Runs `body`; any exception becomes a result code plus a last-error message.
template <typename F>
tideResult_t guarded(const char* call, F&& body) {
  try {
    clearLastError();
    return body();
  } catch (const plan::PlanError& e) {
    const bool rejected = e.reason() != plan::Reason::kBadTopology &&
                          e.reason() != plan::Reason::kBadOption &&
                          e.reason() != plan::Reason::kBadCalibration &&
                          e.reason() != plan::Reason::kUnsupportedDtype;
    const tideResult_t r = rejected ? tidePlanRejected : tideInvalidArgument;
    setLastError(r, plan::reasonName(e.reason()), std::string(call) + ": " + e.what());
    return r;
  } catch (const fabric::FabricError& e) {
    tideResult_t r = tideInternalError;
    const char* reason = "fabric";
    switch (e.kind()) {
      case fabric::FabricError::Kind::kTimeout: r = tideTimeout; reason = "timeout"; break;
      case fabric::FabricError::Kind::kPeerFailure: r = tideTimeout; reason = "peer_failure"; break;
      case fabric::FabricError::Kind::kProtocol: r = tideProtocolError; reason = "protocol_violation"; break;
      case fabric::FabricError::Kind::kUsage: r = tideInvalidArgument; reason = "bad_argument"; break;
      case fabric::FabricError::Kind::kDevice: r = tideInternalError; reason = "device_error"; break;
      case fabric::FabricError::Kind::kUnusable: r = tideInternalError; reason = "communicator_unusable"; break;
    }
    setLastError(r, reason, std::string(call) + ": " + e.what());
    return r;
  } catch (const std::invalid_argument& e) {
    setLastError(tideInvalidArgument, "bad_argument", std::string(call) + ": " + e.what());
    return tideInvalidArgument;
  } catch (const std::bad_alloc&) {
    setLastError(tideInternalError, "out_of_memory",
                 std::string(call) + ": out of host memory (std::bad_alloc); the host fabric keeps every rank's "
                                     "arena in this machine's memory");
    return tideInternalError;
  } catch (const std::system_error& e) {
    // std::thread reports a thread it could not start as EAGAIN.
    const bool noThread = e.code() == std::errc::resource_unavailable_try_again;
    setLastError(tideInternalError, noThread ? "out_of_threads" : "internal",
                 std::string(call) + ": " + e.what() +
                     (noThread ? " (could not start a thread: the host fabric runs a worker thread per queue of "
                                 "every rank in the process; fewer ranks, or a higher limit on threads)"
                               : ""));
    return tideInternalError;
  } catch (const std::exception& e) {
    setLastError(tideInternalError, "internal", std::string(call) + ": " + e.what());
    return tideInternalError;
  }
}

tideResult_t invalid(const char* call, const std::string& message);

}  // namespace tide::capi
