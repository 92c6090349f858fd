#include "fabric/stall_monitor.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace tide::fabric {

namespace {
int64_t nowTicks() { return std::chrono::steady_clock::now().time_since_epoch().count(); }
}  // namespace

StallMonitor::StallMonitor(double limitSeconds, std::function<void(double)> onStall)
    : limit_(limitSeconds), onStall_(std::move(onStall)) {
  if (!(limitSeconds > 0) || !onStall_) throw std::invalid_argument("stall monitor: want a positive limit and a handler");
  thread_ = std::thread([this] { run(); });
}

StallMonitor::~StallMonitor() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StallMonitor::enter() noexcept {
  // A tick count of 0 means "outside"; steady_clock's epoch is long past.
  enteredAt_.store(std::max<int64_t>(nowTicks(), 1), std::memory_order_relaxed);
}

void StallMonitor::leave() noexcept { enteredAt_.store(0, std::memory_order_relaxed); }

void StallMonitor::run() {
  using Clock = std::chrono::steady_clock;
  // A tenth of the limit between looks, so a stall is reported within 10 %
  // of it; never busier than every 10 ms.
  const auto interval = std::max(std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limit_ / 10)),
                                 Clock::duration(std::chrono::milliseconds(10)));
  int64_t reported = 0;  // the section already reported
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, interval, [this] { return stop_; })) {
    const int64_t entered = enteredAt_.load(std::memory_order_relaxed);
    if (entered == 0 || entered == reported) continue;
    const double spent = std::chrono::duration<double>(Clock::duration(nowTicks() - entered)).count();
    if (spent <= limit_) continue;
    reported = entered;
    lock.unlock();
    onStall_(spent);
    lock.lock();
  }
}

}  // namespace tide::fabric
