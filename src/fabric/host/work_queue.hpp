// One in-order asynchronous queue of a host-fabric rank: a worker thread that
// runs tasks in submission order, like a CUDA stream.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tide::fabric::host {

class WorkQueue {
 public:
  using Task = std::function<void()>;

  WorkQueue();
  ~WorkQueue();  // finishes the running task, drops the rest
  WorkQueue(const WorkQueue&) = delete;
  WorkQueue& operator=(const WorkQueue&) = delete;

  // Returns the task's sequence number (1-based); completed() reaches it when
  // the task has run.
  uint64_t submit(Task task);
  uint64_t submitted() const;
  uint64_t completed() const;
  // First failure of a task on this queue (null if none); later tasks are skipped.
  std::exception_ptr failure() const;
  // The failure of a task numbered `seq` or earlier (null if none): work up
  // to `seq` ran whole, whatever failed after it.
  std::exception_ptr failureUpTo(uint64_t seq) const;

  // Tear-down, step 1 of 2: the worker drops what has not started, and
  // waitCompleted() stops blocking.
  void requestStop();
  // Tear-down, step 2 of 2: stops and joins the worker (idempotent). A task of
  // another queue may still be inside waitCompleted() on this one until that
  // queue's worker is joined too, so owners join every queue before
  // destroying any.
  void join();
  bool stopping() const;

  // Blocks until completed() >= seq, a stop is requested, or no task has
  // completed for `stallLimit`; false unless completed. A stall, not the
  // whole wait, is bounded: a busy queue (many calls enqueued before one
  // synchronize) is healthy as long as its tasks keep finishing.
  bool waitCompleted(uint64_t seq, std::chrono::steady_clock::duration stallLimit) const;

 private:
  void run();

  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::deque<std::pair<uint64_t, Task>> tasks_;
  uint64_t submitted_ = 0;
  uint64_t completed_ = 0;
  std::exception_ptr failure_;
  uint64_t failedTask_ = 0;  // the number of the task that set failure_
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace tide::fabric::host
