"""The benchmark's MoE block (tide.bench.models.MoE) against a dense float64 reference: every
token's output is the routing-weighted sum of its top-k experts' SwiGLU, whatever the expert path
(grouped GEMMs where this torch runs them on the CPU, the loop over experts always), including
experts that get no token and routing that piles tokens onto a few experts."""

import random

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from tide.bench import models  # noqa: E402


def _reference(moe: "models.MoE", x: torch.Tensor) -> torch.Tensor:
    x64 = x.double().reshape(-1, x.shape[-1])
    probs = (x64 @ moe.router.weight.double().t()).softmax(dim=-1)
    weights, chosen = probs.topk(moe.top_k, dim=-1)
    if moe.norm_topk_prob:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    w1, w2 = moe.gate_up_proj.double(), moe.down_proj.double()
    out = torch.zeros_like(x64)
    for t in range(x64.shape[0]):
        for j in range(moe.top_k):
            e = int(chosen[t, j])
            gate, up = (w1[e] @ x64[t]).chunk(2)
            out[t] += weights[t, j] * (w2[e] @ (F.silu(gate) * up))
    return out.view(x.shape)


def _grouped_mm_refusal() -> str | None:
    """Why this torch cannot run torch._grouped_mm on the CPU (None if it can), probed on torch
    itself, not through the code under test: a regression in MoE's grouped path must fail, not
    drop its cases (CPU support depends on the torch build)."""
    if not models.grouped_mm_available():
        return "this torch has no torch._grouped_mm"
    try:
        torch._grouped_mm(torch.randn(32, 16), torch.randn(2, 16, 8), offs=torch.tensor([16, 32], dtype=torch.int32))
    except (RuntimeError, NotImplementedError) as e:
        return f"torch._grouped_mm does not run on the CPU here: {e}"
    return None


@pytest.mark.parametrize("impl", ["loop", "grouped"])
@pytest.mark.parametrize("skewed", [False, True])
def test_moe_matches_a_dense_reference(impl, skewed):
    if impl == "grouped" and (why := _grouped_mm_refusal()) is not None:
        pytest.skip(why)
    seed = random.randrange(1 << 30)
    torch.manual_seed(seed)
    cfg = models.tiny_config("moe").replace(expert_impl=impl)
    moe = models.MoE(cfg)
    for p in moe.parameters():
        torch.nn.init.normal_(p, std=0.2)
    if skewed:  # most tokens prefer the same two experts; the rest get few or none
        with torch.no_grad():
            moe.router.weight[:2] += 3.0 * moe.router.weight[:2].sign()
    x = torch.randn(3, 5, cfg.hidden)
    got = moe(x)
    want = _reference(moe, x)
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-5, msg=lambda m: f"seed {seed}: {m}")
