"""TIDE inside PyTorch FSDP2.

    for block in model.layers:
        fully_shard(block, mp_policy=...)
    fully_shard(model, mp_policy=...)
    tide.fsdp.install(model, mode="in-place")   # or "slot-reuse"
    ...                                          # training loop unchanged
    tide.fsdp.report(model)                      # per group: TIDE or why not
    tide.fsdp.arena_bytes(model)                 # bytes outside torch's allocator
    tide.fsdp.uninstall(model)                   # stock FSDP2 again
    tide.fsdp.release_kept_arenas()              # CUDA: close arenas still viewed at uninstall, on every rank

Parameter groups that meet the contract (Shard(0), one bf16/fp32 dtype, at
most 256 parameters, a shard group of more than one rank, FSDP2 internals as
expected) all-gather with TIDE-AG straight into arena-backed unsharded
parameters and reduce-scatter with TIDE-RS from the gradients where autograd
left them; the others stay stock, each with one logged line naming the reason
(logger "tide.fsdp").
"""

from tide.fsdp.arena_lifetime import release_kept as release_kept_arenas
from tide.fsdp.install import MODES, install, uninstall
from tide.fsdp.report import arena_bytes, report

__all__ = ["MODES", "arena_bytes", "install", "release_kept_arenas", "report", "uninstall"]
