#include "fabric/rma_rendezvous.hpp"

#include <map>

namespace tide::fabric {

void RmaRendezvous::deferSend(int peer, int64_t dstOffset, const void* src, int64_t bytes) {
  if (bytes > 0) sends_.push_back({peer, dstOffset, src, bytes});
}

void RmaRendezvous::deferRecv(int peer, int64_t bytes, int signalId, uint64_t value) {
  recvs_.push_back({peer, bytes, signalId, value});
}

namespace {
// Messages per peer, in increasing peer order (one descriptor each).
template <typename T>
std::vector<PeerCount> perPeer(const std::vector<T>& transfers) {
  std::map<int, int> counts;
  for (const T& t : transfers)
    if (t.bytes > 0) ++counts[t.peer];
  std::vector<PeerCount> out;
  for (const auto& [peer, n] : counts) out.push_back({peer, n});
  return out;
}
}  // namespace

void RmaRendezvous::flush(RmaRailOps& ops) {
  std::vector<RmaPut> sends;
  std::vector<Recv> recvs;
  sends.swap(sends_);
  recvs.swap(recvs_);
  for (const Recv& r : recvs)
    if (r.bytes > 0) ops.grantCredit(r.peer);
  if (!sends.empty()) {
    ops.awaitCredits(perPeer(sends));
    for (const RmaPut& s : sends) ops.putWithSignal(s);
  }
  const std::vector<PeerCount> arrivals = perPeer(recvs);
  if (!arrivals.empty()) ops.awaitPuts(arrivals);
  for (const Recv& r : recvs)
    if (r.signalId >= 0) ops.setCounter(r.signalId, r.value);
}

}  // namespace tide::fabric
