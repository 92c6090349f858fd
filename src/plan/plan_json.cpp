#include "plan/plan_json.hpp"

#include <nlohmann/json.hpp>

namespace tide::plan {

std::string planToJson(const Plan& plan, int indent) {
  using json = nlohmann::ordered_json;  // keys in document order
  const GroupLayout& g = plan.group;
  const RsPlan& rs = plan.rs;
  json layout = json::array();
  for (const ParamLayout& p : g.params)
    layout.push_back({{"rows", p.rows},
                      {"row_elems", p.rowElems},
                      {"shard_rows", p.shardRows},
                      {"shard_bytes", p.shardBytes},
                      {"shard_offset", p.shardOffset},
                      {"out_offset", p.outOffset}});
  json roundSlots = json::array();
  for (const AgRound& r : plan.ag.rounds) roundSlots.push_back(r.slots);
  json j;
  j["topology"] = {{"nodes", g.topo.nodes},
                   {"gpus_per_node", g.topo.gpusPerNode},
                   {"ranks", g.topo.ranks()}};
  j["group"] = {{"params", g.params.size()},
                {"dtype", dtypeName(g.agDtype)},
                {"grad_dtype", dtypeName(g.gradDtype)},
                {"shard_bytes", g.shardBytes},
                {"unsharded_bytes", g.unshardedBytes()},
                {"out_bytes", g.outBytes()},
                {"param_layout", layout}};
  j["all_gather"] = {{"rail_lane", plan.ag.railLane},
                     {"rounds", plan.ag.rounds.size()},
                     {"round_slots", roundSlots},
                     {"stage_bytes", plan.ag.stageBytes},
                     {"scatter_groups", plan.ag.scatterGroups.size()},
                     {"descriptors_flat", plan.ag.descriptorsFlat},
                     {"descriptors", plan.ag.descriptors}};
  j["reduce_scatter"] = {{"mode", modeName(rs.mode)},
                         {"rail_lane", rs.railLane},
                         {"passes", rs.passes},
                         {"waves", rs.waves.size()},
                         {"wave_width", rs.waveWidth},
                         {"buffer_generations", rs.bufferGenerations},
                         {"round_width", rs.roundWidth},
                         {"rounds", rs.networkRounds},
                         {"outbox_blocks", rs.outboxBlocks},
                         {"spare_blocks", rs.spareBlocks},
                         // "none" where nothing lands across nodes (one node, or the rail lane, which sums its inbox):
                         // the option given then has no effect, and the plan says so rather than echo it.
                         {"landing", g.topo.nodes > 1 && !rs.railLane ? landingName(rs.landing) : "none"},
                         {"push_area_bytes", rs.pushAreaBytes},
                         {"staging_slots", rs.stagingSlots},
                         {"sub_elems", rs.subElems},
                         {"block_bytes", rs.blockBytes},
                         {"level1_descriptors_flat", rs.level1DescriptorsFlat},
                         {"level1_descriptors", rs.level1Descriptors},
                         {"sum_ctas", rs.sumCtas},
                         {"landing_ctas", rs.landingCtas},
                         {"staging_bytes", rs.stagingBytes},
                         {"fsdp2_pack_bytes", g.outBytes() * g.topo.ranks()},
                         {"nic_seconds", rs.nicSeconds}};
  const MemoryModel& mm = plan.memory;
  j["memory"] = {{"fsdp2_live_ns", mm.fsdp2Live},
                 {"tide_live_ns", mm.tideLive},
                 {"rs_area_ns", mm.rsAreaBound},
                 {"rs_area_in_place_ns", mm.rsAreaInPlace},
                 {"rs_area_slot_reuse_ns", mm.rsAreaSlotReuse},
                 {"tide_live_in_place_ns", mm.tideLiveInPlace},
                 {"tide_live_slot_reuse_ns", mm.tideLiveSlotReuse},
                 {"staging_rounding_ns", mm.stagingRounding}};
  return j.dump(indent);
}

}  // namespace tide::plan
