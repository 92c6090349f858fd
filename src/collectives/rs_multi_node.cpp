// TIDE-RS across nodes (M > 1): one call's issue, as a per-call object over
// the Communicator's protocol positions. Pass by pass: the read phase (Level 1
// staging and sums into outbox and own-node spare blocks), then the pass's
// Level 2 waves (accept, send over the rails, receive, land). A wave's accept
// and sends go on kNetQueue, its receive and landing on the landing queue
// (kLandQueue unless IssueOptions put it behind the sends): the landing waits
// for its wave's accept (stale blocks zeroed, the generation's previous
// landing done), so the next wave's sends run while this one lands.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "collectives/counter_ids.hpp"
#include "collectives/level1_sum.hpp"
#include "collectives/rs_call_across_nodes.hpp"

namespace tide::collectives {

class Communicator::MultiNodeRs : RsCallAcrossNodes {
 public:
  MultiNodeRs(Communicator& comm, const plan::Plan& plan, const std::vector<const void*>& grads, float* out,
              float alpha, bool accumulate);
  void run(uint64_t entry);

 private:
  // A destination block of the read phase; remote = -1 for the own node.
  struct Block {
    int pass;
    int dest;
    int remote;
  };

  size_t readIndex(int pass, int c) const {
    return static_cast<size_t>(pass) * static_cast<size_t>(m_) + static_cast<size_t>(c - 1);
  }
  // Outbox block use (counted over all calls on the bank) of pass `pass`'s block for contributor c.
  uint64_t outboxIndex(int pass, int c) const {
    return sendBase_ + static_cast<uint64_t>(pass * (m_ - 1) + (c - 1));
  }
  std::byte* outboxBlock(uint64_t k) const {
    return ep_.arena() + layout_.outboxBlock(bank_, static_cast<int>(k % static_cast<uint64_t>(nOut_)));
  }
  std::byte* spareBlock(uint64_t use) const {
    return ep_.arena() + layout_.spareBlock(bank_, static_cast<int>(use % spareSlots_));
  }

  void readBlock(size_t j);
  // A wave's network work in parts, issued in this order: each k-way round
  // of outbox blocks on the net queue (the first one after the wave's
  // accept), then its landing on the landing queue (receive, own-node
  // partial, push, land). Round by round: a small outbox (Slot-Reuse, two
  // rounds' blocks, Eq. 9) reuses a block of the wave's first round for a
  // later round's read, so that first round's send is issued before the
  // later reads are.
  void issueNextPart(const char* why);
  void acceptWave(const plan::RsWave& wave, uint64_t seq);
  bool staleBlockReadsData(const plan::RsWave& wave, int sub) const;
  void sendRound(const plan::RsWave& wave, const plan::RsRound& round, uint64_t seq);
  void transferBlock(const plan::RsWave& wave, int c, uint64_t seq, bool send);
  void issueLanding(const plan::RsWave& wave);
  void moveOwnPartial(const plan::RsWave& wave);
  void pushRows(const plan::RsWave& wave);
  void land(const plan::RsWave& wave, int s);

