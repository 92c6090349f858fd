// TIDE-RS on App. F's rail lane: groups with one GPU per node (L = 1) across
// nodes, RsPlan::railLane. There is no Level 1 to sum (one local rank), so
// nothing is staged and nothing waits in an outbox: in wave w of pass q
// (contributor c, as in the staged plan) each node puts its gradient rows of
// that pass for node + c, in the gradient dtype, from where autograd left
// them into that node's lane inbox (generation w mod 2), and sums what node -
// c put into its own inbox into its output. The wave with the own node sums
// the own gradient rows instead.
//
// Bits: the staged path at L = 1 writes 0 + g (g the gradient row in fp32)
// into an outbox block and lands out = alpha * (0 + block), or out + alpha *
// (0 + block) after the pass's first wave, wave by wave. The lane's sum op
// computes the same expressions (s = 0 + g, then dst = alpha * s or dst +
// alpha * s) in the same wave order, so every output bit is the same; the
// tests compare the two paths bit for bit.
//
// Queues: a wave's accept and sends on kNetQueue, its sum on the landing
// queue (as MultiNodeRs). The gradients are read by the sends and by the own
// wave's sum, so the call's read-done event follows both queues' last reads.
//
// Rails that read only from the arena (NCCL host RMA, Endpoint::
// railSourcesInArena): a put cannot read the gradients where they are, so a
// wave first copies its rows, at their inbox offsets, into the lane inbox
// block of the other generation and puts them from there. No scratch beyond
// the two inbox blocks. That block is free for the copy once
//  - this rank summed the last wave that received into it (the copy waits for
//    rsLaneGenLastUse_ of that generation: wave w - 1, or an earlier one where
//    w - 1 was the own node's wave or the previous call's), and
//  - this rank's own puts from it (two waves back, or the previous call's last
//    send wave) have read it: they were issued on the same queue before.
// No peer puts into it again before the next wave's receive, whose credit this
// rank grants on the same queue after this wave's puts. Both "before" rest on
// what the rails make of queue order: the host fabric's RMA rails read a put's
// source inside its group's task; NCCL's ncclPutSignal is taken to have read
// its source when the stream moves past it, as the staged all-gather's rail
// source copy (Communicator::allGather) already takes once per call; no device
// here has host RMA (it needs GIN) to check it on. The price: a wave's puts wait
// for the previous wave's sum instead of running under it.
#include <stdexcept>
#include <string>

#include "collectives/counter_ids.hpp"
#include "collectives/level1_sum.hpp"
#include "collectives/rs_call_across_nodes.hpp"

namespace tide::collectives {

class Communicator::RailLaneRs : RsCallAcrossNodes {
 public:
  RailLaneRs(Communicator& comm, const plan::Plan& plan, const std::vector<const void*>& grads, float* out,
             float alpha, bool accumulate);
  GradientReads run(uint64_t entry);

 private:
  // The gradient rows of pass `pass` for destination rank `dest`, as sum
  // pieces into my output with one source each: the own gradient (pitch and
  // valid elements as Level 1 reads them). An inbox block holds element a of
  // the pass's range at a - range.begin, where the piece's dst sits in `out`.
  fabric::SumOp rowsFor(int pass, int dest) const;
  // rowsFor(pass, me): a pass's M waves all land (and, two-sided, receive)
  // these rows, so they are built once per pass (the waves run pass by pass).
  const fabric::SumOp& ownRows(int pass);
  // The put (send) or receive of one wave's rows over my rail; the last
  // transfer carries the arrival signal (an empty wave sends no bytes but
  // still signals).
  void transferRows(const plan::RsWave& wave, int c, uint64_t seq, bool send);
  // Rails that read only from the arena: copies the pieces' rows into the
  // other generation's inbox block (same offsets) and points them there.
  void packIntoArena(const plan::RsWave& wave, std::vector<fabric::Endpoint::RailPiece>& pieces);
  void acceptWave(const plan::RsWave& wave, uint64_t seq);
  void sendWave(const plan::RsWave& wave, uint64_t seq);
  void landWave(const plan::RsWave& wave, uint64_t seq);

