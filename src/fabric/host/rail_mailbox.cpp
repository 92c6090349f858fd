#include "fabric/host/rail_mailbox.hpp"

namespace tide::fabric::host {

RailMailbox::RailMailbox(int ranks) : ranks_(ranks), channels_(static_cast<size_t>(ranks) * static_cast<size_t>(ranks)) {}

void RailMailbox::deliver(const std::shared_ptr<Message>& m) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    m->delivered = true;
  }
  cv_.notify_all();
}

}  // namespace tide::fabric::host
