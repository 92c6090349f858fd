"""Where TIDE's device memory outside torch's allocator goes, step by step.

The end-to-end run measures TIDE's memory outside the caching allocator as
arena + ~0.45 GiB. This probe creates one communicator the way the FSDP2
adapter does (M1L<world>, an arena of --arena-mib), registers a Llama-like
layer group, runs one all-gather and one reduce-scatter, and prints the
device memory in use (cudaMemGetInfo) after each step, so the extra can be
pinned on a step. Run with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=ALLOC to see
NCCL's own allocations.

  python -m torch.distributed.run --standalone --nproc_per_node=2 tools/probe_comm_memory.py
"""

from __future__ import annotations

import argparse
import os
import sys

import torch
import torch.distributed as dist

from tide.comm import Communicator, unique_id

MiB = 1 << 20


def used(device: torch.device) -> int:
    free, total = torch.cuda.mem_get_info(device)
    return total - free


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arena-mib", type=int, default=800)
    args = p.parse_args()
    if os.environ.get("NCCL_NVLS_ENABLE") != "0":  # TIDE refuses a 0 set during the process
        sys.exit("probe_comm_memory: export NCCL_NVLS_ENABLE=0 before starting (no NVLink multicast)")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", rank)))
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    x = torch.ones(1 << 20, device=device)
    dist.all_reduce(x)  # torch's own NCCL communicator is set up before the baseline
    torch.cuda.synchronize()
    rows: list[tuple[str, int]] = [("baseline (torch + its NCCL)", used(device))]

    uid = [unique_id() if rank == 0 else None]
    dist.broadcast_object_list(uid, src=0)
    comm = Communicator(nodes=1, gpus_per_node=world, rank=rank, arena_bytes=args.arena_mib * MiB,
                             unique_id=uid[0], device=device.index, timeout_s=60)
    torch.cuda.synchronize()
    rows.append((f"communicator, arena {args.arena_mib} MiB (reserved {comm.reserved_bytes() // MiB} MiB)",
                 used(device)))

    shapes = [[2048, 2048], [1024, 2048], [1024, 2048], [2048, 2048], [8192, 2048], [8192, 2048], [2048, 8192],
              [2048], [2048]]
    group = comm.register_group([{"shape": s, "dtype": "bf16"} for s in shapes], grad_dtype="bf16")
    plan = group.plan["group"]
    landing_off, _ = comm.alloc(plan["unsharded_bytes"])
    rows.append(("group registered", used(device)))

    shard = torch.randn(plan["shard_bytes"] // 2, dtype=torch.bfloat16, device=device)
    stream = torch.cuda.current_stream(device).cuda_stream
    comm.all_gather(group, shard.data_ptr(), landing_off, stream)
    torch.cuda.synchronize()
    rows.append(("after one all-gather", used(device)))

    grads = [torch.randn(s, dtype=torch.bfloat16, device=device) for s in shapes]
    out = torch.empty(plan["out_bytes"] // 4, dtype=torch.float32, device=device)
    comm.reduce_scatter(group, [g.data_ptr() for g in grads], out.data_ptr(), stream=stream)
    torch.cuda.synchronize()
    rows.append(("after one reduce-scatter", used(device)))
    del grads, out, shard
    torch.cuda.empty_cache()
    rows.append(("torch tensors freed", used(device)))

    comm.close()
    torch.cuda.synchronize()
    rows.append(("communicator closed", used(device)))
    if rank == 0:
        base = rows[0][1]
        for name, u in rows:
            print(f"[probe] {name:<60} used {u / MiB:9.1f} MiB  (+{(u - base) / MiB:8.1f} MiB)", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
