// RmaRendezvous on a recording RmaRailOps: the issue order of a group (credits,
// then the sends after their credits, then the arrivals, then the counters),
// one count per peer, and zero-byte transfers.
#include "fabric/rma_rendezvous.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

namespace tide::fabric {
namespace {

class Recorder final : public RmaRailOps {
 public:
  void grantCredit(int peer) override { add() << "credit " << peer; }
  void awaitCredits(const std::vector<PeerCount>& from) override { list(add() << "await-credits", from); }
  void putWithSignal(const RmaPut& p) override { add() << "put " << p.peer << " @" << p.dstOffset << " " << p.bytes; }
  void awaitPuts(const std::vector<PeerCount>& from) override { list(add() << "await-puts", from); }
  void setCounter(int id, uint64_t value) override { add() << "counter " << id << "=" << value; }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    for (const auto& l : log_) out.push_back(l.str());
    return out;
  }
  void clear() { log_.clear(); }

 private:
  std::ostringstream& add() { return log_.emplace_back(); }
  static void list(std::ostream& os, const std::vector<PeerCount>& v) {
    for (const PeerCount& pc : v) os << " " << pc.peer << "x" << pc.count;
  }
  std::vector<std::ostringstream> log_;
};

TEST(RmaRendezvous, GroupIssuesCreditsSendsArrivalsThenCounters) {
  RmaRendezvous g;
  const char buf[16] = {};
  g.deferSend(3, 100, buf, 8);
  g.deferRecv(5, 16, -1, 0);
  g.deferSend(1, 200, buf, 4);
  g.deferSend(3, 300, buf, 2);
  g.deferRecv(5, 8, 7, 42);
  g.deferRecv(2, 4, 8, 43);
  ASSERT_TRUE(g.pending());
  Recorder r;
  g.flush(r);
  EXPECT_FALSE(g.pending());
  const std::vector<std::string> want = {
      "credit 5", "credit 5", "credit 2",                      // one per receive, in order, first
      "await-credits 1x1 3x2",                                  // one per send, per peer
      "put 3 @100 8", "put 1 @200 4", "put 3 @300 2",           // in issue order
      "await-puts 2x1 5x2",                                     // one per receive, per peer
      "counter 7=42", "counter 8=43"};                          // after every arrival
  EXPECT_EQ(r.lines(), want);
}

TEST(RmaRendezvous, ZeroByteTransfersOnlyWriteCounters) {
  RmaRendezvous g;
  const char buf[4] = {};
  g.deferSend(1, 0, buf, 0);
  g.deferRecv(1, 0, 4, 9);
  Recorder r;
  g.flush(r);
  EXPECT_EQ(r.lines(), std::vector<std::string>{"counter 4=9"});
}

TEST(RmaRendezvous, SendsOnlyAndEmptyGroups) {
  RmaRendezvous g;
  Recorder r;
  g.flush(r);
  EXPECT_TRUE(r.lines().empty());
  const char buf[4] = {};
  g.deferSend(2, 8, buf, 4);
  g.flush(r);
  EXPECT_EQ(r.lines(), (std::vector<std::string>{"await-credits 2x1", "put 2 @8 4"}));
  r.clear();
  g.flush(r);  // the group was consumed
  EXPECT_TRUE(r.lines().empty());
}

}  // namespace
}  // namespace tide::fabric
