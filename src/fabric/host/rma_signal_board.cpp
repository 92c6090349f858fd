#include "fabric/host/rma_signal_board.hpp"

namespace tide::fabric::host {

RmaSignalBoard::RmaSignalBoard(int ranks)
    : ranks_(ranks), counts_(std::make_unique<std::atomic<uint64_t>[]>(static_cast<size_t>(ranks) * ranks * 2)) {
  for (size_t i = 0; i < static_cast<size_t>(ranks) * ranks * 2; ++i) counts_[i].store(0);
}

uint64_t RmaSignalBoard::add(int receiver, int sender, Class cls) {
  uint64_t now = 0;
  {
    // Under the lock, so that a waiter between its check and its sleep
    // cannot miss the wake-up.
    std::lock_guard<std::mutex> lock(mu_);
    now = slot(receiver, sender, cls).fetch_add(1) + 1;
  }
  cv_.notify_all();
  return now;
}

uint64_t RmaSignalBoard::count(int receiver, int sender, Class cls) const {
  return slot(receiver, sender, cls).load();
}

}  // namespace tide::fabric::host
