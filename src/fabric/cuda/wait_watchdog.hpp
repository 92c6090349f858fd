// Deadlines for stream waits. A cuStreamWaitValue64 that never sees its value
// blocks its stream forever and nothing on the host can unblock it, so a host
// thread watches every pending wait: once the work before a wait has finished,
// the wait has `timeout` seconds to pass; past that the watchdog prints who
// waited for what and aborts the process (fail stop, never a hang). Its own
// driver queries are watched in turn by a thread that makes no CUDA call
// (fabric/stall_monitor.hpp): a query blocked past the deadline aborts too.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "fabric/stall_monitor.hpp"

namespace tide::fabric::cuda {

struct WaitRecord {
  std::string call;  // call context at enqueue time
  int queue = 0;
  int counterId = 0;
  uint64_t value = 0;
  int peer = -1;
  std::string what;
  const uint64_t* counter = nullptr;  // device address, read for the message; null: not a
                                      // counter wait (NCCL's ncclWaitSignal), `what` says what
  // "counter 5 >= 3" or, without a counter, `what` alone.
  std::string awaited() const;
};

class WaitWatchdog {
 public:
  WaitWatchdog(int rank, int device, double timeoutSeconds);
  ~WaitWatchdog();
  WaitWatchdog(const WaitWatchdog&) = delete;
  WaitWatchdog& operator=(const WaitWatchdog&) = delete;

  // Brackets a wait enqueued on `stream`: call before() just before the wait
  // is enqueued and after() just after it.
  void before(cudaStream_t stream);
  void after(cudaStream_t stream, WaitRecord record);

  // A question asked at every poll while waits are pending: a non-empty
  // answer (an NCCL communicator's asynchronous error) fails the process stop
  // at once with it, not at a wait's deadline with a guess. Asked under the
  // watchdog's lock: once setErrorProbe(nullptr) returns, never asked again.
  void setErrorProbe(std::function<std::string()> probe);

  double timeoutSeconds() const { return timeout_; }
  size_t pending();  // waits not yet retired (the watchdog retires passed ones within a poll interval)
  // Whether every wait enqueued so far has passed, asked of the events now.
  bool allPassed();

 private:
  struct Pending {
    WaitRecord record;
    cudaStream_t stream = nullptr;
    cudaEvent_t started = nullptr;  // work before the wait finished
    cudaEvent_t passed = nullptr;   // the wait itself passed
    bool running = false;
    bool head = false;  // oldest unpassed wait of its stream, since `headSince`
    std::chrono::steady_clock::time_point since;
    std::chrono::steady_clock::time_point headSince;
  };

  cudaEvent_t takeEvent();
  void run();
  bool poll(Pending& p, std::chrono::steady_clock::time_point now);  // true when retired
  [[noreturn]] void failStop(const Pending& p, double waited);
  [[noreturn]] void failStopBefore(const Pending& p, double waited);
  [[noreturn]] void failStopOnError(const std::string& error, const Pending& oldest);
  [[noreturn]] void failStopStalled(double seconds) const;
  std::string readCounter(const uint64_t* addr);

  int rank_;
  int device_;
  double timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  // A list, so that entries stay put while the watchdog polls them unlocked
  // (only the watchdog thread erases; after() only appends).
  std::list<Pending> pending_;
  std::vector<cudaEvent_t> freeEvents_;
  std::function<std::string()> errorProbe_;
  cudaEvent_t nextStarted_ = nullptr;  // recorded by before(), owned by after()
  bool stop_ = false;
  StallMonitor stall_;  // before thread_: the thread uses it from its start
  std::thread thread_;
};

}  // namespace tide::fabric::cuda
