#include "fabric/host/rail_mailbox.hpp"

#include <algorithm>

namespace tide::fabric::host {

RailMailbox::RailMailbox(int ranks) : ranks_(ranks), channels_(static_cast<size_t>(ranks) * static_cast<size_t>(ranks)) {}

void RailMailbox::deliver(const std::shared_ptr<Message>& m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    m->delivered = true;
    m->released = true;
  }
  cv_.notify_all();
}

void RailMailbox::release(const std::shared_ptr<Message>& m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Delivered (the usual end) is released already, and every rank's waits
    // share cv_: a second wake-up of them all for nothing costs hundreds of
    // threads on a small host their deadlines.
    if (m->released) return;
    m->released = true;
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
