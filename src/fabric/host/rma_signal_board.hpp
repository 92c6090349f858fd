// Counted signals of the host fabric's RMA rails (HostRails::kRma): the
// stand-in for NCCL host RMA's signal counts, one per (receiver, sender,
// class). A class is a communicator: data signals (one per put) and credits
// (one per receive posted) count apart, as on the CUDA fabric's two rail
// communicators. Counts only grow; a waiter names the total it needs.
// Threads mode only.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>

namespace tide::fabric::host {

class RmaSignalBoard {
 public:
  enum Class : int { kData = 0, kCredit = 1 };
  using Deadline = std::chrono::steady_clock::time_point;

  explicit RmaSignalBoard(int ranks);

  // One more signal of `cls` from `sender` at `receiver`; returns the new count.
  uint64_t add(int receiver, int sender, Class cls);
  uint64_t count(int receiver, int sender, Class cls) const;
  // Has the count reached `total` by the deadline (or before `stop` says so)?
  template <typename Stop>
  bool awaitTotal(int receiver, int sender, Class cls, uint64_t total, Deadline end, Stop stop);

 private:
  std::atomic<uint64_t>& slot(int receiver, int sender, Class cls) const {
    return counts_[(static_cast<size_t>(receiver) * static_cast<size_t>(ranks_) + static_cast<size_t>(sender)) * 2 +
                   static_cast<size_t>(cls)];
  }
  int ranks_;
  std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::mutex mu_;
  std::condition_variable cv_;
};

template <typename Stop>
bool RmaSignalBoard::awaitTotal(int receiver, int sender, Class cls, uint64_t total, Deadline end, Stop stop) {
  std::atomic<uint64_t>& c = slot(receiver, sender, cls);
  std::unique_lock<std::mutex> lock(mu_);
  while (c.load() < total) {
    if (stop() || std::chrono::steady_clock::now() > end) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace tide::fabric::host
