// A test double of the fabric: forwards every operation to a rank's endpoint
// with queue 0 (the caller's) mapped to a queue chosen per call, as the C API
// maps it to each call's stream (streams need not be ordered), and can fail
// the Nth copy (a call that breaks after it started). Host-fabric tests of
// consecutive calls use it, and so does the GPU's co-resident test. It can
// also run one of the communicator's queues on another (mergeQueue), which
// rebuilds an earlier issue order that a test must show to be wrong, without
// a switch for it in the communicator.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "tide/fabric.hpp"

namespace tide::test {

// Forwards to a rank's endpoint with queue 0 mapped to a queue chosen per
// call (a stream of the caller's), and optionally fails the Nth copy (a call
// that breaks after it started).
class CallerQueuePerCall final : public fabric::Endpoint {
 public:
  explicit CallerQueuePerCall(fabric::Endpoint& e) : e_(e) {}
  void bindCaller(int q) { caller_ = q; }
  void failCopyAfter(int copies) { failAfter_ = copies; }
  // Work for queue `from` goes where queue `into`'s goes (before the per-call
  // mapping of queue 0); a wait of `into` on its own event is then a no-op.
  void mergeQueue(int from, int into) {
    mergedFrom_ = from;
    mergedInto_ = into;
  }
  int rank() const override { return e_.rank(); }
  const plan::Topology& topology() const override { return e_.topology(); }
  std::byte* arena() override { return e_.arena(); }
  int64_t arenaBytes() const override { return e_.arenaBytes(); }
  std::byte* peerArena(int r) override { return e_.peerArena(r); }
  bool railsByCopy() const override { return e_.railsByCopy(); }
  bool railsTwoSided() const override { return e_.railsTwoSided(); }
  bool railSourcesInArena() const override { return e_.railSourcesInArena(); }
  std::string railsDescription() const override { return e_.railsDescription(); }
  int numQueues() const override { return collectives::kQueuesNeeded; }
  void setCallContext(const std::string& c) override { e_.setCallContext(c); }
  void copy(int q, const std::vector<fabric::CopyOp>& o) override {
    if (failAfter_ >= 0 && failAfter_-- == 0) throw fabric::FabricError(fabric::FabricError::Kind::kDevice, "injected");
    e_.copy(map(q), o);
  }
  void sum(int q, const fabric::SumOp& o) override { e_.sum(map(q), o); }
  void land(int q, const fabric::LandOp& o) override { e_.land(map(q), o); }
  void zero(int q, void* d, int64_t b) override { e_.zero(map(q), d, b); }
  void railPut(int q, int d, int64_t o, const void* s, int64_t b, int id, uint64_t v) override {
    e_.railPut(map(q), d, o, s, b, id, v);
  }
  void railRecv(int q, int s, int64_t o, int64_t b, int id, uint64_t v) override {
    e_.railRecv(map(q), s, o, b, id, v);
  }
  void signal(int q, int d, int id, uint64_t v) override { e_.signal(map(q), d, id, v); }
  void wait(int q, int id, uint64_t v, int p, const char* w) override { e_.wait(map(q), id, v, p, w); }
  uint64_t record(int q) override { return e_.record(map(q)); }
  void waitEvent(int q, int s, uint64_t ev) override { e_.waitEvent(map(q), map(s), ev); }
  bool eventLive(int q, uint64_t ev) const override { return e_.eventLive(map(q), ev); }
  void synchronize(int q) override { e_.synchronize(map(q)); }
  void synchronizeAll() override { e_.synchronizeAll(); }
  void synchronizeEvent(int q, uint64_t ev) override { e_.synchronizeEvent(map(q), ev); }
  uint64_t counterValue(int id) override { return e_.counterValue(id); }
  void delay(int q, double s) override { e_.delay(map(q), s); }
  void annotateInbox(int64_t o, int64_t b) override { e_.annotateInbox(o, b); }
  fabric::Stats stats() const override { return e_.stats(); }
  void resetStats() override { e_.resetStats(); }
  void setFabricFaults(const fabric::FabricFaults& f) override { e_.setFabricFaults(f); }
  std::string failureOfIssuedWork() const override { return e_.failureOfIssuedWork(); }
  void recordCallFailure(const std::string& m) override { e_.recordCallFailure(m); }
  void discardDeferredRails() override {
    ++discards_;
    e_.discardDeferredRails();
  }
  // How often the communicator dropped its deferred rail group (a call failed midway).
  int discards() const { return discards_; }

 private:
  int map(int q) const {
    if (q == mergedFrom_) q = mergedInto_;
    return q == 0 ? caller_ : q;
  }
  fabric::Endpoint& e_;
  int caller_ = 0;
  int discards_ = 0;
  int mergedFrom_ = -1;
  int mergedInto_ = -1;
  int failAfter_ = -1;
};

}  // namespace tide::test
