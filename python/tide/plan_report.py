"""Human-readable table of a plan summary (the dict make_plan returns)."""

from __future__ import annotations

MIB = 1 << 20


def _mib(nbytes: int) -> str:
    return f"{nbytes / MIB:,.2f} MiB"


def _count(n: int) -> str:
    return f"{n:,}"


def _ns(x: float) -> str:
    return f"{x:.3f}"


def _flat_to_coalesced(flat: int, coalesced: int) -> str:
    return f"{_count(flat)} flat -> {_count(coalesced)} coalesced"


def plan_rows(plan: dict) -> list[tuple[str, str, str]]:
    """(section, quantity, value) rows, in display order."""
    topo, group = plan["topology"], plan["group"]
    ag, rs, mem = plan["all_gather"], plan["reduce_scatter"], plan["memory"]
    slots = ", ".join(str(s) for s in ag["round_slots"]) or "-"
    ranks = f"{topo['nodes']} x {topo['gpus_per_node']} = {topo['ranks']} ranks"
    # The mode's own value holds what the plan's rounding stages beyond the closed forms beside it.
    rounding = f"; the {rs['mode']} value adds {_ns(mem['staging_rounding_ns'])} of rounding" \
        if mem.get("staging_rounding_ns", 0) > 0 else ""
    # App. F's rail lane (L = 1 across nodes, asked for with rail_lane): gradient rows go from
    # where they are into the lander's inbox, which it sums from; no Level 2 landing.
    if rs.get("rail_lane", False):
        lane = "yes (rows sent from the gradients: no Level 1 staging, outbox or spares)"
        landing = "none (rail lane: sums from its inbox)"
    else:
        lane = "no (staged path; rail_lane / --rail-lane would put it on the lane)" \
            if topo["gpus_per_node"] == 1 and topo["nodes"] > 1 else "no (one GPU per node across nodes only)"
        landing = "none (one node: no Level 2)" if rs["landing"] == "none" else \
            rs["landing"] + (f" (push area {_mib(rs['push_area_bytes'])})" if rs["push_area_bytes"] else "")
    ns = group["unsharded_bytes"]
    staging = _mib(rs["staging_bytes"]) + (f" ({_ns(rs['staging_bytes'] / ns)} NS)" if ns > 0 else "")
    return [
        ("topology", "nodes x GPUs per node", ranks),
        ("group", "parameters", str(group["params"])),
        ("", "dtype / grad dtype", f"{group['dtype']} / {group['grad_dtype']}"),
        ("", "shard (S) / unsharded (NS)",
         f"{_mib(group['shard_bytes'])} / {_mib(group['unsharded_bytes'])}"),
        ("all-gather", "Bruck rounds", str(ag["rounds"])),
        ("", "slots per round", slots),
        ("", "copy descriptors", _flat_to_coalesced(ag["descriptors_flat"], ag["descriptors"])),
        ("", "receive stage", _mib(ag["stage_bytes"]) + (" (rail lane: rounds put into the landings)"
                                                           if ag.get("rail_lane") else "")),
        ("reduce-scatter", "mode", f"{rs['mode']}, {rs['passes']} pass{'' if rs['passes'] == 1 else 'es'}"),
        ("", "rail lane", lane),
        ("", "waves x wave width", f"{rs['waves']} x {rs['wave_width']}"),
        ("", "buffer generations", str(rs["buffer_generations"])),
        ("", "round width k", str(rs["round_width"])),
        ("", "network rounds", str(rs["rounds"])),
        ("", "outbox blocks", str(rs["outbox_blocks"])),
        ("", "Level-1 descriptors",
         _flat_to_coalesced(rs["level1_descriptors_flat"], rs["level1_descriptors"])),
        ("", "sum / landing CTAs", f"{rs['sum_ctas']} / {rs['landing_ctas']}"),
        ("", "Level-2 landing", landing),
        ("", "staging + inbox + outbox", staging),
        ("memory (NS)", "FSDP2 live", _ns(mem["fsdp2_live_ns"])),
        ("", "TIDE live",
         f"{_ns(mem['tide_live_ns'])}  (in-place {_ns(mem['tide_live_in_place_ns'])}, "
         f"slot-reuse {_ns(mem['tide_live_slot_reuse_ns'])}{rounding})"),
        ("", "RS area",
         f"{_ns(mem['rs_area_ns'])}  (in-place {_ns(mem['rs_area_in_place_ns'])}, "
         f"slot-reuse {_ns(mem['rs_area_slot_reuse_ns'])}{rounding})"),
    ]


def format_plan(plan: dict, title: str) -> str:
    """The plan as a compact three-column table under `title`."""
    rows = plan_rows(plan)
    section_width = max(len(r[0]) for r in rows)
    quantity_width = max(len(r[1]) for r in rows)
    lines = [title, ""]
    for section, quantity, value in rows:
        lines.append(f"{section:<{section_width}}  {quantity:<{quantity_width}}  {value}".rstrip())
    lines.append("")
    lines.append("NS = N x S bytes, one unsharded group (the paper's unit).")
    return "\n".join(lines)
