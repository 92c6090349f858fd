#!/usr/bin/env python3
"""GPU correctness of TIDE-AG and TIDE-RS on the CUDA fabric (torchrun, one GPU per rank; with
--ipc, any number of ranks per GPU: gloo for torch.distributed and the CUDA fabric over CUDA IPC
ranks, fabric="cuda-ipc", rank r on GPU r mod count; with --host-per-rank, any number of ranks per GPU
too, each on a host of its own as NCCL and TIDE see it: the CUDA fabric over NCCL, M = ranks nodes of one
GPU each, whose rails cross the "hosts" through NCCL's network transport).

For every topology the GPUs allow (M=1 x L=N, and N virtual nodes of one GPU):
  - all-gather: every landing byte equals the owner's shard (landing poisoned first);
  - reduce-scatter: within 1e-5 * max(1, |ref|_inf) of a float64 sum; integer-valued inputs
    exactly; NaN/Inf inputs give the expected classes; alpha and accumulate;
  - the GPU's bits equal the host fabric's for the same inputs and plan;
  - repeated calls give identical bits (on one node the second call runs in place: the shard
    written into the own landing rows, no shard pointer; the third replays the first's copy
    lists as cached graphs, which the fabric's counts must show).
Exits non-zero on any failure.
"""
from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile

import numpy as np
import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
from host_reference import HostReference  # noqa: E402

from tide.bench.calibration import H200_PAIR  # noqa: E402
from tide.bench.topologies import as_own_host, node_splits, parse_topologies  # noqa: E402

SHAPES = [[256, 256], [128, 256], [688, 256], [256, 688], [256], [37, 5], [3], [64, 2, 3], [1, 7]]


