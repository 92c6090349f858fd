"""Session 31 run 6's diagnosis, kept with its log (run it at 1d9de3a, from the repo root):
    TIDE_LIBRARY=$PWD/build/gpu/libtide.so PYTHONPATH=python python3 -m torch.distributed.run --standalone \
        --nproc_per_node=2 docs/bench/2026-12-04-1d9de3a-s31run6/reshard_in_backward.py
The two scenarios whose gradients were wrong on CUDA in run 5, on two IPC ranks, as they are, without
the prefetch inversion, with a device sync around the reshard in backward, and with a device sync after
every TIDE all-gather."""
import functools, os, sys, tempfile
sys.path[:0] = ["tests/python", "python"]
import torch, torch.distributed as dist
import tide.fsdp
from tide.fsdp import all_gather as ag, backend as be
import fsdp_harness, fsdp_scenarios as S

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
device = torch.device("cuda", int(os.environ["LOCAL_RANK"]) % torch.cuda.device_count())
torch.cuda.set_device(device)
dist.init_process_group("gloo")
orig_install = tide.fsdp.install
orig_reshard = ag._reshard_waiting_for_post_backward
orig_cuda_ag = be.CudaBackend.all_gather
print("backends:", [n for n in dir(be) if "Backend" in n], flush=True)

def synced_reshard(tg, other):
    torch.cuda.synchronize(); orig_reshard(tg, other); torch.cuda.synchronize()

def variant(name, invert=True, sync_reshard=False, sync_ag=False):
    tide.fsdp.install = functools.partial(orig_install, fabric="cuda-ipc", invert_prefetch=invert)
    ag._reshard_waiting_for_post_backward = synced_reshard if sync_reshard else orig_reshard
    def wrapped(self, *a, **k):
        r = orig_cuda_ag(self, *a, **k)
        if sync_ag: torch.cuda.synchronize()
        return r
    be.CudaBackend.all_gather = wrapped
    for scen in ("block_called_again_on_an_input_without_grad", "two_forwards_one_backward"):
        tmp = [tempfile.mkdtemp() if rank == 0 else None]; dist.broadcast_object_list(tmp, src=0)
        ctx = fsdp_harness.Context(rank, world, tmp[0], fsdp_harness.capture_logs(), device=str(device))
        def report(n, ok, tb, s):
            last = [l for l in tb.splitlines() if l.strip()][-6:] if not ok else []
            print(f"[rank {rank}] {name}: {n}: {'PASS' if ok else 'FAIL ' + ' | '.join(last)}", flush=True)
        fsdp_harness.run_scenarios(S, [scen], ctx, report)

variant("default")
variant("no-inversion", invert=False)
variant("sync-reshard", sync_reshard=True)
variant("sync-ag", sync_ag=True)
variant("sync-both-no-inv", invert=False, sync_reshard=True, sync_ag=True)
dist.destroy_process_group()
