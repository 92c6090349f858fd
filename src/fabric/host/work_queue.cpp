#include "fabric/host/work_queue.hpp"

#include <exception>

namespace tide::fabric::host {

WorkQueue::WorkQueue() : worker_([this] { run(); }) {}

WorkQueue::~WorkQueue() { join(); }

void WorkQueue::join() {
  requestStop();
  if (worker_.joinable()) worker_.join();
}

void WorkQueue::requestStop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
}

bool WorkQueue::stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stop_;
}

uint64_t WorkQueue::submit(Task task) {
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mu_);
    seq = ++submitted_;
    tasks_.emplace_back(seq, std::move(task));
  }
  cv_.notify_all();
  return seq;
}

uint64_t WorkQueue::submitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return submitted_;
}

uint64_t WorkQueue::completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return completed_;
}

std::exception_ptr WorkQueue::failure() const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_;
}

std::exception_ptr WorkQueue::failureUpTo(uint64_t seq) const {
  std::lock_guard<std::mutex> lock(mu_);
  return failure_ != nullptr && failedTask_ <= seq ? failure_ : nullptr;
}

bool WorkQueue::waitCompleted(uint64_t seq, std::chrono::steady_clock::duration stallLimit) const {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const uint64_t seen = completed_;
    const bool woke = cv_.wait_until(lock, std::chrono::steady_clock::now() + stallLimit,
                                     [&] { return completed_ >= seq || stop_ || completed_ != seen; });
    if (!woke || completed_ >= seq || stop_) return completed_ >= seq;
    // A task finished: the queue progresses, the stall limit starts again.
  }
}

void WorkQueue::run() {
  for (;;) {
    std::pair<uint64_t, Task> item;
    bool skip;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !tasks_.empty(); });
      if (stop_) {
        // Tear-down: what was never run is dropped, not run against memory
        // its owner is about to free.
        tasks_.clear();
        return;
      }
      item = std::move(tasks_.front());
      tasks_.pop_front();
      skip = failure_ != nullptr;
    }
    std::exception_ptr error;
    if (!skip) {
      try {
        item.second();
      } catch (...) {
        error = std::current_exception();
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (error && !failure_) {
        failure_ = error;
        failedTask_ = item.first;
      }
      completed_ = item.first;
    }
    cv_.notify_all();
  }
}

}  // namespace tide::fabric::host
