#include "fabric/cuda/wait_watchdog.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <memory>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fabric/cuda/cuda_check.hpp"

namespace tide::fabric::cuda {

namespace {
// Deadlines are seconds; polling more often than this only competes with the
// issuing thread for the driver.
constexpr auto kPollInterval = std::chrono::milliseconds(5);
}

WaitWatchdog::WaitWatchdog(int rank, int device, double timeoutSeconds)
    : rank_(rank),
      device_(device),
      timeout_(timeoutSeconds),
      stall_(timeoutSeconds, [this](double seconds) { failStopStalled(seconds); }),
      thread_([this] { run(); }) {}

WaitWatchdog::~WaitWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
  cudaSetDevice(device_);
  for (Pending& p : pending_) {
    cudaEventDestroy(p.started);
    cudaEventDestroy(p.passed);
  }
  for (cudaEvent_t e : freeEvents_) cudaEventDestroy(e);
  if (nextStarted_ != nullptr) cudaEventDestroy(nextStarted_);
}

cudaEvent_t WaitWatchdog::takeEvent() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!freeEvents_.empty()) {
      cudaEvent_t e = freeEvents_.back();
      freeEvents_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  TIDE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  return e;
}

void WaitWatchdog::before(cudaStream_t stream) {
  if (nextStarted_ != nullptr) {
    // The wait after the previous before() threw before its after(): that event goes back to the pool.
    std::lock_guard<std::mutex> lock(mu_);
    freeEvents_.push_back(nextStarted_);
    nextStarted_ = nullptr;
  }
  cudaEvent_t e = takeEvent();
  const cudaError_t cudaEventRecord_of_wait_start = cudaEventRecord(e, stream);
  if (cudaEventRecord_of_wait_start != cudaSuccess) {
    std::lock_guard<std::mutex> lock(mu_);
    freeEvents_.push_back(e);
  }
  TIDE_CUDA_CHECK(cudaEventRecord_of_wait_start);
  nextStarted_ = e;
}

void WaitWatchdog::after(cudaStream_t stream, WaitRecord record) {
  Pending p;
  p.record = std::move(record);
  p.started = nextStarted_;
  nextStarted_ = nullptr;
  p.stream = stream;
  p.passed = takeEvent();
  TIDE_CUDA_CHECK(cudaEventRecord(p.passed, stream));
  bool wasIdle = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wasIdle = pending_.empty();
    pending_.push_back(std::move(p));
  }
  // Only an idle watchdog needs waking: a busy one polls every kPollInterval
  // anyway, and waking it on every wait (tens per collective) makes it query
  // CUDA events against the issuing thread's driver calls.
  if (wasIdle) cv_.notify_all();
}

void WaitWatchdog::setErrorProbe(std::function<std::string()> probe) {
  std::lock_guard<std::mutex> lock(mu_);
  errorProbe_ = std::move(probe);
}

size_t WaitWatchdog::pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_.size();
}

bool WaitWatchdog::allPassed() {
  // Under the lock the watchdog thread cannot recycle an entry's events.
  std::lock_guard<std::mutex> lock(mu_);
  for (const Pending& p : pending_)
    if (cudaEventQuery(p.passed) != cudaSuccess) return false;
  return true;
}

// Waits on one stream pass in order, so only the oldest unpassed wait of each
// stream can be running: per stream, the watchdog polls from the oldest and
// stops at the first that has not passed. The CUDA queries run without the
// lock, so the issuing thread never blocks behind a poll.
void WaitWatchdog::run() {
  cudaSetDevice(device_);
  std::unordered_map<cudaStream_t, std::vector<Pending*>> byStream;
  std::unordered_set<const Pending*> retired;
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (pending_.empty()) {
      cv_.wait(lock, [this] { return stop_ || !pending_.empty(); });
      continue;
    }
    for (auto& [stream, list] : byStream) list.clear();
    for (Pending& p : pending_) byStream[p.stream].push_back(&p);
    lock.unlock();
    const auto now = std::chrono::steady_clock::now();
    retired.clear();
    stall_.enter();  // from here to leave(): driver and NCCL queries
    for (auto& [stream, list] : byStream)
      for (Pending* p : list) {
        if (!poll(*p, now)) break;
        retired.insert(p);
      }
    lock.lock();
    if (errorProbe_ && retired.size() < pending_.size())
      if (const std::string error = errorProbe_(); !error.empty()) {
        for (const Pending& p : pending_)
          if (retired.count(&p) == 0) failStopOnError(error, p);
      }
    stall_.leave();
    for (auto it = pending_.begin(); it != pending_.end() && !retired.empty();) {
      if (retired.erase(&*it) == 0) {
        ++it;
        continue;
      }
      freeEvents_.push_back(it->started);
      freeEvents_.push_back(it->passed);
      it = pending_.erase(it);
    }
    cv_.wait_for(lock, kPollInterval);
  }
}

