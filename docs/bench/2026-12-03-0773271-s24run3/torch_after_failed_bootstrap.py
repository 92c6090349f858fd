import faulthandler, os, sys, time
faulthandler.enable()
sys.path.insert(0, "python")
v = sys.argv[1]
if v == "C":
    import torch
from tide import _capi
from tide.comm import Communicator, unique_id
try:
    Communicator(nodes=1, gpus_per_node=2, rank=0, arena_bytes=1 << 24, fabric="cuda", unique_id=unique_id(), device=0, timeout_s=1)
except _capi.TideError as e:
    print(v, "failed as expected", flush=True)
if v == "B":
    time.sleep(25)
if v == "C":
    c = Communicator(nodes=1, gpus_per_node=1, rank=0, arena_bytes=1 << 24, fabric="cuda", unique_id=unique_id(), device=0, timeout_s=5)
    c.close()
import torch
x = torch.ones(1 << 20, device="cuda:0"); print(v, "torch ok", float(x.sum()), flush=True)
