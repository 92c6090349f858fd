#include "fabric/host/rail_mailbox.hpp"

#include <algorithm>
#include <cstdio>

namespace tide::fabric::host {

RailMailbox::RailMailbox(int ranks) : ranks_(ranks), channels_(static_cast<size_t>(ranks) * static_cast<size_t>(ranks)) {}

RailMailbox::GroupSends::GroupSends(RailMailbox& box, int src, double withdrawSeconds)
    : box_(box), src_(src), withdrawSeconds_(withdrawSeconds) {}

RailMailbox::GroupSends::~GroupSends() {
  using Clock = std::chrono::steady_clock;
  const Deadline end =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(withdrawSeconds_));
  for (const std::shared_ptr<Message>& m : posted_)
    if (!box_.withdraw(m, end))
      std::fprintf(stderr, "[tide] host fabric: rank %d: rank %d still held a failed rail send after %.1f s\n", src_,
                   m->channelDst, withdrawSeconds_);
}

void RailMailbox::deliver(Message& m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    m.delivered = true;
    m.released = true;
  }
  cv_.notify_all();
}

void RailMailbox::release(Message& m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    m.released = true;
  }
  cv_.notify_all();
}

bool RailMailbox::withdraw(const std::shared_ptr<Message>& m, Deadline end) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!m->taken) {
    std::deque<std::shared_ptr<Message>>& q = channel(m->channelSrc, m->channelDst).queue;
    q.erase(std::remove(q.begin(), q.end(), m), q.end());
    return true;
  }
  while (!m->released) {
    if (std::chrono::steady_clock::now() > end) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace tide::fabric::host