bool WaitWatchdog::poll(Pending& p, std::chrono::steady_clock::time_point now) {
  // Anything but "not ready" is an error of the device (a sticky one, such as a kernel's illegal
  // address, answers every query from then on): said now, by name, not T to 2T + 10 s later as a
  // wait that never passed.
  auto failOn = [&](cudaError_t e, const char* which) {
    if (e != cudaSuccess && e != cudaErrorNotReady)
      failStopOnError(std::string("querying the event ") + which + " the wait reported " + cudaGetErrorName(e) +
                          " (" + cudaGetErrorString(e) + ")",
                      p);
  };
  const cudaError_t passed = cudaEventQuery(p.passed);
  if (passed == cudaSuccess) return true;
  failOn(passed, "after");
  if (!p.head) {
    p.head = true;
    p.headSince = now;
  }
  if (!p.running) {
    const cudaError_t started = cudaEventQuery(p.started);
    failOn(started, "before");
    if (started != cudaSuccess) {
      // The work between the stream's previous wait and this one (copies,
      // kernels, waits on other queues' events) has not finished. A wait on
      // another queue that blocks it is reported by its own deadline first;
      // past twice that, a copy or kernel itself does not end.
      const double busy = std::chrono::duration<double>(now - p.headSince).count();
      if (busy > 2 * timeout_ + 10) failStopBefore(p, busy);
      return false;
    }
    p.running = true;
    p.since = now;
    return false;
  }
  const double waited = std::chrono::duration<double>(now - p.since).count();
  if (waited > timeout_) failStop(p, waited);
  return false;
}

std::string WaitWatchdog::readCounter(const uint64_t* addr) {
  // The waiting stream is blocked, so the read goes on a private stream, with a
  // bound. And another thread may hold the driver's locks for good (a kernel
  // launch that waits for the context to idle, behind this very wait), so the
  // read runs on a helper thread and the message goes out without it if the
  // driver does not answer. What the helper made is left alone: the process is
  // about to abort.
  auto box = std::make_shared<std::promise<std::string>>();
  std::future<std::string> value = box->get_future();
  std::thread([box, addr, device = device_] {
    cudaStream_t s = nullptr;
    uint64_t* host = nullptr;
    std::string out = "unreadable";
    if (cudaSetDevice(device) == cudaSuccess && cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess &&
        cudaMallocHost(&host, sizeof(uint64_t)) == cudaSuccess &&
        cudaMemcpyAsync(host, addr, sizeof(uint64_t), cudaMemcpyDeviceToHost, s) == cudaSuccess) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (cudaStreamQuery(s) == cudaErrorNotReady && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (cudaStreamQuery(s) == cudaSuccess) out = std::to_string(*host);
    }
    box->set_value(out);
  }).detach();
  if (value.wait_for(std::chrono::seconds(3)) != std::future_status::ready)
    return "unreadable (the CUDA driver did not answer within 3 s)";
  return value.get();
}

std::string WaitRecord::awaited() const {
  if (counter == nullptr) return what + " (peer " + std::to_string(peer) + ")";
  return "counter " + std::to_string(counterId) + " >= " + std::to_string(value) + " (peer " + std::to_string(peer) +
         ", " + what + ")";
}

void WaitWatchdog::failStop(const Pending& p, double waited) {
  const WaitRecord& r = p.record;
  const std::string now = r.counter != nullptr ? "; counter is " + readCounter(r.counter) : "";
  std::fprintf(stderr,
               "[tide cuda fabric] FATAL: rank %d (device %d), call '%s', queue %d: wait for %s not satisfied "
               "after %.1f s (deadline %g s)%s. A blocked GPU stream cannot be released: aborting the process "
               "(fail stop).\n",
               rank_, device_, r.call.c_str(), r.queue, r.awaited().c_str(), waited, timeout_, now.c_str());
  std::fflush(stderr);
  std::abort();
}

void WaitWatchdog::failStopOnError(const std::string& error, const Pending& oldest) {
  const WaitRecord& r = oldest.record;
  std::fprintf(stderr,
               "[tide cuda fabric] FATAL: rank %d (device %d): %s. Waits are pending (first: call '%s', queue %d, "
               "%s) that it may never let pass: aborting the process (fail stop).\n",
               rank_, device_, error.c_str(), r.call.c_str(), r.queue, r.awaited().c_str());
  std::fflush(stderr);
  std::abort();
}

void WaitWatchdog::failStopStalled(double seconds) const {
  // The watchdog's thread is the one blocked; this runs on the monitor's.
  std::fprintf(stderr,
               "[tide cuda fabric] FATAL: rank %d (device %d): the wait watchdog's own query of CUDA events or of "
               "NCCL's asynchronous error has not returned for %.1f s (deadline %g s): the driver is blocked, as "
               "behind a stream wait that never passes, and the waits it watches can no longer be timed. Aborting "
               "the process (fail stop).\n",
               rank_, device_, seconds, timeout_);
  std::fflush(stderr);
  std::abort();
}

void WaitWatchdog::failStopBefore(const Pending& p, double waited) {
  const WaitRecord& r = p.record;
  std::fprintf(stderr,
               "[tide cuda fabric] FATAL: rank %d (device %d), call '%s', queue %d: the work enqueued before "
               "the wait for %s has not finished after %.1f s (a copy or kernel that does not end, or an event "
               "wait on a blocked queue). Aborting the process (fail stop).\n",
               rank_, device_, r.call.c_str(), r.queue, r.awaited().c_str(), waited);
  std::fflush(stderr);
  std::abort();
}

}  // namespace tide::fabric::cuda
