// Host-side cost of each kind of fabric operation (TIDE_HOST_PROFILE=1).
// A collective's host enqueue time bounds it once its device work is short
// (tens of stream operations per call, each a driver call); this names which
// operations that time goes to. Off by default: then a scope is one branch.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>

namespace tide::fabric::cuda {

class HostProfile {
 public:
  // kCopy: a copy list enqueued as copies (a batch); kCopyGraph: as one launch of its cached graph.
  enum Op { kCopy, kCopyGraph, kSum, kLand, kZero, kRailPut, kSignal, kWait, kRecord, kWaitEvent, kCount };

  HostProfile();  // reads TIDE_HOST_PROFILE
  bool enabled() const { return enabled_; }
  // Prints one line per operation kind (calls, items, total and mean µs) to stderr.
  void report(int rank) const;

  class Scope {
   public:
    Scope(HostProfile& p, Op op, int64_t items = 1)
        : p_(p.enabled_ ? &p : nullptr), op_(op), items_(items) {
      if (p_ != nullptr) start_ = std::chrono::steady_clock::now();
    }
    ~Scope() {
      if (p_ == nullptr) return;
      p_->ns_[op_] += std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_).count();
      p_->calls_[op_] += 1;
      p_->items_[op_] += items_;
    }
    // The operation turned out to be another kind (known only once issued).
    void retag(Op op) { op_ = op; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    HostProfile* p_;
    Op op_;
    int64_t items_;
    std::chrono::steady_clock::time_point start_;
  };

 private:
  bool enabled_ = false;
  std::array<int64_t, kCount> ns_{};
  std::array<int64_t, kCount> calls_{};
  std::array<int64_t, kCount> items_{};
};

}  // namespace tide::fabric::cuda