  int local_, l_, bank_, nOut_;
  bool push_;
  uint64_t sendBase_;
  // Own-node spares of this bank in rotation: use u (counted over all calls on
  // the bank) goes to slot u mod K, K the same for every group of this
  // communicator, once use u - K has been moved into the inbox.
  uint64_t spareBase_, spareSlots_;
  uint64_t chunkBase_ = 0;
  // Destination blocks in read order, pass by pass: remote ones in send
  // order, then the own node (its partial lands in the pass's last wave, so
  // a later pass must not be read before it).
  std::vector<Block> blocks_;
  std::vector<uint64_t> summed_;  // sum-queue event per block
  uint64_t sent_;                 // outbox blocks whose send is issued (the last "sent" signal's value)
  size_t nextWave_ = 0;           // the wave whose parts are issued next
  bool waveAccepted_ = false;     // its accept is issued
  size_t roundsIssued_ = 0;       // its rounds whose sends are issued (its landing after all of them)
  size_t readsIssued_ = 0;        // blocks whose read (pushes and sum) is issued
};

Communicator::MultiNodeRs::MultiNodeRs(Communicator& comm, const plan::Plan& plan,
                                       const std::vector<const void*>& grads, float* out, float alpha,
                                       bool accumulate)
    : RsCallAcrossNodes(comm, plan, grads, out, alpha, accumulate),
      local_(t_.localOf(me_)),
      l_(t_.gpusPerNode),
      bank_(static_cast<int>(comm.rsBankedCalls_++ % 2)),
      // The scratch's count (the largest of its plans), not this plan's: uses
      // are counted across every call on the bank, whatever group each was, so
      // the block of use k and the use it must wait for follow one modulus.
      nOut_(comm.layout_.outboxBlocks),
      push_(plan.rs.landing == plan::Landing::kPush),
      sendBase_(comm.rsSends_[bank_]),
      spareBase_(comm.rsSpareUses_[bank_]),
      spareSlots_(static_cast<uint64_t>(comm.layout_.sparesPerBank)),
      sent_(sendBase_) {
  for (int q = 0; q < rs_.passes; ++q) {
    for (int c = 1; c < m_; ++c) blocks_.push_back({q, (node_ + c) % m_, q * (m_ - 1) + (c - 1)});
    blocks_.push_back({q, node_, -1});
  }
  summed_.resize(blocks_.size());
}

// Issue order, pass by pass: pass q's read phase, then the rest of pass q's
// waves. The sum queue's "outbox block sent" wait (a later block reuses the
// outbox block an earlier one was sent from: the next pass's, or with a
// small outbox this pass's) must find the sends it waits for already
// enqueued, so the waves' parts up to that send are issued just before it:
// a GPU stream blocked on a wait whose signal the host has not issued yet
// can stall the host's own issue (a full command queue, or streams sharing
// a hardware queue), and then nothing issues it. The queues and their waits
// are the same whatever the host's interleaving; only its issue order moves.
void Communicator::MultiNodeRs::run(uint64_t entry) {
  ep_.waitEvent(kCopyQueue, kCallerQueue, entry);
  ep_.waitEvent(kSumQueue, kCallerQueue, entry);
  // The landing writes `out`, which the caller's stream may use up to the
  // call (a fill, a reader of the previous result, the base of an
  // accumulate): a wave with no own-node block lands without any wait on the
  // sum queue, so the landing queue waits for the call's start itself.
  ep_.waitEvent(landQ_, kCallerQueue, entry);
  chunkBase_ = c_.rsChunks_;
  c_.rsChunks_ += blocks_.size();
  const size_t perPass = static_cast<size_t>(m_);  // blocks per pass: M - 1 remote, then the own node
  for (int pass = 0; pass < rs_.passes; ++pass) {
    // ---- read phase of this pass: pushes (copy engines) and Level 1 sums (short-lived SM work)
    for (size_t j = static_cast<size_t>(pass) * perPass; j < static_cast<size_t>(pass + 1) * perPass; ++j)
      readBlock(j);
    // ---- network phase of this pass (what the reads above did not already
    // need), in collective order behind the previous call's
    while (nextWave_ < rs_.waves.size() && rs_.waves[nextWave_].pass == pass)
      issueNextPart("the pass's network phase");
  }
  if (nextWave_ != rs_.waves.size())
    throw fabric::FabricError(fabric::FabricError::Kind::kUsage, "plan's waves are not in pass order");
  c_.rsSpareUses_[bank_] = spareBase_ + static_cast<uint64_t>(rs_.passes);
  c_.rsSends_[bank_] = sendBase_ + static_cast<uint64_t>(rs_.passes) * static_cast<uint64_t>(m_ - 1);
  c_.rsWaves_ += rs_.waves.size();
}

namespace {
// Whether `range` of rank `rank`'s packed output holds an element of a row
// that exists (not the tail padding of a parameter with fewer rows than ranks).
bool liveElems(const plan::GroupLayout& g, int rank, plan::ElemRange range) {
  for (const plan::ParamLayout& p : g.params) {
    const int64_t begin = std::max(range.begin, p.outOffset);
    const int64_t end = std::min(range.end, p.outOffset + p.validRows(rank) * p.rowElems);
    if (begin < end) return true;
  }
  return false;
}
}  // namespace

// Level 1 of destination block j: stage, then sum into its outbox block (a
// remote node's) or the bank's next own-node spare.
void Communicator::MultiNodeRs::readBlock(size_t j) {
  const Block& blk = blocks_[j];
  const uint64_t seq = chunkBase_ + j;
  const int slot = c_.stagingSlotOf(seq);
  c_.stageChunk(plan_, grads_, seq, blk.pass, blk.dest);
  std::byte* dst;
  bool reusedEarly = false;  // the reuse-outbox-early fault: refilled without waiting for its send
  if (blk.remote >= 0) {
    const uint64_t k = sendBase_ + static_cast<uint64_t>(blk.remote);
    if (k >= static_cast<uint64_t>(nOut_)) {
      // The fault skips only waits for this call's own sends: it races the
      // refill against a send by holding back this call's first wave (see
      // issueNextPart), so a block an earlier call on this bank sent has no
      // held-back send to race, and skipping its wait would count a firing
      // that changes no byte (tide bench then reported "NOT detected").
      const bool sentThisCall = k - static_cast<uint64_t>(nOut_) >= sendBase_;
      if (!(c_.injected(Fault::kReuseOutboxEarly) && sentThisCall)) {
        // The block this one reuses must be sent first, and its send issued
        // before this wait (rule I5): a small outbox (Slot-Reuse) reuses
        // blocks of this very pass.
        while (sent_ < k - nOut_ + 1) issueNextPart("an outbox block's reuse");
        ep_.wait(kSumQueue, ids::kRsSent + bank_, k - nOut_ + 1, me_, "outbox block sent");
      } else {
        reusedEarly = true;
      }
    }
    dst = outboxBlock(k);
  } else {
    const uint64_t use = spareBase_ + static_cast<uint64_t>(blk.pass);
    if (use >= spareSlots_)
      ep_.wait(kSumQueue, ids::kRsSpareFree + bank_, use - spareSlots_ + 1, me_, "own-node spare free");
    dst = spareBlock(use);
  }
  const int sub = plan::subSlice(local_, plan::contributorIndex(blk.dest, node_, m_), m_, l_);
  const plan::ElemRange range = plan::subSliceRange(g_, rs_, blk.pass, sub);
  if (blk.remote >= 0 && c_.injected(Fault::kReuseOutboxEarly)) {
    // Only under the fault (a test hook), off the normal path: whether this
    // outbox block now holds elements someone reads, since the fault acts only
    // where a refill overwrites some unsent (a block of an empty pass, or of
    // the padding of a rank whose shard is all padding, holds none).
    std::vector<bool>& held = c_.rsOutboxHeld_[bank_];
    held.resize(static_cast<size_t>(nOut_), false);
    const size_t at = static_cast<size_t>((sendBase_ + static_cast<uint64_t>(blk.remote)) % static_cast<uint64_t>(nOut_));
    // Elements of an output of the destination node, not the tail padding, which no one reads.
    bool live = false;
    for (int u = 0; u < l_ && !live; ++u) live = liveElems(g_, t_.rankOf(blk.dest, u), range);
    if (reusedEarly && held[at] && range.size() > 0) c_.noteFaultFired();  // an empty sub-slice writes nothing
    held[at] = live;
  }
  if (range.size() > 0) {
    fabric::SumOp op = level1Sum(g_, rs_, me_, t_.rankOf(blk.dest, 0), l_, range,
                                 ep_.arena() + layout_.stagingSlot(slot), grads_, reinterpret_cast<float*>(dst),
                                 rs_.subElems);
    op.ctas = rs_.sumCtas;
    ep_.sum(kSumQueue, op);
  }
  for (int u = 0; u < l_; ++u)
    if (u != local_) ep_.signal(kSumQueue, t_.rankOf(node_, u), ids::kRsFree + local_, seq + 1);
  summed_[j] = ep_.record(kSumQueue);
  readsIssued_ = j + 1;
}

// Issues the next part in net-queue order; fails stop when its reads are not
// issued yet (the issue order of run() and readBlock() never asks for that).
void Communicator::MultiNodeRs::issueNextPart(const char* why) {
  if (nextWave_ >= rs_.waves.size())
    throw std::logic_error(std::string("reduce-scatter issue: no wave left for ") + why);
  const plan::RsWave& wave = rs_.waves[nextWave_];
  const uint64_t seq = waveSeq(wave);
  if (!waveAccepted_ || roundsIssued_ < wave.rounds.size()) {
    if (roundsIssued_ < wave.rounds.size())
      for (int c : wave.rounds[roundsIssued_].contributors)
        if (readIndex(wave.pass, c) >= readsIssued_)
          throw std::logic_error(std::string("reduce-scatter issue: a send before its read, for ") + why);
    if (!waveAccepted_) {
      if (nextWave_ == 0 && c_.injected(Fault::kReuseOutboxEarly)) ep_.delay(kNetQueue, kFaultRaceSeconds);
      acceptWave(wave, seq);
      waveAccepted_ = true;
    }
    if (roundsIssued_ < wave.rounds.size()) sendRound(wave, wave.rounds[roundsIssued_++], seq);
    return;
  }
  if (wave.hasOwnNode && readIndex(wave.pass, m_) >= readsIssued_)
    throw std::logic_error(std::string("reduce-scatter issue: a landing before the own node's read, for ") + why);
  issueLanding(wave);
  waveAccepted_ = false;
  roundsIssued_ = 0;
  ++nextWave_;
}

// Accept the wave: the generation's previous landing is done on every local
// rank; zero my stale blocks; tell this wave's senders.
void Communicator::MultiNodeRs::acceptWave(const plan::RsWave& wave, uint64_t seq) {
  const int gen = wave.generation;
  if (c_.rsGenLastUse_[gen] > 0)
    for (int i = 0; i < l_; ++i)
      ep_.wait(kNetQueue, ids::kRsLanded + i, c_.rsGenLastUse_[gen], t_.rankOf(node_, i), "inbox generation landed");
  if (!push_)
    for (const plan::InboxBlock& z : wave.zero)
      if (z.gpu == local_) {
        if (!c_.injected(Fault::kSkipStaleZeroing))
          ep_.zero(kNetQueue, ep_.arena() + layout_.inboxBlock(gen, z.block), layout_.blockBytes);
        else if (staleBlockReadsData(wave, z.block))
          c_.noteFaultFired();
      }
  if (!push_ && wave.clearAfterLanding) {
    // The last wave on this generation clears what its landing reads, so
    // the next call starts from zero. Where this pass's sub-slice is
    // shorter than a row (the end of the output axis), an earlier pass
    // may have filled and consumed the whole row; its tail, which this
    // wave neither writes nor reads, is zeroed here, or the next call's
    // landing would read it where its wave writes nothing.
    for (int s = 0; s < l_; ++s) {
      const int64_t live = plan::subSliceRange(g_, rs_, wave.pass, s).size();
      if (live == rs_.subElems) continue;
      for (int i = 0; i < l_; ++i)
        ep_.zero(kNetQueue, ep_.arena() + layout_.inboxBlock(gen, s) + (int64_t{i} * rs_.subElems + live) * 4,
                 (rs_.subElems - live) * 4);
    }
  }
  // One-sided rails: tell this wave's senders. Two-sided: a sender's bytes
  // land only through the receive this rank posts after this point.
  if (!twoSided_)
    for (int c : wave.contributors)
      if (c < m_) ep_.signal(kNetQueue, t_.rankOf(((node_ - c) % m_ + m_) % m_, local_), ids::kRsCredit + node_, seq);
  if (landQ_ != kNetQueue) accepted_ = ep_.record(kNetQueue);
}

// Under the skip-stale-zeroing fault only: whether leaving my stale block `sub`
// unzeroed changes a byte. It holds what the previous wave on this generation
// wrote there: the sums of sub-slice `sub` of that wave's pass for every local
// rank, zero on the tail padding of a parameter with fewer rows than ranks.
// This wave's landers read its first elements as this pass's sub-slice (the
// rest is cleared after the generation's last landing, unread); only a live
// element among them makes a wrong output.
bool Communicator::MultiNodeRs::staleBlockReadsData(const plan::RsWave& wave, int sub) const {
  const plan::RsWave& previous = rs_.waves[static_cast<size_t>(wave.index - rs_.bufferGenerations)];
  const plan::ElemRange written = plan::subSliceRange(g_, rs_, previous.pass, sub);
  const int64_t readNow = plan::subSliceRange(g_, rs_, wave.pass, sub).size();
  const plan::ElemRange read{written.begin, written.begin + std::min(written.size(), readNow)};
  for (int u = 0; u < l_; ++u)
    if (liveElems(g_, t_.rankOf(node_, u), read)) return true;
  return false;
}

// One k-way round of outbox blocks over my rail: each block after its sum and
// the destination's credit. Two-sided rails: every block's sum first, then the
// round's sends and the matching receives (from node - c for each c: rounds
// are the same on every node) back to back, one group; no credit crosses nodes.
void Communicator::MultiNodeRs::sendRound(const plan::RsWave& wave, const plan::RsRound& round, uint64_t seq) {
  if (twoSided_) {
    for (int c : round.contributors) ep_.waitEvent(kNetQueue, kSumQueue, summed_[readIndex(wave.pass, c)]);
    for (int c : round.contributors) transferBlock(wave, c, seq, /*send=*/true);
    for (int c : round.contributors) transferBlock(wave, c, seq, /*send=*/false);
  } else {
    for (int c : round.contributors) {
      const int dest = (node_ + c) % m_;
      ep_.waitEvent(kNetQueue, kSumQueue, summed_[readIndex(wave.pass, c)]);
      ep_.wait(kNetQueue, ids::kRsCredit + dest, seq, t_.rankOf(dest, local_), "inbox credit");
      transferBlock(wave, c, seq, /*send=*/true);
    }
  }
  for (int c : round.contributors) sent_ = std::max(sent_, outboxIndex(wave.pass, c) + 1);
  ep_.signal(kNetQueue, me_, ids::kRsSent + bank_, sent_);
}

// The block for contributor c, sent to node + c from my outbox, or (two-sided
// rails) received from node - c into my inbox (the same sub-slice: the
// sender's local rank is mine); only the rows' live part where it is short.
void Communicator::MultiNodeRs::transferBlock(const plan::RsWave& wave, int c, uint64_t seq, bool send) {
  const int gen = wave.generation;
  const int peerNode = send ? (node_ + c) % m_ : ((node_ - c) % m_ + m_) % m_;
  const int peer = t_.rankOf(peerNode, local_);
  const int sub = plan::subSlice(local_, c, m_, l_);
  const int64_t rowBytes = plan::subSliceRange(g_, rs_, wave.pass, sub).size() * 4;
  const int64_t pitch = rs_.subElems * 4;
  const std::byte* block = outboxBlock(outboxIndex(wave.pass, c));
  const int64_t inbox = layout_.inboxBlock(gen, sub);
  const int rows = rowBytes == pitch ? 1 : l_;
  const int64_t bytes = rowBytes == pitch ? rs_.blockBytes : rowBytes;
  for (int i = 0; i < rows; ++i) {
    const int signalId = i + 1 == rows ? ids::kRsInbox + (send ? node_ : peerNode) : -1;
    if (send)
      ep_.railPut(kNetQueue, peer, inbox + i * pitch, block + i * pitch, bytes, signalId, seq);
    else
      ep_.railRecv(kNetQueue, peer, inbox + i * pitch, bytes, signalId, seq);
  }
}

void Communicator::MultiNodeRs::issueLanding(const plan::RsWave& wave) {
  const uint64_t seq = waveSeq(wave);
  // The wave's accept on the net queue zeroed its stale blocks and waited for
  // the generation's previous landing, which this landing's writes follow.
  if (landQ_ != kNetQueue) ep_.waitEvent(landQ_, kNetQueue, accepted_);
  // Receive: every contributor's block, and my own node's partial.
  for (int c : wave.contributors)
    if (c < m_) {
      const int src = ((node_ - c) % m_ + m_) % m_;
      ep_.wait(landQ_, ids::kRsInbox + src, seq, t_.rankOf(src, local_), "inbox block");
    }
  if (wave.hasOwnNode) moveOwnPartial(wave);
  if (push_) pushRows(wave);
  for (int i = 0; i < l_; ++i) ep_.signal(landQ_, t_.rankOf(node_, i), ids::kRsArrived + local_, seq);
  // Land: my rows of every sub-slice, contributors in increasing c, then
  // the GPUs that hold no contributor this wave (zeros).
  for (int i = 0; i < l_; ++i) ep_.wait(landQ_, ids::kRsArrived + i, seq, t_.rankOf(node_, i), "wave arrival");
  for (int s = 0; s < l_; ++s) land(wave, s);
  for (int i = 0; i < l_; ++i) ep_.signal(landQ_, t_.rankOf(node_, i), ids::kRsLanded + local_, seq);
  c_.rsGenLastUse_[wave.generation] = seq;
}

// The own node's partial (summed into a spare block) moves into the inbox
// (c = M, so GPU j holds block j); the spare is free again.
void Communicator::MultiNodeRs::moveOwnPartial(const plan::RsWave& wave) {
  ep_.waitEvent(landQ_, kSumQueue, summed_[readIndex(wave.pass, m_)]);
  fabric::CopyOp spare;
  spare.dst = ep_.arena() + layout_.inboxBlock(wave.generation, local_);
  const uint64_t use = spareBase_ + static_cast<uint64_t>(wave.pass);
  spare.src = spareBlock(use);
  spare.width = plan::subSliceRange(g_, rs_, wave.pass, local_).size() * 4;
  spare.rows = l_;
  spare.srcPitch = spare.dstPitch = rs_.subElems * 4;
  ep_.copy(landQ_, {spare});
  ep_.signal(landQ_, me_, ids::kRsSpareFree + bank_, use + 1);
}

// Push landing: every row of the blocks this wave wrote here goes to the GPU
// that lands it, by copy engine; "arrived" then also means "pushed", and each
// lander reads local memory only.
void Communicator::MultiNodeRs::pushRows(const plan::RsWave& wave) {
  const int gen = wave.generation;
  for (const plan::InboxBlock& w : wave.writes) {
    if (w.gpu != local_) continue;
    const int64_t rowBytes = plan::subSliceRange(g_, rs_, wave.pass, w.block).size() * 4;
    if (rowBytes == 0) continue;
    std::vector<fabric::CopyOp> rows;
    for (int i = 0; i < l_; ++i) {
      if (i == local_) continue;
      fabric::CopyOp row;
      row.dst = ep_.peerArena(t_.rankOf(node_, i)) + layout_.pushRow(gen, w.block, local_, rs_.subElems);
      row.src = ep_.arena() + layout_.inboxBlock(gen, w.block) + int64_t{i} * rs_.subElems * 4;
      row.width = rowBytes;
      row.consumesSource = true;
      rows.push_back(row);
    }
    if (!rows.empty()) ep_.copy(landQ_, rows);
  }
}

// Lands my rows of sub-slice s: the sum over the node's GPUs' blocks, in the
// order the bits depend on (contributors in increasing c, then, pulling, the
// GPUs without a contributor this wave, read as zeros).
void Communicator::MultiNodeRs::land(const plan::RsWave& wave, int s) {
  const int gen = wave.generation;
  const plan::ElemRange range = plan::subSliceRange(g_, rs_, wave.pass, s);
  if (range.size() == 0) return;
  const bool firstOfPass = wave.index % rs_.wavesPerPass == 0;
  fabric::LandOp op;
  op.ctas = rs_.landingCtas;
  op.dst = out_ + range.begin;
  op.elems = range.size();
  op.alpha = alpha_;
  op.accumulate = firstOfPass ? accumulate_ : true;
  op.clearSources = !push_ && wave.clearAfterLanding;
  std::vector<bool> used(static_cast<size_t>(l_), false);
  std::vector<int> order;
  for (int c : wave.contributors) order.push_back(plan::landingGpu(s, c, m_, l_));
  for (int j : order) used[static_cast<size_t>(j)] = true;
  // Pull: every GPU's block, the ones without a contributor this wave read as
  // zeros. Push: only the blocks this wave wrote (the others' +0 terms change
  // no bit), each from local memory.
  if (!push_)
    for (int j = 0; j < l_; ++j)
      if (!used[static_cast<size_t>(j)]) order.push_back(j);
  for (int j : order) {
    if (push_) {
      op.sources.push_back(reinterpret_cast<float*>(
          ep_.arena() + (j == local_ ? layout_.inboxBlock(gen, s) + int64_t{local_} * rs_.subElems * 4
                                     : layout_.pushRow(gen, s, j, rs_.subElems))));
      continue;
    }
    const int peer = t_.rankOf(node_, j);
    std::byte* base = peer == me_ ? ep_.arena() : ep_.peerArena(peer);
    op.sources.push_back(reinterpret_cast<float*>(base + layout_.inboxBlock(gen, s)) +
                         int64_t{local_} * rs_.subElems);
  }
  ep_.land(landQ_, op);
}

void Communicator::rsMultiNode(const plan::Plan& plan, const std::vector<const void*>& grads, float* out,
                               float alpha, bool accumulate, uint64_t entry) {
  MultiNodeRs(*this, plan, grads, out, alpha, accumulate).run(entry);
}

}  // namespace tide::collectives
