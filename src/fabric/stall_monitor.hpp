// A guard for a thread that must never block: the CUDA fabric's wait
// watchdog. The watchdog asks the driver (event queries, NCCL's asynchronous
// error) while it watches waits that may never pass, and some driver calls
// wait for locks that another thread's call holds until the device idles
// (device_quiescence.hpp names such calls). A watchdog stuck in such a query
// would let the very hang it exists to end go on forever. So a second thread,
// which makes no CUDA call at all, watches the watchdog: a section entered
// with enter() that has not left within the limit fails the process stop
// through onStall. Without CUDA, so that CPUs test it.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace tide::fabric {

class StallMonitor {
 public:
  // onStall(seconds spent in the section) runs on the monitor's thread, at
  // most once per entered section; the watchdog's aborts the process.
  StallMonitor(double limitSeconds, std::function<void(double)> onStall);
  ~StallMonitor();
  StallMonitor(const StallMonitor&) = delete;
  StallMonitor& operator=(const StallMonitor&) = delete;

  // Lock-free, so that the watched thread pays two atomic stores a section.
  void enter() noexcept;
  void leave() noexcept;

 private:
  void run();

  double limit_;
  std::function<void(double)> onStall_;
  // steady_clock ticks at enter(); 0 outside a section.
  std::atomic<int64_t> enteredAt_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tide::fabric
