#!/usr/bin/env python3
"""TIDE's collectives against stock FSDP2 and NCCL on GPUs: one torchrun job, one GPU per rank.

    tide bench --fabric cuda [--gpus N] [--json [--json-out out.json]]
    # or directly:
    torchrun --nproc_per_node=2 -m tide.bench.collectives [--native PATH/libtide_bench_native.so] \\
        --json out.json

Systems (all in the same run, so that their ratios are fair):

  all-gather (bf16, FSDP2's per-parameter outputs)
    stock_ag         NCCL all_gather_into_tensor + torch.split_with_sizes_copy (FSDP2's copy-out)
    stock_ag_nccl    the all_gather_into_tensor alone
    nccl_ce_ag       NCCL's copy-engine all-gather (CTAPolicy = NCCL_CTA_POLICY_ZERO, send and
                     receive buffers in symmetric windows) + the same copy-out      [native]
    nccl_ce_ag_nccl  that all-gather alone                                           [native]
    nccl_sym_ag_nccl the same windows on a default-policy communicator (SM kernels)  [native]
    ce_peer_write    the ceiling: cudaMemcpyAsync of the shard into every peer's
                     window through its LSA address                                  [native]
  reduce-scatter (bf16 gradients -> fp32 shard, FSDP2's packed layout)
    stock_rs         torch._chunk_cat (bf16 -> fp32 pack) + reduce_scatter_tensor fp32 (AVG)
    stock_rs_nccl    the reduce_scatter_tensor alone
    chunk_cat        the pack alone
  interference: a 256 x 8192 x 8192 bf16 torch.mm alone, and while each system loops on a
  side stream (median of the GEMMs that overlapped the loop; the row is the worst rank's slowdown
  with that rank's times, and the fewest GEMMs that overlapped on any rank).
  footprint: per call of 20 profiled after the ranks met in a barrier, the call's own kernels, the
  kernels the driver ran for copies, and the CTA-time (grid x duration) and SM-time (CTAs capped
  at the SM count x duration) of all of them.

A baseline the targets divide by (stock, NCCL's copy-engine all-gather, the copy-engine ceiling)
that could not run is listed in `skipped` and fails the run (exit 1) unless
--allow-missing-baselines; one left out by --deadline-s is only listed.

Shapes: the Llama-3.1-8B decoder-layer group (the team's shared/ANCHORS.md), and synthetic groups of 32 MiB and
128 MiB per rank (bf16 shard for AG with P = 30, fp32 output for RS with P = 16).

Rows follow nccl-tests: size is the all-gather output (N*S) or the reduce-scatter input (N*E
fp32 elements) in bytes, algbw = size / time, busbw = algbw * (N-1)/N, #wrong counts elements
that differ from the reference after one run into a poisoned output (bitwise for AG, 1e-6
relative to a float64 sum for RS). Times are the max over ranks of each rank's median. The
systems of one group are timed in interleaved rounds (--rounds; each round visits every system,
in round_order's order: rounds open with different systems, and no system runs behind the same one
in every round), so that a drift of clocks or of the device's load during the
run falls on every system of a ratio alike.

  TIDE (through the C API, tide.comm, on the CUDA fabric)
    tide_ag          TIDE-AG on one node (M=1, L=N): shards written by copy engines into every
                     rank's parameter-major landing; no copy-out exists
    tide_ag_in_place the same with this rank's shard already in its own landing rows (the
                     adapter's cast path): no shard pointer, no copy into the own landing
                     (its interference row shows the bare peer writes' share)
    tide_ag_in_place_nographs  the same on a communicator made with TIDE_COPY_GRAPHS=0: every
                     call's copies enqueued one by one (batch) instead of as one launch of a
                     cached graph of memcpy nodes (two or more GPUs)
    tide_rs          TIDE-RS: bf16 gradients where they are -> fp32 shard (AVG)
    tide_*_M{M}L{L}  the same on M virtual nodes of L GPUs (Bruck rounds / Latin-square waves,
                     copy-engine rails); Level 2 lands by pulling rows through peer addresses
    tide_rs_M{M}L{L}_push  the same with the Level 2 push landing (copy engines move each row to
                     its lander, which then reads local memory only)
    tide_rs_M{M}L{L}_netlanding  the same on a communicator made with TIDE_RS_LANDING_QUEUE=net:
                     each wave's landing queued behind the sends (one network stream) instead
                     of on its own queue beside the next wave's sends
    tide_rs_M{M}L{L}_ctas{C}  the same with the solver's sum budget times M / (M - 1): the
                     sums also produce the own node's block, which the rail does not carry
    tide_ag_M{M}L1_lane  one GPU per node only: TIDE-AG on the rail lane (App. F), on the lane row's
                     communicator: the Bruck rounds put straight into the landings, no receive
                     stage or scatter copies
    tide_rs_M{M}L1_lane  one GPU per node only (tide_rs_M2L1_lane on two GPUs): the same on the
                     rail lane (paper App. F, rail_lane=True) on a communicator of its own: rows
                     sent from the gradients themselves into a double-buffered inbox and summed
                     there, no Level 1 staging, outbox, spares or Level 2 landing; the same bits.
                     Left out, with the reason in `skipped`, where the rails are RMA (they read
                     only from the arena)
"""
from __future__ import annotations

import argparse
import ctypes
import datetime
import faulthandler
import json
import math
import os
import time
import sys
from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.distributed as dist

from tide.bench.calibration import H200_PAIR
from tide.bench.gemm_interference import GEMM_SHAPE, gemm_interference, gemm_launch_profile, interference_row
from tide.bench.interleaved_timing import gather_over_ranks, interleaved_medians, max_over_ranks, sum_over_ranks
from tide.bench.kernel_footprint import format_timeline, footprint_line, kernel_footprint
from tide.bench.nccl_native import Native, NativeComm, wrap_device_bytes
from tide.bench.scoped_env import scoped_env
from tide.bench.topologies import node_splits, parse_topologies

MiB = 1 << 20

# One Llama-3.1-8B decoder layer (hidden 4096, 8 KV heads of 128, MLP 14336).
LLAMA_31_8B_LAYER = [
    ("q_proj", (4096, 4096)),
    ("k_proj", (1024, 4096)),
    ("v_proj", (1024, 4096)),
    ("o_proj", (4096, 4096)),
    ("gate_proj", (14336, 4096)),
    ("up_proj", (14336, 4096)),
    ("down_proj", (4096, 14336)),
    ("input_layernorm", (4096,)),
    ("post_attention_layernorm", (4096,)),
]


# ---------------------------------------------------------------- what a run left out


@dataclass(frozen=True)
class Skip:
    """A row (or a footprint or interference measurement) the run left out: `what` names it
    ("system/group", "footprint system/group", ...), `why` says why, and `past_deadline` tells a
    cut by --deadline-s (the run ran out of time) from a system that could not run."""

    what: str
    why: str
    past_deadline: bool = False

    @property
    def line(self) -> str:
        return f"{self.what}: {self.why}"


