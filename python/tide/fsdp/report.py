"""tide.fsdp.report and tide.fsdp.arena_bytes: what install did, per group and per arena."""

from __future__ import annotations

import sys
from typing import Any

import torch

from tide import comm as tide_comm
from tide.fsdp import registry


def arena_bytes(model: torch.nn.Module) -> int:
    """Bytes this rank holds for `model`'s TIDE arenas outside PyTorch's
    allocator: torch.cuda.memory_reserved() does not include them (CUDA: one
    ncclMemAlloc symmetric window per shard group; host fabric: one
    shared-memory segment per shard group). 0 when TIDE is not installed.
    See arena.py for why the arena is not allocated through torch."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    inst = registry.installed.get(model)
    return sum(c.reserved_bytes for c in inst.contexts) if inst is not None else 0


def report(model: torch.nn.Module, *, echo: bool = True, file=None) -> dict:
    """Per parameter group: TIDE or the fallback reason, region (ring slot or
    pinned) and its size, staging bytes, the plan summary, backward prefetch
    inversion and call counts; per shard group: the arena, with the bytes it
    holds outside torch's allocator (arena_bytes); install()'s arguments
    ("options"). Printed as a table when echo is True."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(echo, bool):
        raise TypeError(f"echo must be True or False, got {echo!r}")
    if file is not None and not callable(getattr(file, "write", None)):
        raise TypeError(f"file must be a text stream with write() (as print's), got {type(file).__name__}")
    inst = registry.installed.get(model)
    out: dict[str, Any] = {"installed": inst is not None and bool(inst.tide_groups), "torch": torch.__version__,
                           "arena_bytes": arena_bytes(model)}
    if inst is None:
        refused = registry.refused.get(model, {"reason": "not_installed",
                                               "message": "tide.fsdp.install was not called"})
        out.update(reason=refused["reason"], message=refused["message"], mode=None, groups=[], arenas=[],
                   prefetch_inversion=None)
    else:
        by_group = {id(tg.info.group): tg for tg in inst.tide_groups}
        rows = []
        for info in inst.infos:
            tg = by_group.get(id(info.group))
            if tg is not None:
                rows.append(tg.summary())
            else:
                rows.append({"fqn": info.fqn, "status": "stock", "reason": info.reason, "detail": info.detail,
                             "params": len(info.group.fsdp_params)})
        out.update(reason=None, message="", mode=inst.mode, ring=inst.ring, groups=rows,
                   arenas=[c.summary() for c in inst.contexts], prefetch_inversion=inst.inversion,
                   check_read_done=inst.check_read_done, release_grads=inst.release_grads,
                   options=dict(inst.options))
    if echo:
        _print(out, file or sys.stdout)
    return out


def _calls_and_time(stats: dict, kind: str, label: str) -> str:
    """'N <label> X ms (Y us each)' from a fabric's stats (libtide's host time inside the calls)."""
    calls = stats[f"{kind}_calls"]
    each = f" ({tide_comm.host_us_per_call(stats, kind):.0f} us each)" if calls else ""
    return f"{calls} {label} {stats[f'{kind}_host_ns'] / 1e6:.1f} ms{each}"


def _print(rep: dict, file) -> None:
    w = file.write
    if not rep["groups"]:
        w(f"tide.fsdp: not installed: {rep.get('reason')} ({rep.get('message')})\n")
        return
    w(f"tide.fsdp: {rep['mode']}, torch {rep['torch']}, backward prefetch inversion {rep['prefetch_inversion']}"
      + (", read-done check on" if rep.get("check_read_done") else "") + "\n")
    for a in rep["arenas"]:
        regions = ", ".join(f"{r['name']} {r['bytes']} B" for r in a["regions"])
        w(f"  arena ({a['fabric']}, {a['topology'][0]}x{a['topology'][1]}, rails {a['rails']}): "
          f"{a['arena_bytes']} B per rank "
          f"(user {a['user_bytes']} B: {regions}; resident shards {a['resident_bytes']} B; "
          f"scratch ~{a['scratch_bytes_estimate']} B; shard buffer {a['shard_buffer_bytes']} B in torch memory); "
          f"{a['reserved_bytes']} B held outside torch's allocator\n")
        st = a.get("fabric_stats")
        if st:
            w(f"    fabric so far: {st['copy_descriptors']} copies ({st['copy_bytes']} B; "
              f"{st['copy_graph_launches']} lists as cached-graph launches, {st['copy_graphs_built']} graphs), "
              f"{st['rail_puts']} rail puts, {st['sum_elems']} summed elements; host time inside "
              f"{_calls_and_time(st, 'all_gather', 'all-gathers')}, "
              f"{_calls_and_time(st, 'reduce_scatter', 'reduce-scatters')}\n")
    w(f"  arena bytes outside torch's allocator, this rank: {rep['arena_bytes']} "
      f"(not in torch.cuda.memory_reserved(); tide.fsdp.arena_bytes(model))\n")
    w(f"  {'group':<28} {'status':<8} {'region':<16} {'slot B':>10} {'unsharded B':>12} {'staging B':>10}"
      f"  plan / reason\n")
    for g in rep["groups"]:
        if g["status"] == "tide":
            p = g["plan"]
            st = g["stats"]
            note = (f"{g['params']} params {g['dtype']}, shard {g['shard_source']}, AG rounds {p['ag_rounds']} "
                    f"desc {p['ag_descriptors']}, RS waves {p['rs_waves']}"
                    + (" on the rail lane" if p.get("rs_rail_lane") else "") + f", live {p['tide_live_ns']} NS "
                    f"(FSDP2 {p['fsdp2_live_ns']})" + (", folded" if g["folded"] else "")
                    + f"; calls: AG {st.get('all_gathers', 0)}, RS {st.get('reduce_scatters', 0)}"
                    + (f" (+{st['rs_stock']} stock)" if st.get("rs_stock") else "")
                    + (f", next AG issued ahead of this RS {st['prefetch_inversions']}x"
                       if st.get("prefetch_inversions") else ""))
            w(f"  {g['fqn'][:28]:<28} {'tide':<8} {g['region'][:16]:<16} {g['region_bytes']:>10} "
              f"{g['unsharded_bytes']:>12} {g['staging_bytes']:>10}  {note}\n")
        else:
            w(f"  {g['fqn'][:28]:<28} {'stock':<8} {'-':<16} {'-':>10} {'-':>12} {'-':>10}  "
              f"{g['reason']}: {g['detail']}\n")