class _DeviceBytes:
    """Lets torch wrap arena memory that libtide owns (no copy)."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": None}


def wrap_device_bytes(ptr: int, nbytes: int, device) -> torch.Tensor:
    return torch.as_tensor(_DeviceBytes(ptr, nbytes), device=device)


def bf16_bits(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


def make_grads(kind: str, rank: int, seed: int, device) -> list[torch.Tensor]:
    g = torch.Generator(device=device).manual_seed(seed * 100 + rank)
    out = []
    for s in SHAPES:
        n = int(np.prod(s))
        if kind == "integer":
            x = torch.randint(-8, 9, (n,), generator=g, device=device).float()
        else:
            x = torch.randn(n, generator=g, device=device)
            if kind == "nonfinite":
                m = torch.rand(n, generator=g, device=device)
                x[m < 0.02] = float("nan")
                x[(m >= 0.02) & (m < 0.04)] = float("inf")
                x[(m >= 0.04) & (m < 0.06)] = -float("inf")
        out.append(x.to(torch.bfloat16))
    return out


# Plans the checks run with. Passes, CTA budgets and pipelining never change a
# bit (the host fabric's reference below uses the default plan for all), so
# each variant is held to the same references. "pipelined" is what the
# benchmark driver runs: four passes, the solver's budgets for this host.
PLAN_VARIANTS = [
    ("default", {}),
    ("pipelined", H200_PAIR),
    ("tight", {"passes": 2, "sum_ctas": 1, "landing_ctas": 1}),
    # App. F's rail lane: the same bits as the staged path where it applies (L = 1
    # across nodes); elsewhere the plan ignores it. Over NCCL host RMA, whose puts
    # read only from the arena, the reduce-scatter puts rows packed into the arena.
    ("rail-lane", {**H200_PAIR, "rail_lane": True}),
]


def gather_np(arr: np.ndarray) -> list[np.ndarray]:
    objs = [None] * dist.get_world_size()
    dist.all_gather_object(objs, arr)
    return objs


# The output poison: a NaN whose payload no sum produces (src/bench/reference.hpp's kOutputPoisonBits).
OUTPUT_POISON_BITS = 0x7FC0DEAD


def poisoned_output(elems: int, device) -> torch.Tensor:
    return torch.full((elems,), OUTPUT_POISON_BITS, dtype=torch.int32, device=device).view(torch.float32)


def bits_differing(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """Elements whose bits differ, and how many of those are NaN on both sides: every fabric
    writes a NaN result as the canonical 0x7FFFFFFF (include/tide/fabric.hpp), so a NaN payload
    that differs is a difference too."""
    differ = a.view(np.uint32) != b.view(np.uint32)
    return int(np.count_nonzero(differ)), int(np.count_nonzero(differ & np.isnan(a) & np.isnan(b)))


def main() -> int:
    import argparse

    from tide._capi import TideError
    from tide.comm import Communicator, unique_id

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--multi-node-only", action="store_true",
                        help="only the topologies with M > 1 (e.g. with TIDE_FABRIC_RAILS=send-recv, the rails)")
    parser.add_argument("--topologies", metavar="MxL,...",
                        help="only these virtual topologies (default: every split of the ranks), so that a machine's "
                             "topologies can be spread over several runs")
    parser.add_argument("--ipc", action="store_true",
                        help="ranks may share GPUs: gloo, and the CUDA fabric over CUDA IPC (no NCCL)")
    parser.add_argument("--host-per-rank", action="store_true",
                        help="every rank a host of its own (NCCL_HOSTID per rank, before NCCL starts): ranks may "
                             "share GPUs, gloo for torch.distributed, and only M = ranks, L = 1, whose rails go "
                             "between 'hosts' as across real ones (NCCL send/recv over its network transport: sockets "
                             "over loopback unless NCCL_SOCKET_IFNAME and NCCL_IB_DISABLE say otherwise)")
    args = parser.parse_args()
    if args.ipc and args.host_per_rank:
        parser.error("--ipc and --host-per-rank exclude each other")
    # No NVLink multicast on these machines: torch's NCCL communicator is made below, before TIDE's
    # own refusal could act, so a setting that would allow multicast ends the run here.
    # (Exported by whoever starts the process: TIDE's CUDA fabric refuses a 0 set during it.)
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":
        sys.exit(f"refusing to run: NCCL_NVLS_ENABLE is {os.environ.get('NCCL_NVLS_ENABLE', 'unset')}; export "
                 "NCCL_NVLS_ENABLE=0 before starting (no NVLink multicast)")

    local = int(os.environ.get("LOCAL_RANK", "0"))
    if args.host_per_rank:
        as_own_host(f"tide-check-rank-{local}")
    if args.ipc or args.host_per_rank:
        local %= torch.cuda.device_count()
        torch.cuda.set_device(local)
        dist.init_process_group("gloo")
    else:
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    rank, n = dist.get_rank(), dist.get_world_size()
    dev = torch.device("cuda", local)
    # One fresh seed per run for every input below, rank 0's (TIDE_TEST_SEED replays a run).
    seed = [(int(os.environ["TIDE_TEST_SEED"]) if os.environ.get("TIDE_TEST_SEED")
             else random.SystemRandom().randrange(2**31)) if rank == 0 else None]
    dist.broadcast_object_list(seed)
    seed = int(seed[0])
    if rank == 0:
        print(f"check_collectives: seed {seed} (replay with TIDE_TEST_SEED={seed})", flush=True)
    torch.cuda.set_stream(torch.cuda.Stream())
    stream = torch.cuda.current_stream().cuda_stream
    failures = []
    # Across nodes both Level 2 landing directions, each on its own communicator (one
    # direction per communicator), both held to the host fabric's pull-landing bits.
    try:
        topologies = parse_topologies(args.topologies, n) if args.topologies else node_splits(n)
    except ValueError as e:
        parser.error(f"--topologies: {e}")
    runs = [(m, l, d) for m, l in topologies for d in (("pull", "push") if m > 1 else ("pull",))
            if (m > 1 or not args.multi_node_only) and (l == 1 or not args.host_per_rank)]
    if not runs:  # a run of nothing must not read as a pass
        parser.error(f"--topologies {args.topologies} leaves no topology to check with --multi-node-only / "
                     "--host-per-rank (those need M > 1 / L = 1)")
    # Rank 0's host-fabric reference of the current topology (both directions are held to the pull
    # landing's bits); one topology's rank processes at a time (each holds a 256 MiB shared segment:
    # eight GPUs' four topologies would keep 8 GiB of /dev/shm), and runs of a topology come together.
    host_reference: HostReference | None = None
    for nodes, gpus, direction in runs:
        tag = f"M{nodes}L{gpus}" + ("/push" if direction == "push" else "")
        if args.ipc:  # a fresh store directory per communicator, rank 0's
            store = [tempfile.mkdtemp(prefix="tide_ipc_") if rank == 0 else None]
            dist.broadcast_object_list(store)
            comm = Communicator(nodes=nodes, gpus_per_node=gpus, rank=rank, arena_bytes=256 << 20,
                                fabric="cuda-ipc", store_dir=store[0], device=local, timeout_s=30)
        else:
            uid = [unique_id() if rank == 0 else None]
            dist.broadcast_object_list(uid)
            comm = Communicator(nodes=nodes, gpus_per_node=gpus, rank=rank, arena_bytes=256 << 20, fabric="cuda",
                                unique_id=uid[0], device=local, timeout_s=30)
            if args.host_per_rank and not comm.rails.startswith("nccl-"):
                failures.append(f"{tag}: rails {comm.rails!r} between ranks on hosts of their own (wanted NCCL's)")
        variants = PLAN_VARIANTS
        groups = {vname: comm.register_group(SHAPES, landing=direction, **opts) for vname, opts in variants}
        plan = groups["default"].plan["group"]
        off, ptr = comm.alloc(plan["unsharded_bytes"])
        landing = wrap_device_bytes(ptr, plan["unsharded_bytes"], dev)
        cases = [("default", "normal", 1.0 / n, False), ("default", "integer", 1.0, False),
                 ("default", "nonfinite", 0.5, False), ("default", "normal", 0.25, True)]
        cases += [(vname, "normal", 1.0 / n, False) for vname, _ in variants[1:]]
        cases += [(vname, "integer", 1.0, False) for vname, _ in variants[1:]]
        for case, (vname, kind, alpha, accumulate) in enumerate(cases):
            group = groups[vname]
            name = f"{tag}/{vname}/{kind}/alpha={alpha}/acc={accumulate}"
            g = torch.Generator(device=dev).manual_seed(seed * 1000 + 7000 + 31 * case + rank)
            shard = torch.randint(0, 256, (plan["shard_bytes"],), generator=g, device=dev, dtype=torch.uint8)
            grads = make_grads(kind, rank, seed * 1000 + case, dev)
            out0 = torch.randn(plan["out_bytes"] // 4, generator=g, device=dev) if accumulate else \
                poisoned_output(plan["out_bytes"] // 4, dev)
            results = []
            for repeat in range(3):
                landing.fill_(0xA5)
                out = out0.clone()
                if nodes == 1 and repeat == 1:
                    # In place: the shard written into this rank's own landing rows first, no
                    # shard pointer (as the FSDP2 adapter's cast does); the bits must not change.
                    for p in plan["param_layout"]:
                        at, sb = p["shard_offset"] * n + rank * p["shard_bytes"], p["shard_bytes"]
                        landing[at:at + sb].copy_(shard[p["shard_offset"]:p["shard_offset"] + sb])
                    comm.all_gather(group, 0, off, stream=stream)
                else:
                    comm.all_gather(group, shard.data_ptr(), off, stream=stream)
                comm.reduce_scatter(group, [x.data_ptr() for x in grads], out.data_ptr(), alpha=alpha,
                                    accumulate=accumulate, stream=stream)
                torch.cuda.synchronize()
                results.append((landing.cpu().numpy().copy(), out.cpu().numpy().copy()))
            if not all(np.array_equal(results[0][0], r[0]) and bits_differing(results[0][1], r[1])[0] == 0 for r in results[1:]):
                failures.append(f"{name}: repeated calls differ")
            land, y = results[0]
            # All-gather: byte-exact against every rank's shard.
            shards = gather_np(shard.cpu().numpy())
            for p in group.plan["group"]["param_layout"]:
                for r in range(n):
                    at = p["shard_offset"] * n + r * p["shard_bytes"]
                    want = shards[r][p["shard_offset"]:p["shard_offset"] + p["shard_bytes"]]
                    if not np.array_equal(land[at:at + p["shard_bytes"]], want):
                        failures.append(f"{name}: AG param at {p['shard_offset']} from rank {r} wrong")
            # Reduce-scatter: float64 reference.
            all_grads = gather_np(np.concatenate([bf16_bits(x) for x in grads]))
            init = out0.cpu().numpy()
            ref = np.zeros_like(init, dtype=np.float64)
            at = 0
            for p, s in zip(group.plan["group"]["param_layout"], SHAPES):
                numel = int(np.prod(s))
                k = p["shard_rows"] * p["row_elems"]
                lo, hi = rank * k, min((rank + 1) * k, numel)
                if hi > lo:
                    tot = sum((all_grads[u][at + lo:at + hi].astype(np.uint32) << 16).view(np.float32).astype(np.float64)
                              for u in range(n))
                    ref[p["out_offset"]:p["out_offset"] + hi - lo] = tot
                at += numel
            ref = alpha * ref + (init.astype(np.float64) if accumulate else 0.0)
            finite = np.isfinite(ref)
            scale = max(1.0, float(np.max(np.abs(ref[finite]))) if finite.any() else 1.0)
            yd = y.astype(np.float64)
            if kind == "integer":
                ok = np.array_equal(yd, ref)
            else:
                ok = bool(np.all(np.abs(yd[finite] - ref[finite]) <= 1e-5 * scale))
                ok &= bool(np.all(np.isnan(yd[np.isnan(ref)])))
                inf = np.isinf(ref)
                ok &= bool(np.all(yd[inf] == ref[inf]))
            if not ok:
                failures.append(f"{name}: RS differs from the float64 reference")
            unwritten = int(np.count_nonzero(y.view(np.uint32) == OUTPUT_POISON_BITS))
            if unwritten:  # caught even where the reference is NaN
                failures.append(f"{name}: RS left {unwritten} output elements unwritten (the poison)")
            # Bit for bit against the host fabric on the same inputs (rank 0 runs it).
            grads_np = [np.split(all_grads[u], np.cumsum([int(np.prod(s)) for s in SHAPES])[:-1]) for u in range(n)]
            outs = gather_np(y)
            lands = gather_np(land)
            inits = gather_np(init)
            if rank == 0:
                if host_reference is None or host_reference.topology != (nodes, gpus):
                    if host_reference is not None:
                        host_reference.close()
                    host_reference = HostReference(nodes, gpus, SHAPES)
                h_land, h_out = host_reference.run(shards, grads_np, alpha, inits, accumulate)
                for r in range(n):
                    if not np.array_equal(h_land[r], lands[r]):
                        failures.append(f"{name}: rank {r} landing differs from the host fabric")
                    bad, nan_payloads = bits_differing(h_out[r], outs[r])
                    if bad:
                        failures.append(f"{name}: rank {r} RS output differs from the host fabric in {bad} elements "
                                        f"({nan_payloads} of them NaN on both sides, payloads differing)")
            print(f"[rank {rank}] {name}: checked", flush=True)
        # tideCommSynchronize waits for every call's stream, not only the last call's (it polled the
        # last-bound stream alone). Rank 0's all-gather on stream `held` ends with a wait for its
        # peers' writes into its landing, which the other ranks hold back (a sleeping kernel before
        # their all-gather); then a call on another stream (tideCommWaitInputsRead) binds that one.
        # Once rank 0's synchronize returns, its landing must be whole, read on a third stream that
        # waits for neither. (One rank alone has no peer to hold back: nothing to see there.)
        group = groups["default"]
        shards = gather_np(shard.cpu().numpy())
        comm.reduce_scatter(group, [x.data_ptr() for x in grads], out.data_ptr(), alpha=1.0 / n, stream=stream)
        comm.synchronize()
        landing.fill_(0xA5)
        torch.cuda.synchronize()
        dist.barrier()
        held, other = torch.cuda.Stream(), torch.cuda.Stream()
        if rank != 0:
            with torch.cuda.stream(held):
                torch.cuda._sleep(1_000_000_000)  # about 0.6 s at the H100's and H200's clocks
        comm.all_gather(group, shard.data_ptr(), off, stream=held.cuda_stream)
        comm.wait_inputs_read(stream=other.cuda_stream)  # the reduce-scatter's read-done point, long passed
        comm.synchronize()
        land = landing.cpu().numpy()  # on the current stream, which waits for neither
        stale = sum(not np.array_equal(land[p["shard_offset"] * n + r * p["shard_bytes"]:
                                            p["shard_offset"] * n + (r + 1) * p["shard_bytes"]],
                                       shards[r][p["shard_offset"]:p["shard_offset"] + p["shard_bytes"]])
                    for p in group.plan["group"]["param_layout"] for r in range(n))
        if stale:
            failures.append(f"{tag}: synchronize returned before an earlier call's stream ran ({stale} landing rows "
                            f"unwritten)")
        elif rank == 0 and n > 1:
            print(f"[rank {rank}] {tag}: synchronize waited for an earlier call's stream", flush=True)
        torch.cuda.synchronize()
        # Every case calls three times with the same addresses, so from the second sighting on a
        # queue's copy list goes out as a cached graph: the checks above covered both ways.
        stats = comm.stats
        print(f"[rank {rank}] {tag}: {stats['copy_descriptors']} copies, {stats['copy_graph_launches']} lists as "
              f"cached-graph launches ({stats['copy_graphs_built']} graphs)", flush=True)
        graphs_on = os.environ.get("TIDE_COPY_GRAPHS", "1") != "0"
        if graphs_on and stats["copy_descriptors"] > 0 and stats["copy_graph_launches"] == 0:
            failures.append(f"{tag}: no copy list went out as a cached graph")
        if not graphs_on and stats["copy_graph_launches"] + stats["copy_graphs_built"] > 0:
            failures.append(f"{tag}: copy graphs used with TIDE_COPY_GRAPHS=0")
        comm.close()
        if args.ipc:
            dist.barrier()  # every rank has closed its communicator and the store
            if rank == 0:
                shutil.rmtree(store[0], ignore_errors=True)
    if host_reference is not None:
        host_reference.close()
    if args.host_per_rank and n > 1:
        # One node over ranks that NCCL puts on hosts of their own: refused when the communicator is
        # made, on every rank of that node, naming the unreachable peer (before: at the first call).
        uid = [unique_id() if rank == 0 else None]
        dist.broadcast_object_list(uid)
        try:
            Communicator(nodes=1, gpus_per_node=n, rank=rank, arena_bytes=1 << 20, fabric="cuda",
                         unique_id=uid[0], device=local, timeout_s=30).close()
            failures.append(f"M1L{n} across hosts: accepted")
        except TideError as e:
            if "not load/store reachable" not in str(e) or "on one node" not in str(e):
                failures.append(f"M1L{n} across hosts: refused with another message: {e}")
            else:
                print(f"[rank {rank}] M1L{n} across hosts refused: {e}", flush=True)
    all_failures = [None] * n
    dist.all_gather_object(all_failures, failures)
    dist.destroy_process_group()
    if rank == 0:
        flat = [f for fs in all_failures for f in fs]
        for f in flat:
            print("FAIL", f)
        if flat:
            print(f"check_collectives: seed {seed} (replay with TIDE_TEST_SEED={seed})")
        gpus = torch.cuda.device_count() if args.ipc or args.host_per_rank else n
        print(f"check_collectives: {'FAILED' if flat else 'all checks passed'} ({n} rank(s) on {min(n, gpus)} GPU(s))")
        return 1 if flat else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