# ---------------------------------------------------------------- group geometry


@dataclass
class Group:
    """FSDP2's dim-0 sharding of a parameter group over N ranks."""

    name: str
    shapes: list[tuple[int, ...]]
    ranks: int
    rows: list[int] = field(init=False)        # D_p
    row_elems: list[int] = field(init=False)   # K_p
    shard_rows: list[int] = field(init=False)  # R_p = ceil(D_p / N)

    def __post_init__(self):
        self.rows = [s[0] for s in self.shapes]
        self.row_elems = [math.prod(s[1:]) for s in self.shapes]
        self.shard_rows = [-(-d // self.ranks) for d in self.rows]

    @property
    def shard_numels(self) -> list[int]:  # R_p K_p: one rank's shard (and RS output) of p
        return [r * k for r, k in zip(self.shard_rows, self.row_elems)]

    @property
    def shard_elems(self) -> int:  # S / 2 for bf16, E for the fp32 RS output
        return sum(self.shard_numels)


def synthetic_group(name: str, elems_per_rank: int, params: int, ranks: int, row_elems: int = 1024) -> Group:
    """`params` weights of uneven size whose shards add up to about elems_per_rank per rank; some
    have padded tails (D_p not a multiple of N)."""
    weights = [1 + (p * 7) % 5 for p in range(params)]
    total = sum(weights)
    shapes = []
    for p, w in enumerate(weights):
        shard_rows = max(1, round(w / total * elems_per_rank / row_elems))
        shapes.append((max(1, ranks * shard_rows - (p % ranks)), row_elems))
    return Group(name, shapes, ranks)


# ---------------------------------------------------------------- systems


class Runner:
    """A prepared system: run() enqueues one call on the current stream; wrong() runs once into a
    poisoned output and counts elements that differ from the reference."""

    def run(self):
        raise NotImplementedError

    def wrong(self) -> int:
        raise NotImplementedError


@dataclass
class System:
    name: str
    op: str                                  # "ag" | "rs"
    prepare: Callable[[Group], Runner | None]  # None: not available here (`unavailable` says why)
    note: str = ""
    llama_only: bool = False                 # measured on the Llama group alone
    unavailable: str = "not available here"  # the skip's reason where prepare returns None


def ag_shard(group: Group, rank: int, device) -> torch.Tensor:
    g = torch.Generator(device=device).manual_seed(1000 + rank)
    return torch.randn(group.shard_elems, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16)


def ag_expected(group: Group, device) -> torch.Tensor:
    """(N, S) bf16: row r is rank r's packed shard."""
    return torch.stack([ag_shard(group, r, device) for r in range(group.ranks)])


class AgCopyOut:
    """FSDP2's copy-out: split the (N, S) all-gather output into per-parameter (N, R_p K_p) outputs."""

    def __init__(self, group: Group, device):
        self.sizes = group.shard_numels
        self.outs = [torch.empty(group.ranks * n, dtype=torch.bfloat16, device=device) for n in self.sizes]
        self.views = [o.view(group.ranks, -1) for o in self.outs]

    def __call__(self, flat: torch.Tensor, ranks: int):
        torch.split_with_sizes_copy(flat.view(ranks, -1), self.sizes, dim=1, out=self.views)

    def poison(self):
        for o in self.outs:
            o.fill_(float("nan"))

    def wrong(self, expected: torch.Tensor) -> int:
        bad = 0
        for want, got in zip(torch.split(expected, self.sizes, dim=1), self.views):
            bad += int((got.view(torch.int16) != want.contiguous().view(torch.int16)).sum())
        return bad


class GatherAndCopyOut(Runner):
    """An all-gather into a flat (N, S) output, then (copy_out) FSDP2's split into per-parameter
    outputs. Subclasses set group, copy_out, output, split and gather()."""

    group: Group
    copy_out: bool
    output: torch.Tensor
    split: AgCopyOut

    def gather(self):
        raise NotImplementedError

    def run(self):
        self.gather()
        if self.copy_out:
            self.split(self.output, self.group.ranks)

    def wrong(self) -> int:
        self.output.fill_(float("nan"))
        self.split.poison()
        self.run()
        expected = ag_expected(self.group, self.output.device)
        if self.copy_out:
            return self.split.wrong(expected)
        return int((self.output.view(self.group.ranks, -1).view(torch.int16) != expected.view(torch.int16)).sum())


class StockAg(GatherAndCopyOut):
    def __init__(self, group: Group, copy_out: bool):
        dev = torch.device("cuda", torch.cuda.current_device())
        self.group, self.copy_out = group, copy_out
        self.input = ag_shard(group, dist.get_rank(), dev)
        self.output = torch.empty(group.ranks * group.shard_elems, dtype=torch.bfloat16, device=dev)
        self.split = AgCopyOut(group, dev)

    def gather(self):
        dist.all_gather_into_tensor(self.output, self.input)


class NativeAg(GatherAndCopyOut):
    """An all-gather on one of the shared native communicators (windows sized for the largest
    group; a call uses their first bytes)."""

    def __init__(self, group: Group, comm: NativeComm, copy_out: bool):
        dev = torch.device("cuda", torch.cuda.current_device())
        self.group, self.comm, self.copy_out = group, comm, copy_out
        self.bytes = group.shard_elems * 2
        comm.send[: self.bytes].view(torch.bfloat16).copy_(ag_shard(group, dist.get_rank(), dev))
        self.output = comm.recv[: group.ranks * self.bytes].view(torch.bfloat16)
        self.split = AgCopyOut(group, dev)

    def gather(self):
        self.comm.all_gather(self.bytes)


class CePeerWrite(Runner):
    """The copy-engine ceiling of an all-gather: each rank writes its shard into its slot of every
    peer's receive window (N-1 copies of S bytes) with cudaMemcpyAsync."""

    def __init__(self, group: Group, comm: NativeComm):
        dev = torch.device("cuda", torch.cuda.current_device())
        self.group, self.comm = group, comm
        self.bytes = group.shard_elems * 2
        comm.send[: self.bytes].view(torch.bfloat16).copy_(ag_shard(group, dist.get_rank(), dev))
        me = dist.get_rank()
        self.targets = []
        for peer in range(group.ranks):
            if peer == me:
                continue
            base = comm.peer_recv(peer)
            if not base:
                raise RuntimeError(f"rank {peer} is not load/store reachable")
            self.targets.append(base + me * self.bytes)
        self.src = comm.send.data_ptr()
        # One stream per peer beyond the first, forked from and joined back to the caller's: on one
        # stream the N-1 copies would run one after another, a ceiling below what TIDE's several
        # queues reach on more than two GPUs.
        self.streams = [torch.cuda.Stream() for _ in self.targets[1:]]
        self.fork = torch.cuda.Event()
        self.joins = [torch.cuda.Event() for _ in self.streams]

    def run(self):
        caller = torch.cuda.current_stream()
        lib = self.comm.native.lib
        if self.streams:
            self.fork.record(caller)
        for i, dst in enumerate(self.targets):
            side = caller if i == 0 else self.streams[i - 1]
            if i > 0:
                side.wait_event(self.fork)
            stream = ctypes.c_void_p(side.cuda_stream)
            self.comm.native.check(lib.tbn_copy(ctypes.c_void_p(dst), ctypes.c_void_p(self.src), self.bytes, stream),
                                   "peer copy")
        for side, done in zip(self.streams, self.joins):
            done.record(side)
            caller.wait_event(done)

    def wrong(self) -> int:
        me = dist.get_rank()
        out = self.comm.recv[: self.group.ranks * self.bytes].view(torch.bfloat16).view(self.group.ranks, -1)
        out.fill_(float("nan"))
        torch.cuda.synchronize()
        dist.barrier()
        self.run()
        torch.cuda.synchronize()
        dist.barrier()
        expected = ag_expected(self.group, out.device)
        rows = [r for r in range(self.group.ranks) if r != me]
        return int((out[rows].view(torch.int16) != expected[rows].view(torch.int16)).sum())


def rs_grads(group: Group, rank: int, device) -> list[torch.Tensor]:
    g = torch.Generator(device=device).manual_seed(2000 + rank)
    return [torch.randn(s, generator=g, device=device, dtype=torch.float32).to(torch.bfloat16) for s in group.shapes]


def rs_wrong_elements(output, ref) -> int:
    """Elements of a reduce-scatter `output` off its float64 `ref` by more than 1e-6 of the output's scale
    (max(1, |ref|_inf)), as the host fabric's check counts them; NaN counts. A bound relative to each element
    would flag right answers: NCCL's average scales each input by 1/N before it sums, so an element whose
    inputs cancel carries rounding of the inputs' size, not its own."""
    got = output.double()
    scale = max(1.0, float(ref.abs().max())) if ref.numel() else 1.0
    return int((~((got - ref).abs() <= 1e-6 * scale)).sum())


def rs_reference(group: Group, rank: int, device) -> torch.Tensor:
    """float64 AVG over ranks of rank `rank`'s rows, FSDP2's packed layout (zero past D_p)."""
    parts = [torch.zeros(n, dtype=torch.float64, device=device) for n in group.shard_numels]
    for q in range(group.ranks):
        for p, grad in enumerate(rs_grads(group, q, device)):
            r0, r1 = rank * group.shard_rows[p], min((rank + 1) * group.shard_rows[p], group.rows[p])
            if r1 > r0:
                parts[p][: (r1 - r0) * group.row_elems[p]] += grad.reshape(group.rows[p], -1)[r0:r1].flatten().double()
    return torch.cat(parts) / group.ranks


class StockRs(Runner):
    def __init__(self, group: Group, pack: bool = True, reduce: bool = True):
        dev = torch.device("cuda", torch.cuda.current_device())
        self.group, self.pack, self.reduce = group, pack, reduce
        self.grads = rs_grads(group, dist.get_rank(), dev)
        self.input = torch.empty(group.ranks * group.shard_elems, dtype=torch.float32, device=dev)
        self.output = torch.empty(group.shard_elems, dtype=torch.float32, device=dev)
        if not pack:  # the reduce-scatter alone reads an already packed buffer
            self._pack()

    def _pack(self):
        torch._chunk_cat(self.grads, dim=0, num_chunks=self.group.ranks, out=self.input.view(self.group.ranks, -1))

    def run(self):
        if self.pack:
            self._pack()
        if self.reduce:
            dist.reduce_scatter_tensor(self.output, self.input, op=dist.ReduceOp.AVG)

    def wrong(self) -> int:
        if not self.reduce:  # the pack alone: compare with the rank-major chunks
            self.input.fill_(float("nan"))
            self.run()
            want = torch.cat([torch.cat([
                torch.nn.functional.pad(g.reshape(d, -1).float(), (0, 0, 0, self.group.ranks * r - d))
                .view(self.group.ranks, -1)[i] for g, d, r in zip(self.grads, self.group.rows, self.group.shard_rows)])
                for i in range(self.group.ranks)])
            return int((self.input.view(torch.int32) != want.view(torch.int32)).sum())
        self.output.fill_(float("nan"))
        self.run()
        ref = rs_reference(self.group, dist.get_rank(), self.output.device)
        return rs_wrong_elements(self.output, ref)


def baseline_systems(comms: dict[str, NativeComm]) -> list[System]:
    """`comms`: the native communicators ("ce": CTAPolicy zero, "default"), empty without the helper."""
    ce, sym = comms.get("ce"), comms.get("default")

    def native(make, comm):
        return (lambda g: make(g) if comm is not None else None)

    no_helper = "no native helper (libtide_bench_native.so; give --native)"
    return [
        System("stock_ag", "ag", lambda g: StockAg(g, copy_out=True)),
        System("stock_ag_nccl", "ag", lambda g: StockAg(g, copy_out=False)),
        System("nccl_ce_ag", "ag", native(lambda g: NativeAg(g, ce, True), ce), unavailable=no_helper),
        System("nccl_ce_ag_nccl", "ag", native(lambda g: NativeAg(g, ce, False), ce), unavailable=no_helper),
        System("nccl_sym_ag_nccl", "ag", native(lambda g: NativeAg(g, sym, False), sym), unavailable=no_helper),
        System("ce_peer_write", "ag", native(lambda g: CePeerWrite(g, sym) if g.ranks > 1 else None, sym),
               unavailable="needs two ranks or more and the native helper"),
        System("stock_rs", "rs", lambda g: StockRs(g)),
        System("stock_rs_nccl", "rs", lambda g: StockRs(g, pack=False)),
        System("chunk_cat", "rs", lambda g: StockRs(g, reduce=False)),
    ]


# ---------------------------------------------------------------- TIDE


# Plan options for this machine (measured calibration, four passes): see calibration.py.
TIDE_PLAN = H200_PAIR


# Sum-CTA budgets measured beside the solver's choice for TIDE-RS on the Llama group. 4: the SMs
# the interference GEMM leaves free (128 CTAs, one per SM, on 132 SMs), so the sums never push it
# into a second wave; what remains of its slowdown is HBM traffic. No GEMM CTA shares an SM with a
# sum CTA of either kernel (the GEMM's CTA takes the whole register file), so from 8 sum CTAs on the
# GEMM needs a second wave (BENCHMARKS.md, session 8).
RS_CTA_SWEEP = (2, 4, 8, 16, 32, 66)


class TideContext:
    """TIDE communicators for this run through the C API (tide.comm): one per topology, every
    benchmark group registered up front, one landing sized for the largest all-gather."""

    def __init__(self, ranks: int, topologies: list[tuple[int, int]] | None = None):
        from tide import make_plan
        from tide.comm import has_cuda
        from tide.plan import scratch_bytes

        if not has_cuda():
            raise RuntimeError("libtide was built without the CUDA fabric")
        self.groups = {g.name: g for op in ("ag", "rs") for g in groups_for(op, ranks)}
        self.topologies = topologies or node_splits(ranks)
        self.comms, self.handles, self.landing, self.plans = {}, {}, {}, {}
        self.own_node_ctas: dict[tuple[int, int], int] = {}  # M > 1: the sum budget scaled by M / (M - 1)
        self.lane_plans: dict[tuple[int, int], dict] = {}  # L = 1 across nodes: the Llama group on the rail lane
        self.skipped: list[Skip] = []  # variants these rails refuse, with why
        ag_names = {g.name for g in groups_for("ag", ranks)}
        landing_bytes = max(ranks * g.shard_elems * 2 for g in self.groups.values())
        for topo in self.topologies:
            m, l = topo
            plans = {name: make_plan([list(s) for s in g.shapes], nodes=m, gpus_per_node=l, **TIDE_PLAN)
                     for name, g in self.groups.items()}
            scratch = scratch_bytes([dict(shapes=[list(s) for s in g.shapes], nodes=m, gpus_per_node=l, **TIDE_PLAN)
                                     for g in self.groups.values()])
            comm = self._communicator(topo, landing_bytes + scratch)
            self.comms[topo] = comm
            self.landing[topo] = comm.alloc(landing_bytes)
            self.handles[topo] = {name: comm.register_group([list(s) for s in g.shapes], **TIDE_PLAN)
                                  for name, g in self.groups.items()}
            if m == 1:  # fixed sum-CTA budgets on the Llama group: time against interference
                llama = self.groups["llama3.1-8b-layer"]
                for ctas in RS_CTA_SWEEP:
                    self.handles[topo][(llama.name, ctas)] = comm.register_group(
                        [list(s) for s in llama.shapes], **TIDE_PLAN, sum_ctas=ctas)
            p = plans["llama3.1-8b-layer"]["reduce_scatter"]
            log(f"# TIDE M{m}L{l}: sum CTAs {p['sum_ctas']}, landing CTAs {p['landing_ctas']}, passes {p['passes']}")
            self.plans[topo] = plans
            if m == 1 and ranks > 1:
                # The same all-gathers on a communicator without copy graphs (TIDE_COPY_GRAPHS=0, read
                # when its endpoint is made): what the graphs save, paired in this run.
                key = (m, l, "no-graphs")
                with scoped_env({"TIDE_COPY_GRAPHS": "0"}):
                    self.comms[key] = self._communicator(topo, landing_bytes + scratch)
                self.landing[key] = self.comms[key].alloc(landing_bytes)
                self.handles[key] = {name: self.comms[key].register_group([list(s) for s in g.shapes], **TIDE_PLAN)
                                     for name, g in self.groups.items() if name in ag_names}
            if m > 1:  # variants of the Llama RS across nodes
                llama = self.groups["llama3.1-8b-layer"]
                # Eq. 13 sizes the sums to feed the rail, which carries M - 1 of a pass's M blocks; the
                # own node's block is summed too, so the sums move M / (M - 1) times the rail's share
                # (twice on M2L1). The Llama RS again with the sum budget scaled so: is that the bound?
                ctas = math.ceil(p["sum_ctas"] * m / (m - 1))
                self.handles[topo][(llama.name, ctas)] = comm.register_group(
                    [list(s) for s in llama.shapes], **TIDE_PLAN, sum_ctas=ctas)
                self.own_node_ctas[topo] = ctas
                # The push landing (one direction per communicator), and the landings behind the sends
                # (TIDE_RS_LANDING_QUEUE=net, read when the communicator is made): each on its own
                # communicator, paired in this run.
                self._llama_rs_variant(topo, "push", {}, landing="push")
                self._llama_rs_variant(topo, "net-landing", {"TIDE_RS_LANDING_QUEUE": "net"})
                if l == 1:  # App. F's rail lane (one GPU per node only): no staging, outbox or spares
                    self._rail_lane_variant(topo)

    def _llama_rs_variant(self, topo, name: str, env: dict[str, str], landing_bytes: int = 0, **plan_options):
        """The Llama group alone on a communicator of its own, made under `env`, with extra plan
        options; its handle under key (M, L, name); with `landing_bytes`, a landing of that size
        for all-gathers too (ctx.landing[key])."""
        from tide.plan import scratch_bytes

        llama = self.groups["llama3.1-8b-layer"]
        shapes = [list(s) for s in llama.shapes]
        key = (*topo, name)
        with scoped_env(env):
            self.comms[key] = self._communicator(topo, landing_bytes + scratch_bytes(
                [dict(shapes=shapes, nodes=topo[0], gpus_per_node=topo[1], **plan_options, **TIDE_PLAN)]))
        if landing_bytes:
            self.landing[key] = self.comms[key].alloc(landing_bytes)
        self.handles[key] = {llama.name: self.comms[key].register_group(shapes, **plan_options, **TIDE_PLAN)}

    def _rail_lane_variant(self, topo) -> None:
        """The Llama RS on App. F's rail lane (rail_lane=True; one GPU per node), on a communicator
        of its own (its scratch holds only the lane's inbox), under key (M, 1, "lane"). Should the
        group's registration be refused (e.g. an arena too small), the same on every rank, the row
        is left out and `skipped` says why; the other rows still run."""
        from tide import make_plan
        from tide._capi import TideError

        llama, key = self.groups["llama3.1-8b-layer"], (*topo, "lane")
        try:  # a landing too: the all-gather's lane row (tide_ag_M{M}L1_lane) runs on it
            self._llama_rs_variant(topo, "lane", {}, landing_bytes=llama.ranks * llama.shard_elems * 2,
                                   rail_lane=True)
        except TideError as e:
            self.skipped.append(Skip(lane_row_name(topo), str(e)))
            log(f"# {lane_row_name(topo)} left out: {e}")
            comm = self.comms.pop(key, None)
            if comm is not None:
                comm.close()
            return
        self.lane_plans[topo] = plan = make_plan([list(s) for s in llama.shapes], nodes=topo[0],
                                                 gpus_per_node=topo[1], rail_lane=True, **TIDE_PLAN)
        staged = self.plans[topo][llama.name]["reduce_scatter"]["staging_bytes"]
        log(f"# TIDE M{topo[0]}L{topo[1]} rail lane: RS staging {plan['reduce_scatter']['staging_bytes'] / MiB:.1f} "
            f"MiB (staged path {staged / MiB:.1f} MiB)")

    @staticmethod
    def _communicator(topo, arena_bytes: int):
        """A CUDA-fabric communicator on every rank, its unique id from rank 0; 64 MiB spare arena."""
        from tide.comm import Communicator, unique_id

        uid = [unique_id() if dist.get_rank() == 0 else None]
        dist.broadcast_object_list(uid, src=0)
        return Communicator(nodes=topo[0], gpus_per_node=topo[1], rank=dist.get_rank(), fabric="cuda",
                            unique_id=uid[0], device=torch.cuda.current_device(), arena_bytes=arena_bytes + 64 * MiB)

    def close(self):
        for comm in self.comms.values():
            comm.close()


def tide_stream() -> int:
    return torch.cuda.current_stream().cuda_stream


class TideAg(Runner):
    """TIDE-AG: every rank's shard written by copy engines straight into each rank's
    parameter-major landing (FSDP2's per-parameter outputs, contiguous)."""

    def __init__(self, group: Group, ctx: TideContext, topo):
        dev = torch.device("cuda", torch.cuda.current_device())
        self.group, self.comm, self.handle = group, ctx.comms[topo], ctx.handles[topo][group.name]
        self.offset, ptr = ctx.landing[topo]
        self.shard = ag_shard(group, dist.get_rank(), dev)
        self.landing = wrap_device_bytes(ptr, group.ranks * group.shard_elems * 2, dev)

    def run(self):
        self.comm.all_gather(self.handle, self.shard.data_ptr(), self.offset, stream=tide_stream())

    def wrong(self) -> int:
        self.landing.fill_(0xA5)
        return self.wrong_after_poison()

    def wrong_after_poison(self) -> int:
        self.run()
        torch.cuda.synchronize()
        expected = ag_expected(self.group, self.shard.device)  # (N, S) rank-major
        # Parameter-major: parameter p's N shards back to back, as FSDP2's copy-out leaves them.
        want = torch.cat([part.reshape(-1) for part in torch.split(expected, self.group.shard_numels, dim=1)])
        return int((self.landing.view(torch.int16) != want.view(torch.int16)).sum())


def own_landing_rows(group: Group, rank: int) -> list[tuple[int, int, int]]:
    """Per parameter, where `rank`'s shard sits: (element offset in the parameter-major landing,
    element offset in the rank's packed shard, elements)."""
    spans, base, at = [], 0, 0
    for numel in group.shard_numels:  # the landing holds p's N shards back to back
        spans.append((base + rank * numel, at, numel))
        base += group.ranks * numel
        at += numel
    return spans


class TideAgInPlace(TideAg):
    """TIDE-AG in place (one node): this rank's shard already sits in its own rows of the
    landing, as the FSDP2 adapter's cast leaves it with fp32 master weights, so the call gets
    no shard pointer and copies nothing into the own landing; the copy engines only write the
    peers' landings."""

    def __init__(self, group: Group, ctx: TideContext, topo):
        super().__init__(group, ctx, topo)
        self.own_rows = [(self.landing.narrow(0, 2 * landing_at, 2 * numel).view(torch.bfloat16),
                          self.shard.narrow(0, shard_at, numel))
                         for landing_at, shard_at, numel in own_landing_rows(group, dist.get_rank())]
        self.place()

    def place(self):
        for rows, part in self.own_rows:
            rows.copy_(part)
        torch.cuda.synchronize()

    def run(self):
        self.comm.all_gather(self.handle, 0, self.offset, stream=tide_stream())

    def wrong(self) -> int:
        self.landing.fill_(0xA5)
        self.place()
        return self.wrong_after_poison()


class TideRs(Runner):
    """TIDE-RS: per-parameter bf16 gradients read where they are, reduced into the fp32 shard
    (AVG: alpha = 1/N). `ctas`: a fixed sum-CTA budget registered for that group (0: the solver's)."""

    def __init__(self, group: Group, ctx: TideContext, topo, ctas: int = 0):
        dev = torch.device("cuda", torch.cuda.current_device())
        key = (group.name, ctas) if ctas else group.name
        self.group, self.comm = group, ctx.comms[topo]
        self.handle = ctx.handles[topo][key]
        self.grads = rs_grads(group, dist.get_rank(), dev)
        self.ptrs = [g.data_ptr() for g in self.grads]
        self.output = torch.empty(group.shard_elems, dtype=torch.float32, device=dev)

    def run(self):
        self.comm.reduce_scatter(self.handle, self.ptrs, self.output.data_ptr(), alpha=1.0 / self.group.ranks,
                                 stream=tide_stream())

    def wrong(self) -> int:
        self.output.fill_(float("nan"))
        self.run()
        torch.cuda.synchronize()
        ref = rs_reference(self.group, dist.get_rank(), self.output.device)
        return rs_wrong_elements(self.output, ref)


def lane_row_name(topo) -> str:
    """The rail-lane row of topology (M, 1): tide_rs_M{M}L1_lane."""
    return f"tide_rs_M{topo[0]}L{topo[1]}_lane"


def tide_systems(ctx: TideContext | None) -> list[System]:
    if ctx is None:
        return []
    systems = []
    for topo in ctx.topologies:
        tag = "" if topo[0] == 1 else f"_M{topo[0]}L{topo[1]}"
        # The virtual-node topology runs on the Llama group only: it shows the rail path, and
        # the synthetic sweeps would double the run.
        llama_only = topo[0] > 1
        systems.append(System(f"tide_ag{tag}", "ag", lambda g, t=topo: TideAg(g, ctx, t), llama_only=llama_only))
        if topo[0] > 1 and (*topo, "lane") in ctx.comms:  # one GPU per node: the all-gather's rail lane
            systems.append(System(f"tide_ag{tag}_lane", "ag", lambda g, t=(*topo, "lane"): TideAg(g, ctx, t),
                                  llama_only=True))
        if topo[0] == 1:
            systems.append(System("tide_ag_in_place", "ag", lambda g, t=topo: TideAgInPlace(g, ctx, t)))
            if (*topo, "no-graphs") in ctx.comms:
                systems.append(System("tide_ag_in_place_nographs", "ag",
                                      lambda g, t=(*topo, "no-graphs"): TideAgInPlace(g, ctx, t)))
        systems.append(System(f"tide_rs{tag}", "rs", lambda g, t=topo: TideRs(g, ctx, t), llama_only=llama_only))
        if topo[0] > 1:  # Level 2 landing by copy-engine push instead of pulls through peer addresses
            systems.append(System(f"tide_rs{tag}_push", "rs", lambda g, t=(*topo, "push"): TideRs(g, ctx, t),
                                  llama_only=True))
            systems.append(System(f"tide_rs{tag}_netlanding", "rs",
                                  lambda g, t=(*topo, "net-landing"): TideRs(g, ctx, t), llama_only=True))
            if (*topo, "lane") in ctx.comms:  # one GPU per node: the rail lane (App. F)
                systems.append(System(lane_row_name(topo), "rs", lambda g, t=(*topo, "lane"): TideRs(g, ctx, t),
                                      llama_only=True))
            ctas = ctx.own_node_ctas[topo]
            systems.append(System(f"tide_rs{tag}_ctas{ctas}", "rs", lambda g, t=topo, c=ctas: TideRs(g, ctx, t, c),
                                  llama_only=True))
        if topo[0] == 1:
            for ctas in RS_CTA_SWEEP:
                systems.append(System(f"tide_rs_ctas{ctas}", "rs", lambda g, t=topo, c=ctas: TideRs(g, ctx, t, c),
                                      llama_only=True))
    return systems


# ---------------------------------------------------------------- driver


def groups_for(op: str, ranks: int) -> list[Group]:
    llama = Group("llama3.1-8b-layer", [s for _, s in LLAMA_31_8B_LAYER], ranks)
    if op == "ag":  # bf16 shard bytes per rank, P = 30
        return [llama, synthetic_group("32MiB-P30", 32 * MiB // 2, 30, ranks),
                synthetic_group("128MiB-P30", 128 * MiB // 2, 30, ranks)]
    return [llama, synthetic_group("32MiB-P16", 32 * MiB // 4, 16, ranks),  # fp32 output bytes per rank, P = 16
            synthetic_group("128MiB-P16", 128 * MiB // 4, 16, ranks)]


def row_for(system: System, group: Group, ms: float, wrong: int, host_us: float) -> dict:
    n = group.ranks
    size = n * group.shard_elems * (2 if system.op == "ag" else 4)
    algbw = size / (ms * 1e-3) / 1e9
    return {"system": system.name, "op": system.op, "group": group.name, "params": len(group.shapes),
            "ranks": n, "size_bytes": size, "dtype": "bf16" if system.op == "ag" else "bf16->fp32",
            "time_us": ms * 1e3, "algbw_GBps": algbw, "busbw_GBps": algbw * (n - 1) / n, "wrong": wrong,
            "host_us": host_us}


# Issue 4's targets, each computed from fixed rows of the Llama-3.1-8B layer group (the time and the
# interference of one configuration: tide_ag and tide_rs, the solver's plans), so that no target is
# met by a row picked after the fact.
TARGET_GROUP = "llama3.1-8b-layer"
TARGETS = (
    # name, numerator system, denominator system, source, comparison, limit
    ("ag_time_vs_stock", "tide_ag", "stock_ag", "time", "<=", 0.55),
    ("ag_time_vs_nccl_ce_with_copy_out", "tide_ag", "nccl_ce_ag", "time", "<=", 0.8),
    ("ag_share_of_ce_ceiling", "ce_peer_write", "tide_ag", "time", ">=", 0.9),  # ceiling time / TIDE time
    ("rs_time_vs_stock", "tide_rs", "stock_rs", "time", "<=", 0.35),
    ("gemm_slowdown_pct_during_ag", "tide_ag", None, "interference", "<=", 2.0),
    ("gemm_slowdown_pct_during_rs", "tide_rs", None, "interference", "<=", 5.0),
    ("rs_staging_vs_NS", "tide_rs", None, "staging", "<=", 0.6),
)


def issue4_targets(rows: list[dict], interference: list[dict], staging: list[dict]) -> dict:
    """{target: {"value", "limit", "met"} or {"missing": why}} from the run's rows alone."""
    times = {r["system"]: r["time_us"] for r in rows if r["group"] == TARGET_GROUP and r.get("wrong", 0) == 0}
    wrong = {r["system"] for r in rows if r["group"] == TARGET_GROUP and r.get("wrong", 0) != 0}
    slow = {r["system"]: r["slowdown_pct"] for r in interference
            if r["group"] == TARGET_GROUP and r.get("overlapped", 0) >= 20}
    # The one-node plan's staging (tide_rs runs the communicator's first topology, one node).
    stage = next((s["ratio_to_NS"] for s in staging if s["group"] == TARGET_GROUP and s["topology"][0] == 1
                  and "variant" not in s), None)
    out: dict[str, dict] = {}
    for name, num, den, source, cmp, limit in TARGETS:
        if source == "time":
            missing = [s for s in (num, den) if s not in times]
            if missing:
                why = ", ".join(f"{s} {'had wrong outputs' if s in wrong else 'not measured'}" for s in missing)
                out[name] = {"missing": why}
                continue
            value = times[num] / times[den]
        elif source == "interference":
            if num not in slow:
                out[name] = {"missing": f"no interference row of {num} with at least 20 overlapped GEMMs"}
                continue
            value = slow[num]
        else:
            if stage is None:
                out[name] = {"missing": "no one-node staging row"}
                continue
            value = stage
        out[name] = {"value": value, "limit": limit, "met": value <= limit if cmp == "<=" else value >= limit}
    return out


_T0 = time.monotonic()


def why_not_prepared_everywhere(why_here: str | None, device) -> str | None:
    """None when every rank prepared the system (why_here None on each); otherwise the reason on
    every rank: the one reason if all ranks gave the same, else each failed rank's, named. Every rank
    calls it for every system, in the same order: a system prepared on some ranks only (an allocation
    that failed on one) would be timed against collectives the others never call, and the skip lines
    come from rank 0, which must know the other ranks' reasons."""
    flag = torch.tensor([int(why_here is None)], device=device, dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MIN)
    if int(flag):
        return None
    reasons: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(reasons, why_here)
    if all(r is not None for r in reasons) and len(set(reasons)) == 1:
        return reasons[0]
    return "; ".join(f"rank {r}: {w}" for r, w in enumerate(reasons) if w is not None)


def log(*a):
    if dist.get_rank() == 0:
        print(f"[{time.monotonic() - _T0:6.1f}s]", *a, flush=True)


def print_table(rows: list[dict]):
    if dist.get_rank() != 0:
        return
    print(f"#{'op':>3} {'group':>18} {'system':>26} {'size(B)':>11} {'time(us)':>10} {'algbw':>8} {'busbw':>8} "
          f"{'#wrong':>7} {'host(us)':>9}", flush=True)
    for r in rows:
        print(f" {r['op']:>3} {r['group']:>18} {r['system']:>26} {r['size_bytes']:>11} {r['time_us']:>10.1f} "
              f"{r['algbw_GBps']:>8.1f} {r['busbw_GBps']:>8.1f} {r['wrong']:>7} {r['host_us']:>9.1f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--native", default="build/gpu/bench/native/libtide_bench_native.so")
    ap.add_argument("--json", default="")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=5,
                    help="interleaved rounds over a group's systems (each gets ceil(iters / rounds) calls a round)")
    ap.add_argument("--gemms", type=int, default=40)
    ap.add_argument("--skip-interference", action="store_true")
    ap.add_argument("--topologies", metavar="MxL,...",
                    help="TIDE on these virtual topologies only (default: every split of the ranks), so that "
                         "a machine's topologies can be spread over several runs")
    ap.add_argument("--allow-missing-baselines", action="store_true",
                    help="do not fail the run when a baseline the targets divide by (stock, NCCL's copy-engine "
                         "all-gather, the copy-engine ceiling) could not run, e.g. without --native")
    ap.add_argument("--hang-s", type=float, default=90,
                    help="a measurement still running after this many seconds prints every thread's "
                         "Python stack and exits the process (a hang then names itself)")
    ap.add_argument("--deadline-s", type=float, default=330,
                    help="stop starting measurements after this many seconds and write what was measured")
    args = ap.parse_args()
    for name, low in (("iters", 1), ("warmup", 0), ("rounds", 1), ("gemms", 1)):
        if getattr(args, name) < low:
            ap.error(f"--{name} must be at least {low}, got {getattr(args, name)}")
    for name in ("hang_s", "deadline_s"):
        if not getattr(args, name) > 0:  # NaN too
            ap.error(f"--{name.replace('_', '-')} must be a positive number of seconds, got {getattr(args, name)}")

    topologies = None
    if args.topologies:  # torchrun's WORLD_SIZE: refused before any process group or GPU is touched
        try:
            topologies = parse_topologies(args.topologies, int(os.environ.get("WORLD_SIZE", "1")))
        except ValueError as e:
            ap.error(f"--topologies: {e}")
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit("refusing to run: NCCL_NVLS_ENABLE must be 0 (no NVLink multicast on these machines)")
    local = int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    ranks = dist.get_world_size()
    # Everything runs on a created stream: NCCL's copy-engine path (cudaMemcpyBatchAsync)
    # refuses the legacy default stream, PyTorch's default.
    torch.cuda.set_stream(torch.cuda.Stream())

    native = Native(args.native) if os.path.exists(args.native) else None
    comms: dict[str, NativeComm] = {}
    if native is None:
        log(f"native helper {args.native} not found: NCCL copy-engine rows and the ceiling are skipped "
            "(the run then fails unless --allow-missing-baselines)")
    else:
        # One communicator per CTA policy, windows registered once for the largest group.
        shard = max(g.shard_elems * 2 for g in groups_for("ag", ranks))
        comms = {"ce": NativeComm(native, Native.NCCL_CTA_POLICY_ZERO, shard, ranks * shard),
                 "default": NativeComm(native, Native.DEFAULT_POLICY, shard, ranks * shard)}

    tide_ctx = None
    tide_failed = ""  # TIDE with its CUDA fabric that could not start: the run fails (after its rows)
    try:
        tide_ctx = TideContext(ranks, topologies)
    except Exception as e:  # no TIDE rows then, and the reason is printed
        log(f"# TIDE not available: {e}")
        if tide_has_cuda():
            tide_failed = f"libtide has its CUDA fabric, but TIDE could not start: {e}"
    systems = baseline_systems(comms) + tide_systems(tide_ctx)
    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": torch.cuda.get_device_name(), "ranks": ranks, "torch": torch.__version__,
        "nccl_torch": ".".join(map(str, torch.cuda.nccl.version())),
        "nccl_native": native.version() if native else None, "cuda": torch.version.cuda,
        "iters": args.iters, "warmup": args.warmup, "rounds": args.rounds, "gemm": list(GEMM_SHAPE),
        "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
    }
    log(f"# baselines: {meta}")

    def out_of_time(what: str) -> bool:
        # Every rank must agree, or one would start a collective the others skip.
        late = torch.tensor([time.monotonic() - _T0 > args.deadline_s], device="cuda", dtype=torch.int32)
        dist.all_reduce(late)
        if int(late):
            skipped.append(Skip(what, f"past --deadline-s {args.deadline_s:.0f}", past_deadline=True))
        return bool(int(late))

    rows, runners = [], {}
    skipped: list[Skip] = list(tide_ctx.skipped) if tide_ctx is not None else []
    # The Llama group first (AG then RS), then the synthetic sizes: the numbers the targets
    # name come first should a deadline cut the run short.
    order = [(op, groups_for(op, ranks)[i]) for i in range(3) for op in ("ag", "rs")]
    for op, group in order:
        prepared: list[tuple[System, Runner]] = []
        for system in (s for s in systems if s.op == op):
            if system.llama_only and not group.name.startswith("llama"):
                continue
            if out_of_time(f"{system.name}/{group.name}"):
                continue
            try:
                runner, why = system.prepare(group), system.unavailable
            except Exception as e:  # a baseline missing here must not stop the others
                runner, why = None, str(e)
            not_everywhere = why_not_prepared_everywhere(None if runner is not None else str(why), "cuda")
            if not_everywhere is not None:
                runner, why = None, not_everywhere
            if runner is None:
                skipped.append(Skip(f"{system.name}/{group.name}", str(why)))
            else:
                prepared.append((system, runner))
        if not prepared:
            continue
        # Progress: a hang names its group (and the traceback's frames its runner's class).
        log(f"# measuring on {group.name} in {args.rounds} interleaved rounds: "
            f"{', '.join(system.name for system, _ in prepared)}")

        def before_block(_i: int) -> None:
            faulthandler.dump_traceback_later(args.hang_s, exit=True)

        timed = interleaved_medians([runner.run for _, runner in prepared], args.iters, args.warmup, args.rounds,
                                    before_block)
        for (system, runner), (ms, host_us) in zip(prepared, timed):
            faulthandler.dump_traceback_later(args.hang_s, exit=True)
            ms, host_us = max_over_ranks(ms), max_over_ranks(host_us)
            wrong = sum_over_ranks(runner.wrong())
            rows.append(row_for(system, group, ms, wrong, host_us))
            log(f"#   {system.name:>17}: {rows[-1]['time_us']:.1f} us (host enqueue {host_us:.1f} us), "
                f"#wrong {wrong}")
            if group.name.startswith("llama") or group.name == "32MiB-P16":  # interference, footprint
                runners[(system.name, group.name)] = (runner, ms)
        faulthandler.cancel_dump_traceback_later()
        del prepared, timed
        torch.cuda.empty_cache()
    print_table(rows)
    for s in skipped:
        log(f"# skipped {s.line}")
    logged_skips = len(skipped)  # the footprint's and interference's deadline skips are logged after them

    # SM footprint per call (over kernel_footprint.FOOTPRINT_CALLS calls) of every system on the Llama group, and RS
    # staging memory.
    footprint = []
    for (name, gname), (runner, _ms) in runners.items():
        if gname.startswith("llama") and not out_of_time(f"footprint {name}/{gname}"):
            faulthandler.dump_traceback_later(args.hang_s, exit=True)  # the profiled call can hang too
            across = name.startswith("tide_rs_M")  # across nodes: how the call's queues overlap
            fp = kernel_footprint(runner.run, timeline=across)
            log(f"# footprint {name:>17}: {footprint_line(fp)}")
            if across:
                for line in format_timeline(fp["timeline"]):
                    log(f"# timeline  {name:>17}: {line}")
            else:
                del fp["timeline"]
            footprint.append({"system": name, **fp})
    faulthandler.cancel_dump_traceback_later()
    staging = []
    if tide_ctx is not None:
        for topo, plans in tide_ctx.plans.items():
            for gname, p in plans.items():
                rs = p["reduce_scatter"]
                staging.append({"topology": list(topo), "group": gname, "tide_staging_bytes": rs["staging_bytes"],
                                "stock_pack_bytes": rs["fsdp2_pack_bytes"],
                                "ratio_to_NS": rs["staging_bytes"] / p["group"]["unsharded_bytes"]})
                log(f"# RS staging M{topo[0]}L{topo[1]} {gname:>18}: TIDE {rs['staging_bytes'] / MiB:8.1f} MiB, "
                    f"stock pack {rs['fsdp2_pack_bytes'] / MiB:8.1f} MiB, TIDE/NS = "
                    f"{rs['staging_bytes'] / p['group']['unsharded_bytes']:.3f}")
        for topo, p in tide_ctx.lane_plans.items():  # the rail-lane rows' plans (App. F)
            rs = p["reduce_scatter"]
            staging.append({"topology": list(topo), "group": "llama3.1-8b-layer", "variant": "rail_lane",
                            "tide_staging_bytes": rs["staging_bytes"], "stock_pack_bytes": rs["fsdp2_pack_bytes"],
                            "ratio_to_NS": rs["staging_bytes"] / p["group"]["unsharded_bytes"]})

    interference, gemm_launch = [], []
    if not args.skip_interference:
        faulthandler.dump_traceback_later(args.hang_s, exit=True)
        alone = gemm_interference(None, 0, args.gemms)
        faulthandler.cancel_dump_traceback_later()
        picks = [("stock_ag", "llama3.1-8b-layer"), ("nccl_ce_ag", "llama3.1-8b-layer"),
                 ("ce_peer_write", "llama3.1-8b-layer"), ("stock_rs", "llama3.1-8b-layer"),
                 ("stock_rs_nccl", "32MiB-P16")]
        picks += [(s.name, "llama3.1-8b-layer") for s in systems if s.name.startswith("tide")]
        for name, gname in picks:
            if (name, gname) not in runners or out_of_time(f"interference {name}/{gname}"):
                continue
            runner, ms = runners[(name, gname)]
            log(f"# interference under {name} on {gname}")
            faulthandler.dump_traceback_later(args.hang_s, exit=True)
            # The GEMM alone right before and right after, for each system: the GPU's clocks drift over
            # the run (a long fp32 reduce-scatter loop heats it), and a single baseline taken at the
            # start would put that drift into slowdowns whose targets are 2 and 5 %.
            before = gemm_interference(None, 0, args.gemms)
            during = gemm_interference(runner.run, ms, args.gemms)
            after = gemm_interference(None, 0, args.gemms)
            faulthandler.cancel_dump_traceback_later()
            # The worst rank's row (its times beside its slowdown), gathered from every rank.
            interference.append(interference_row(name, gname, gather_over_ranks(
                [before["gemm_us"], after["gemm_us"], during["gemm_us"], during["overlapped"]])))
        log(f"# GEMM {GEMM_SHAPE[0]}x{GEMM_SHAPE[1]}x{GEMM_SHAPE[2]} bf16 alone: {alone['gemm_us']:.1f} us")
        faulthandler.dump_traceback_later(args.hang_s, exit=True)
        gemm_launch = gemm_launch_profile()
        faulthandler.cancel_dump_traceback_later()
        for k in gemm_launch:
            log(f"# GEMM kernel {k['name']}: grid {k['grid']}, block {k['block']}, {k['registers_per_thread']} "
                f"registers/thread, {k['shared_memory']} B shared, {k['blocks_per_sm']} blocks/SM, "
                f"{k['sms']} SMs, {k['dur_us']} us")
        log(f"#{'system':>17} {'group':>18} {'gemm(us)':>9} {'slowdown':>9} {'overlapped':>10}")
        for r in interference:
            few = "  (fewer than 20 GEMMs overlapped: no valid median)" if r["overlapped"] < 20 else ""
            log(f" {r['system']:>17} {r['group']:>18} {r['gemm_during_us']:>9.1f} {r['slowdown_pct']:>8.1f}% "
                f"{r['overlapped']:>10}{few}")

    for s in skipped[logged_skips:]:
        log(f"# skipped {s.line}")
    targets = issue4_targets(rows, interference, staging)
    for name, v in targets.items():
        log(f"# target {name:>34}: " + (f"missing ({v['missing']})" if "missing" in v else
                                         f"{v['value']:.3f} against {v['limit']}: {'met' if v['met'] else 'MISSED'}"))
    # Written before tear-down, so that a hang there cannot lose the numbers.
    if args.json and dist.get_rank() == 0:
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": rows, "interference": interference,
                       "skipped": [s.line for s in skipped], "footprint": footprint, "staging": staging,
                       "targets": targets, "gemm_launch": gemm_launch}, f, indent=1)
    faulthandler.dump_traceback_later(args.hang_s, exit=True)  # a hang in tear-down names itself too
    runners.clear()
    for comm in comms.values():
        comm.close()
    if tide_ctx is not None:
        torch.cuda.synchronize()
        tide_ctx.close()
    dist.barrier()
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()
    # A benchmark whose outputs are wrong measured nothing worth keeping: the run fails (every
    # rank alike: the counts are summed over ranks), after its rows and JSON are out.
    failures = failed_checks(rows, tide_failed,
                             [] if args.allow_missing_baselines else missing_baselines(rows, skipped, ranks))
    for f in failures:
        log(f"# FAILED {f}")
    return 1 if failures else 0


def missing_baselines(rows: list[dict], skipped: list[Skip], ranks: int) -> list[str]:
    """The baselines the issue's targets divide by (TARGETS) that have no row on the target group,
    each with its skip reason; one the --deadline-s cut is not counted (the run ran out of time,
    as logged, rather than lacking the baseline). ce_peer_write needs two ranks or more."""
    measured = {r["system"] for r in rows if r["group"] == TARGET_GROUP}
    wanted = sorted({name for _, num, den, source, _, _ in TARGETS if source == "time" for name in (num, den)
                     if not name.startswith("tide") and (ranks > 1 or name != "ce_peer_write")})
    out = []
    for name in wanted:
        if name in measured:
            continue
        reasons = [s for s in skipped if s.what == f"{name}/{TARGET_GROUP}"]
        if any(s.past_deadline for s in reasons):
            continue
        why = reasons[0].why if reasons else "no row"
        out.append(f"baseline {name}/{TARGET_GROUP} not measured: {why} (--allow-missing-baselines accepts it)")
    return out


def failed_checks(rows: list[dict], tide_failed: str, missing: list[str] = ()) -> list[str]:
    """What fails the run: any system's wrong output elements (summed over ranks), TIDE with
    its CUDA fabric that could not start (`tide_failed`, its reason), and the target baselines
    that did not run (`missing`, from missing_baselines): a ratio without its baseline is no result."""
    failures = [f"{r['system']}/{r['group']}: #wrong {r['wrong']}" for r in rows if r["wrong"]]
    if tide_failed:
        failures.append(tide_failed)
    failures.extend(missing)
    return failures


def tide_has_cuda() -> bool:
    """libtide loads and has its CUDA fabric (so TIDE rows are expected)."""
    try:
        from tide.comm import has_cuda

        return has_cuda()
    except Exception:  # no library: the TIDE rows are skipped, as said
        return False


if __name__ == "__main__":
    sys.exit(main())