  GradientReads reads_;
  const bool packRows_;  // the rails read only from the arena
  int ownRowsPass_ = -1;
  fabric::SumOp ownRows_;
};

Communicator::RailLaneRs::RailLaneRs(Communicator& comm, const plan::Plan& plan,
                                     const std::vector<const void*>& grads, float* out, float alpha,
                                     bool accumulate)
    : RsCallAcrossNodes(comm, plan, grads, out, alpha, accumulate), packRows_(ep_.railSourcesInArena()) {
  if (!rs_.railLane || t_.gpusPerNode != 1 || m_ < 2)
    throw std::logic_error("rail lane issue for a plan that is not on the lane");
  if (packRows_ && layout_.laneGenerations < 2)  // M >= 2 waves per pass: always two
    throw std::logic_error("rail lane over arena-only rails needs two inbox generations to pack into");
  for (const plan::RsWave& wave : rs_.waves)
    if (wave.contributors.size() != 1)
      throw std::logic_error("rail lane issue: a wave of " + std::to_string(wave.contributors.size()) +
                             " contributors (L = 1 waves hold one)");
}

Communicator::GradientReads Communicator::RailLaneRs::run(uint64_t entry) {
  // The sends read the gradients and the sums write `out`, both of which the
  // caller's stream may use up to the call.
  ep_.waitEvent(kNetQueue, kCallerQueue, entry);
  ep_.waitEvent(landQ_, kCallerQueue, entry);
  for (const plan::RsWave& wave : rs_.waves) {
    const uint64_t seq = waveSeq(wave);
    acceptWave(wave, seq);
    sendWave(wave, seq);
    landWave(wave, seq);
  }
  c_.rsWaves_ += rs_.waves.size();
  return reads_;
}

fabric::SumOp Communicator::RailLaneRs::rowsFor(int pass, int dest) const {
  const plan::ElemRange range = plan::subSliceRange(g_, rs_, pass, 0);
  if (range.size() == 0) return {};
  return level1Sum(g_, rs_, me_, dest, 1, range, nullptr, grads_, out_ + range.begin, 0);
}

const fabric::SumOp& Communicator::RailLaneRs::ownRows(int pass) {
  if (pass != ownRowsPass_) {
    ownRows_ = rowsFor(pass, me_);
    ownRowsPass_ = pass;
  }
  return ownRows_;
}

// Accept the wave: the generation's previous sum is done (it read the inbox
// this wave's sender overwrites); one-sided rails: tell the sender.
void Communicator::RailLaneRs::acceptWave(const plan::RsWave& wave, uint64_t seq) {
  const int c = wave.contributors.front();
  if (c == m_) return;  // the own node's rows: nothing crosses the rail
  if (c_.rsLaneGenLastUse_[wave.generation] > 0)
    ep_.wait(kNetQueue, ids::kRsLanded, c_.rsLaneGenLastUse_[wave.generation], me_, "lane inbox generation summed");
  if (!twoSided_ && !c_.injected(Fault::kDropCredit)) {
    const int src = ((node_ - c) % m_ + m_) % m_;
    ep_.signal(kNetQueue, t_.rankOf(src, 0), ids::kRsCredit + node_, seq);
  } else if (!twoSided_) {
    c_.noteFaultFired();
  }
  accepted_ = ep_.record(kNetQueue);
}

// My rows for node + c, after its credit (one-sided); two-sided rails: the
// sends to node + c, then the receives from node - c, back to back.
void Communicator::RailLaneRs::sendWave(const plan::RsWave& wave, uint64_t seq) {
  const int c = wave.contributors.front();
  if (c == m_) return;
  const int dest = (node_ + c) % m_;
  if (!twoSided_) ep_.wait(kNetQueue, ids::kRsCredit + dest, seq, t_.rankOf(dest, 0), "lane inbox credit");
  transferRows(wave, c, seq, /*send=*/true);
  // Two-sided rails issue the sends and receives of one wave as one group
  // (any other fabric call in between would flush the sends alone, and two
  // nodes' sends could then wait for each other's receives).
  if (twoSided_) transferRows(wave, c, seq, /*send=*/false);
  reads_.net = ep_.record(kNetQueue);
}

void Communicator::RailLaneRs::transferRows(const plan::RsWave& wave, int c, uint64_t seq, bool send) {
  const int peerNode = send ? (node_ + c) % m_ : ((node_ - c) % m_ + m_) % m_;
  const int peer = t_.rankOf(peerNode, 0);
  const int signalId = ids::kRsInbox + (send ? node_ : peerNode);
  const int64_t b = plan::itemSize(g_.gradDtype);
  const int64_t inbox = layout_.laneInboxBlock(wave.generation);
  // The rows' geometry depends on the destination only: the sender's rows
  // for the peer and the receiver's own are the same pieces.
  fabric::SumOp peerRows;
  const fabric::SumOp& rows = send ? (peerRows = rowsFor(wave.pass, peer)) : ownRows(wave.pass);
  const float* rangeBegin = out_ + plan::subSliceRange(g_, rs_, wave.pass, 0).begin;
  // Inbox offsets and sources, as puts (a receive reads only the offset and size).
  std::vector<fabric::Endpoint::RailPiece> pieces;
  for (const fabric::SumPiece& pc : rows.pieces) {
    const int64_t valid = pc.sources.front().valid.front();  // elements past it are padding, read as zero
    if (valid > 0) pieces.push_back({inbox + (pc.dst - rangeBegin) * b, pc.sources.front().ptr, valid * b});
  }
  if (pieces.empty()) pieces.push_back({inbox, ep_.arena() + inbox, 0});  // no rows: the signal alone
  if (send && packRows_) packIntoArena(wave, pieces);
  if (send) {  // one submission where the fabric can
    ep_.railPuts(kNetQueue, peer, pieces, signalId, seq);
    return;
  }
  for (size_t i = 0; i < pieces.size(); ++i)
    ep_.railRecv(kNetQueue, peer, pieces[i].dstOffset, pieces[i].bytes, i + 1 == pieces.size() ? signalId : -1, seq);
}

void Communicator::RailLaneRs::packIntoArena(const plan::RsWave& wave,
                                             std::vector<fabric::Endpoint::RailPiece>& pieces) {
  const int other = 1 - wave.generation;
  const int64_t offsetShift = layout_.laneInboxBlock(other) - layout_.laneInboxBlock(wave.generation);
  std::vector<fabric::CopyOp> copies;
  for (fabric::Endpoint::RailPiece& pc : pieces) {
    if (pc.bytes == 0) continue;
    std::byte* packed = ep_.arena() + pc.dstOffset + offsetShift;
    copies.push_back(fabric::CopyOp{packed, pc.src, pc.bytes, 1, 0, 0});
    pc.src = packed;
  }
  if (copies.empty()) return;  // no rows (the signal alone): nothing to wait for
  if (c_.rsLaneGenLastUse_[other] > 0)
    ep_.wait(kNetQueue, ids::kRsLanded, c_.rsLaneGenLastUse_[other], me_,
             "lane inbox generation summed (rows packed into it)");
  ep_.copy(kNetQueue, copies);
}

// Sum the wave's rows into my output: the arrived inbox block, or (the own
// node's wave) my own gradient rows.
void Communicator::RailLaneRs::landWave(const plan::RsWave& wave, uint64_t seq) {
  const int c = wave.contributors.front();
  const plan::ElemRange range = plan::subSliceRange(g_, rs_, wave.pass, 0);
  ep_.waitEvent(landQ_, kNetQueue, accepted_);
  if (c != m_) {
    const int src = ((node_ - c) % m_ + m_) % m_;
    ep_.wait(landQ_, ids::kRsInbox + src, seq, t_.rankOf(src, 0), "lane inbox rows");
  }
  if (range.size() > 0) {
    fabric::SumOp op = ownRows(wave.pass);  // a copy: its sources become the inbox's
    if (c != m_) {
      const std::byte* inbox = ep_.arena() + layout_.laneInboxBlock(wave.generation);
      const int64_t b = plan::itemSize(g_.gradDtype);
      for (fabric::SumPiece& pc : op.pieces) {
        fabric::SumSource& s = pc.sources.front();
        s.ptr = inbox + (pc.dst - (out_ + range.begin)) * b;
        s.pitch = rs_.subElems;
      }
    }
    op.ctas = rs_.landingCtas;
    op.alpha = alpha_;
    op.accumulate = wave.index % rs_.wavesPerPass == 0 ? accumulate_ : true;
    ep_.sum(landQ_, op);
  }
  if (c == m_) reads_.land = ep_.record(landQ_);
  ep_.signal(landQ_, me_, ids::kRsLanded, seq);
  c_.rsLaneGenLastUse_[wave.generation] = seq;
}

Communicator::GradientReads Communicator::rsRailLane(const plan::Plan& plan, const std::vector<const void*>& grads,
                                                     float* out, float alpha, bool accumulate, uint64_t entry) {
  return RailLaneRs(*this, plan, grads, out, alpha, accumulate).run(entry);
}

}  // namespace tide::collectives
