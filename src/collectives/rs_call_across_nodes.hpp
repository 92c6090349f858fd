// What one reduce-scatter call across nodes issues against, shared by its two
// issue objects: MultiNodeRs (the staged path, rs_multi_node.cpp) and
// RailLaneRs (App. F's rail lane, rs_rail_lane.cpp). Private to them.
#pragma once

#include <vector>

#include "collectives/communicator.hpp"

namespace tide::collectives {

class Communicator::RsCallAcrossNodes {
 protected:
  RsCallAcrossNodes(Communicator& comm, const plan::Plan& plan, const std::vector<const void*>& grads, float* out,
                    float alpha, bool accumulate)
      : c_(comm),
        ep_(comm.ep_),
        layout_(comm.layout_),
        plan_(plan),
        g_(plan.group),
        rs_(plan.rs),
        t_(plan.group.topo),
        grads_(grads),
        out_(out),
        alpha_(alpha),
        accumulate_(accumulate),
        me_(comm.ep_.rank()),
        node_(t_.nodeOf(me_)),
        m_(t_.nodes),
        twoSided_(comm.ep_.railsTwoSided()),
        landQ_(comm.rsLandQueue()) {}

  // The counter value of `wave` (waves are counted over every call).
  uint64_t waveSeq(const plan::RsWave& wave) const { return c_.rsWaves_ + static_cast<uint64_t>(wave.index) + 1; }

  Communicator& c_;
  fabric::Endpoint& ep_;
  const ScratchLayout& layout_;
  const plan::Plan& plan_;
  const plan::GroupLayout& g_;
  const plan::RsPlan& rs_;
  const plan::Topology& t_;
  const std::vector<const void*>& grads_;
  float* out_;
  float alpha_;
  bool accumulate_;
  int me_, node_, m_;
  bool twoSided_;  // rails are send/recv: the receiver posts each transfer, no signal crosses nodes
  int landQ_;      // the queue of every wave's receive and landing (sum, on the lane)
  uint64_t accepted_ = 0;  // net-queue event: the wave being issued is accepted
};

}  // namespace tide::collectives
