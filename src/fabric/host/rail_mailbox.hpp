// Two-sided rails on the host fabric (HostRails::kSendRecv): the
// stand-in for NCCL send/recv between ranks of one rail, so that the
// collectives' two-sided path runs, and fails, on CPUs as it would on GPUs.
// A send posts a message (the sender's address and size) on the (src, dst)
// channel; the receiver takes the channel's messages in order, copies the
// bytes and marks each delivered; the sender's group completes only once
// its messages are delivered, like an NCCL send. Threads mode only: the
// message carries a pointer into the sender's memory, so a sender that gives
// up withdraws its undelivered messages before its caller may reuse that
// memory (GroupSends), and a receiver takes none once the job has failed.
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

  // The sends one rank posts in one rail group. However the group ends, no
  // receiver may read a send's source after it: a failed group's caller
  // reuses that memory. So the destructor withdraws every send not delivered
  // (one a receiver holds is awaited until released: the receiver is only
  // copying it, so that wait is short; past `withdrawSeconds` it is reported
  // on stderr). For a delivered send there is nothing to withdraw.
  class GroupSends {
   public:
    GroupSends(RailMailbox& box, int src, double withdrawSeconds);
    ~GroupSends();
    GroupSends(const GroupSends&) = delete;
    GroupSends& operator=(const GroupSends&) = delete;

    // Posts a send from this group's rank to `dst`; `announce(seq)` runs
    // before the message becomes visible to the receiver.
    template <typename Announce>
    void post(int dst, const void* data, int64_t bytes, Announce announce) {
      posted_.push_back(box_.post(src_, dst, data, bytes, announce));
    }
    // The sends posted so far, in order.
    const std::vector<std::shared_ptr<Message>>& posted() const { return posted_; }

   private:
    RailMailbox& box_;
    int src_;
    double withdrawSeconds_;
    std::vector<std::shared_ptr<Message>> posted_;
  };

  explicit RailMailbox(int ranks);

  // Receives the (src, dst) channel's next message: `copy(message)` reads
  // its source, then the message is delivered. False, with nothing taken, at
  // the deadline or once `stop` says so (then even with messages queued:
  // their senders may have given up). If `copy` throws, the message is
  // released undelivered, since its sender may be waiting to withdraw it,
  // and the exception goes on.
  template <typename Stop, typename Copy>
  bool receive(int src, int dst, Deadline end, Stop stop, Copy copy);
  // Has `m` been delivered by the deadline (or before `stop` says so)?
  template <typename Stop>
  bool awaitDelivery(const Message& m, Deadline end, Stop stop);

 private:
  struct Channel {
    std::deque<std::shared_ptr<Message>> queue;
    uint64_t posted = 0;
  };
  Channel& channel(int src, int dst) { return channels_[static_cast<size_t>(src * ranks_ + dst)]; }

  template <typename Announce>
  std::shared_ptr<Message> post(int src, int dst, const void* data, int64_t bytes, Announce announce);
  // The channel's next message, or null at the deadline or once `stop` says so.
  template <typename Stop>
  std::shared_ptr<Message> take(int src, int dst, Deadline end, Stop stop);
  // A taken message ends with exactly one of these, so the waits on cv_
  // (every rank's) are woken once for it: a second wake-up of them all for
  // nothing costs hundreds of threads on a small host their deadlines.
  void deliver(Message& m);
  void release(Message& m);  // the receiver is done with m without delivering it
  // The sender gives up on `m`: removed if not taken yet, else awaited until
  // its receiver has released it (a receiver only copies meanwhile). True
  // once no receiver can read m's source; false if one still held it at `end`.
  bool withdraw(const std::shared_ptr<Message>& m, Deadline end);

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

template <typename Stop, typename Copy>
bool RailMailbox::receive(int src, int dst, Deadline end, Stop stop, Copy copy) {
  const std::shared_ptr<Message> m = take(src, dst, end, stop);
  if (!m) return false;
  try {
    copy(static_cast<const Message&>(*m));
  } catch (...) {
    release(*m);
    throw;
  }
  deliver(*m);
  return true;
}

template <typename Stop>
bool RailMailbox::awaitDelivery(const Message& m, Deadline end, Stop stop) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!m.delivered) {
    if (stop() || std::chrono::steady_clock::now() > end) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace tide::fabric::host
