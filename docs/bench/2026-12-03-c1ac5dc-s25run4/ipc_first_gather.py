# Session 25 runs 3 and 4 (scratch, kept for the record): one CUDA IPC rank of two;
# one group, one all-gather. `python3 ipc_first_gather.py RANK STORE_DIR` for each rank.
import faulthandler, sys
faulthandler.enable()
import torch
from tide.comm import Communicator
rank, store = int(sys.argv[1]), sys.argv[2]
torch.cuda.set_device(0)
with Communicator(nodes=1, gpus_per_node=2, rank=rank, arena_bytes=1 << 22, fabric="cuda-ipc",
                  store_dir=store, device=0, timeout_s=10) as comm:
    g = comm.register_group([[37, 5], [3]])
    off, _ = comm.alloc(g.plan["group"]["unsharded_bytes"])
    shard = torch.zeros(g.plan["group"]["shard_bytes"], dtype=torch.uint8, device="cuda")
    comm.all_gather(g, shard.data_ptr(), off)
    comm.synchronize()
print(rank, "done", flush=True)
