// Two-sided rails on the host fabric (HostRails::kSendRecv): the
// stand-in for NCCL send/recv between ranks of one rail, so that the
// collectives' two-sided path runs, and fails, on CPUs as it would on GPUs.
// A send posts a message (the sender's address and size) on the (src, dst)
// channel; the receiver takes the channel's messages in order, copies the
// bytes and marks each delivered; the sender's group completes only once
// its messages are delivered, like an NCCL send. Threads mode only: the
// message carries a pointer into the sender's memory, so a sender that gives
// up withdraws its undelivered messages before its caller may reuse that
// memory, and a receiver takes none once the job has failed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

namespace tide::fabric::host {

class RailMailbox {
 public:
  struct Message {
    const std::byte* src = nullptr;
    int64_t bytes = 0;
    uint64_t seq = 0;  // 1-based position on its channel
    int channelSrc = 0, channelDst = 0;
    bool delivered = false;
    bool taken = false;     // a receiver has it (and may be reading src)
    bool released = false;  // the receiver is done with src, delivered or not
  };
  using Deadline = std::chrono::steady_clock::time_point;

  explicit RailMailbox(int ranks);

  // `announce(seq)` runs before the message becomes visible to the receiver.
  template <typename Announce>
  std::shared_ptr<Message> post(int src, int dst, const void* data, int64_t bytes, Announce announce);
  // The channel's next message, or null at the deadline or once `stop` says
  // so (then even with messages queued: their senders may have given up).
  // A taken message must be delivered or released.
  template <typename Stop>
  std::shared_ptr<Message> take(int src, int dst, Deadline end, Stop stop);
  void deliver(const std::shared_ptr<Message>& m);
  // The receiver is done with a taken message it did not deliver.
  void release(const std::shared_ptr<Message>& m);
  // The sender gives up on `m`: removed if not taken yet, else awaited until
  // its receiver has released it (a receiver only copies meanwhile). True
  // once no receiver can read m's source; false if one still held it at `end`.
  bool withdraw(const std::shared_ptr<Message>& m, Deadline end);
  // Has `m` been delivered by the deadline (or before `stop` says so)?
  template <typename Stop>
  bool awaitDelivery(const std::shared_ptr<Message>& m, Deadline end, Stop stop);

 private:
  struct Channel {
    std::deque<std::shared_ptr<Message>> queue;
    uint64_t posted = 0;
  };
  Channel& channel(int src, int dst) { return channels_[static_cast<size_t>(src * ranks_ + dst)]; }

  int ranks_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Channel> channels_;
};

template <typename Announce>
std::shared_ptr<RailMailbox::Message> RailMailbox::post(int src, int dst, const void* data, int64_t bytes,
                                                        Announce announce) {
  auto m = std::make_shared<Message>();
  m->src = static_cast<const std::byte*>(data);
  m->bytes = bytes;
  m->channelSrc = src;
  m->channelDst = dst;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Channel& c = channel(src, dst);
    m->seq = ++c.posted;
    announce(m->seq);
    c.queue.push_back(m);
  }
  cv_.notify_all();
  return m;
}

template <typename Stop>
std::shared_ptr<RailMailbox::Message> RailMailbox::take(int src, int dst, Deadline end, Stop stop) {
  std::unique_lock<std::mutex> lock(mu_);
  Channel& c = channel(src, dst);
  for (;;) {
    if (stop()) return nullptr;
    if (!c.queue.empty()) break;
    if (std::chrono::steady_clock::now() > end) return nullptr;
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  std::shared_ptr<Message> m = c.queue.front();
  c.queue.pop_front();
  m->taken = true;
  return m;
}

template <typename Stop>
bool RailMailbox::awaitDelivery(const std::shared_ptr<Message>& m, Deadline end, Stop stop) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!m->delivered) {
    if (stop() || std::chrono::steady_clock::now() > end) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace tide::fabric::host
