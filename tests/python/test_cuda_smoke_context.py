"""The CUDA smoke (fsdp_cuda_smoke.py) runs its fixed configurations through the kit's make_pair and
batches with a context of its own (Ctx), on GPUs only. What the kit reads from a context must be
there, or every configuration fails on the device (session 45: the kit began to read the run's
seed, and the smoke's Ctx had none). Here on CPU: the smoke's Ctx through make_pair (one gloo rank)
and batches, as its run() calls them."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_the_smokes_context_serves_the_kit(tmp_path):
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    import fsdp_cuda_smoke
    import fsdp_scenarios as S

    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        ctx = fsdp_cuda_smoke.Ctx(0, 1, torch.device("cpu"), seed=12345)
        other = fsdp_cuda_smoke.Ctx(0, 1, torch.device("cpu"), seed=54321)
        mesh = init_device_mesh("cpu", (1,))
        ms, mt = S.make_pair(S.transformer, ctx, mesh)
        for a, b in zip(ms.parameters(), mt.parameters(), strict=True):
            assert torch.equal(S.local(a), S.local(b))  # one seed, the same weights
        xs = S.batches(ctx, 2, d_in=ms.inp.in_features)
        assert len(xs) == 2 and not torch.equal(xs[0], xs[1])
        # The run's seed is what the data comes from.
        assert torch.equal(xs[0], S.batches(ctx, 1, d_in=ms.inp.in_features)[0])
        assert not torch.equal(xs[0], S.batches(other, 1, d_in=ms.inp.in_features)[0])
    finally:
        dist.destroy_process_group()
