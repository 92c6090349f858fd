"""The two decoder-only models of the end-to-end FSDP2 benchmark, in plain torch.nn.

The team's shared/ANCHORS.md (outside this repo) measures stock FSDP2 on a
"Llama-like, 1.14 B (16 layers, hidden 2048)" and a
"Qwen3-MoE-like, 1.00 B (12 layers, 64 experts, top-8)" model built with transformers at random
init. It names only those numbers; the other sizes here are the natural completions that give
the same parameter counts:

  llama  LlamaConfig-style: hidden 2048, 16 layers, 16 query heads of 128 with 8 KV heads (GQA),
         SwiGLU MLP 8192, vocabulary 32000, untied input/output embeddings, RMSNorm, RoPE:
         1,137,772,544 parameters (1.14 B).
  moe    Qwen3MoeConfig defaults (32 query heads of 128, 4 KV heads, per-head q/k RMSNorm,
         vocabulary 151936, untied, top-8 softmax routing) with hidden 768, 12 layers,
         64 experts of SwiGLU width 384: 998,397,696 parameters (1.00 B; 0.40 B active per
         token). Experts are fused 3-D tensors (gate_up (E, 2I, H), down (E, H, I)), as current
         transformers stores them, so FSDP2 shards them on the expert dimension.

`tiny_config(kind)` gives the same architecture small enough for CPU tests. The forward returns
logits; the loss is the caller's. Each decoder layer is one `TransformerBlock` in `.layers`, the
unit the benchmark passes to `fully_shard`.

The MoE experts run as grouped GEMMs (`torch._grouped_mm`, what torchtitan uses) where the
running torch has it, else as a loop over experts; `MoEConfig.expert_impl` picks one explicitly.
Token groups are padded to multiples of 16 rows so every group starts 16-byte aligned (the
grouped GEMM's weight gradient reduces over that dimension). The grouped path routes without a
host sync, as torchtitan's does (counts from the sorted expert ids, a static buffer bound).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

GROUP_ALIGN = 16  # rows per expert group are padded to this


@dataclass
class ModelConfig:
    kind: str = "llama"            # "llama" or "moe"
    vocab: int = 32000
    hidden: int = 2048
    layers: int = 16
    heads: int = 16
    kv_heads: int = 8
    head_dim: int = 128
    intermediate: int = 8192       # dense SwiGLU width (llama)
    experts: int = 0               # moe: routed experts per layer
    top_k: int = 0                 # moe: experts per token
    moe_intermediate: int = 0      # moe: SwiGLU width of one expert
    norm_topk_prob: bool = True    # moe: renormalize the top-k routing weights
    qk_norm: bool = False          # RMSNorm over each head's q and k (Qwen3)
    tie_embeddings: bool = False
    rope_theta: float = 500000.0
    norm_eps: float = 1e-5
    init_std: float = 0.02
    expert_impl: str = "auto"      # "auto", "grouped" (torch._grouped_mm) or "loop"

    def replace(self, **changes) -> ModelConfig:
        return dataclasses.replace(self, **changes)


LLAMA_1B = ModelConfig(kind="llama", vocab=32000, hidden=2048, layers=16, heads=16, kv_heads=8, head_dim=128,
                       intermediate=8192, rope_theta=500000.0, norm_eps=1e-5)
MOE_1B = ModelConfig(kind="moe", vocab=151936, hidden=768, layers=12, heads=32, kv_heads=4, head_dim=128,
                     intermediate=0, experts=64, top_k=8, moe_intermediate=384, qk_norm=True,
                     rope_theta=1000000.0, norm_eps=1e-6)

CONFIGS = {"llama": LLAMA_1B, "moe": MOE_1B}


def config(kind: str) -> ModelConfig:
    if kind not in CONFIGS:
        raise ValueError(f"unknown model {kind!r} (one of {sorted(CONFIGS)})")
    return CONFIGS[kind]


def tiny_config(kind: str) -> ModelConfig:
    """The same architecture at CPU-test size (a few ms per step)."""
    small = {"vocab": 256, "hidden": 64, "layers": 2, "heads": 4, "kv_heads": 2, "head_dim": 16}
    if kind == "llama":
        return LLAMA_1B.replace(intermediate=96, **small)
    return MOE_1B.replace(experts=8, top_k=2, moe_intermediate=32, **small)


def parse_overrides(cfg: ModelConfig, items: list[str]) -> ModelConfig:
    """Apply 'field=value' strings (e.g. layers=8, hidden=1024) to a config."""
    fields = {f.name: f for f in dataclasses.fields(ModelConfig)}
    changes = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or key not in fields or key == "kind":
            raise ValueError(f"bad override {item!r}: expected FIELD=VALUE with FIELD one of "
                             f"{sorted(k for k in fields if k != 'kind')}")
        current = getattr(cfg, key)
        if isinstance(current, bool):
            changes[key] = value.lower() in ("1", "true", "yes", "on")
        else:
            changes[key] = type(current)(value)
    return cfg.replace(**changes)


# ------------------------------------------------------------------ building blocks

class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def rope_tables(seq_len: int, head_dim: int, theta: float, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (seq_len, head_dim), computed in fp32 (rotate-half convention)."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    freqs = torch.outer(torch.arange(seq_len, device=device, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    return x * cos + _rotate_half(x) * sin


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.heads, cfg.kv_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)
        self.q_norm = RMSNorm(cfg.head_dim, cfg.norm_eps) if cfg.qk_norm else None
        self.k_norm = RMSNorm(cfg.head_dim, cfg.norm_eps) if cfg.qk_norm else None

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.head_dim)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.head_dim)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.head_dim)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        cos, sin = cos.to(q.dtype), sin.to(q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        if self.kv_heads != self.heads:
            # Expanded explicitly (a few MiB) so every SDPA backend applies, on every torch.
            rep = self.heads // self.kv_heads
            k = k[:, :, None].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(b, self.heads, s, self.head_dim)
            v = v[:, :, None].expand(b, self.kv_heads, rep, s, self.head_dim).reshape(b, self.heads, s, self.head_dim)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.o_proj(out.transpose(1, 2).reshape(b, s, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def grouped_mm_available() -> bool:
    return hasattr(torch, "_grouped_mm")


class MoE(nn.Module):
    """Top-k softmax routing over fused experts (Qwen3-MoE), no shared expert, no aux loss."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.experts, self.top_k, self.norm_topk_prob = cfg.experts, cfg.top_k, cfg.norm_topk_prob
        self.router = nn.Linear(cfg.hidden, cfg.experts, bias=False)
        self.gate_up_proj = nn.Parameter(torch.empty(cfg.experts, 2 * cfg.moe_intermediate, cfg.hidden))
        self.down_proj = nn.Parameter(torch.empty(cfg.experts, cfg.hidden, cfg.moe_intermediate))
        impl = cfg.expert_impl
        if impl == "auto":
            impl = "grouped" if grouped_mm_available() else "loop"
        if impl not in ("grouped", "loop"):
            raise ValueError(f"expert_impl must be auto, grouped or loop, got {cfg.expert_impl!r}")
        self.impl = impl

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x = x.reshape(-1, shape[-1])
        t, h, k, e = x.shape[0], x.shape[1], self.top_k, self.experts
        probs = self.router(x).float().softmax(dim=-1)
        weights, chosen = probs.topk(k, dim=-1)                     # (t, k)
        if self.norm_topk_prob:
            weights = weights / weights.sum(dim=-1, keepdim=True)
        flat = chosen.reshape(-1)                                    # slot j = token j // k
        order = flat.argsort(stable=True)                            # slots grouped by expert
        sorted_expert = flat[order]
        # Slots per expert from the sorted ids: no host sync (CUDA's bincount reads the ids' min
        # and max back to the host, two syncs per layer), and deterministic, unlike atomics.
        starts = torch.searchsorted(sorted_expert, torch.arange(e + 1, device=x.device, dtype=flat.dtype))
        counts = starts.diff()
        padded = (counts + GROUP_ALIGN - 1) // GROUP_ALIGN * GROUP_ALIGN
        ends = padded.cumsum(0)
        # Row of each sorted slot in the padded buffer: its group's start plus its rank in the group.
        rank_in_group = torch.arange(t * k, device=x.device) - (counts.cumsum(0) - counts)[sorted_expert]
        rows = (ends - padded)[sorted_expert] + rank_in_group
        capacity = t * k + e * (GROUP_ALIGN - 1)                   # static bound: no host sync
        buf = x.new_zeros(capacity, h)
        buf = buf.index_put((rows,), x[order // k])
        y = self._experts(buf, ends)
        ys = y[rows]                                                 # sorted slot order
        unsorted = ys[order.argsort()]                               # slot order
        out = (unsorted.view(t, k, h) * weights.to(ys.dtype).unsqueeze(-1)).sum(dim=1)
        return out.view(shape)

    def _experts(self, buf: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        w1, w2 = self.gate_up_proj, self.down_proj
        if self.impl == "grouped":
            offs = ends.to(torch.int32)
            gate, up = torch._grouped_mm(buf, w1.transpose(-2, -1), offs=offs).chunk(2, dim=-1)
            return torch._grouped_mm(F.silu(gate) * up, w2.transpose(-2, -1), offs=offs)
        bounds = [0] + ends.tolist()                                 # one host sync per layer
        outs = []
        for i in range(self.experts):
            rows = buf[bounds[i]:bounds[i + 1]]
            gate, up = (rows @ w1[i].t()).chunk(2, dim=-1)
            outs.append((F.silu(gate) * up) @ w2[i].t())
        outs.append(buf.new_zeros(buf.shape[0] - bounds[-1], w2.shape[1]))
        return torch.cat(outs)


class TransformerBlock(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.input_norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.post_attn_norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.mlp = MoE(cfg) if cfg.kind == "moe" else MLP(cfg.hidden, cfg.intermediate)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.input_norm(x), cos, sin)
        return x + self.mlp(self.post_attn_norm(x))


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.kind not in CONFIGS:
            raise ValueError(f"unknown model kind {cfg.kind!r}")
        if cfg.heads % cfg.kv_heads:
            raise ValueError(f"heads ({cfg.heads}) must be a multiple of kv_heads ({cfg.kv_heads})")
        self.cfg = cfg
        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.norm_eps)
        self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.embed(tokens)
        cos, sin = rope_tables(tokens.shape[-1], self.cfg.head_dim, self.cfg.rope_theta, h.device, h.dtype)
        for layer in self.layers:
            h = layer(h, cos, sin)
        return self.lm_head(self.norm(h))

    @torch.no_grad()
    def init_weights(self) -> None:
        """Normal(0, init_std) for matrices and embeddings, ones for norms, in parameter order
        (deterministic under torch.manual_seed on one device type)."""
        for name, p in self.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            else:
                p.normal_(0.0, self.cfg.init_std)


def build(cfg: ModelConfig, *, seed: int, device: torch.device | str | None = None) -> Transformer:
    """The model with its weights drawn from `seed`, on `device` (full size, before sharding)."""
    torch.manual_seed(seed)
    with torch.device(device or "cpu"):
        model = Transformer(cfg)
    model.init_weights()
    return model


def param_count(cfg: ModelConfig) -> int:
    """Parameters of `cfg` without building it."""
    attn = cfg.hidden * cfg.head_dim * (2 * cfg.heads + 2 * cfg.kv_heads) + (2 * cfg.head_dim if cfg.qk_norm else 0)
    if cfg.kind == "moe":
        ffn = cfg.experts * 3 * cfg.hidden * cfg.moe_intermediate + cfg.experts * cfg.hidden
    else:
        ffn = 3 * cfg.hidden * cfg.intermediate
    layer = attn + ffn + 2 * cfg.hidden
    embed = cfg.vocab * cfg.hidden * (1 if cfg.tie_embeddings else 2)
    return cfg.layers * layer + embed + cfg.hidden


def active_param_count(cfg: ModelConfig) -> int:
    """Parameters one token uses (for MoE: top_k of the experts)."""
    if cfg.kind != "moe":
        return param_count(cfg)
    inactive = (cfg.experts - cfg.top_k) * 3 * cfg.hidden * cfg.moe_intermediate
    return param_count(cfg) - cfg.layers * inactive


def describe(cfg: ModelConfig) -> str:
    body = (f"{cfg.kind}: {cfg.layers} layers, hidden {cfg.hidden}, heads {cfg.heads}x{cfg.head_dim} "
            f"(kv {cfg.kv_heads}), vocab {cfg.vocab}")
    if cfg.kind == "moe":
        body += f", {cfg.experts} experts (top-{cfg.top_k}, width {cfg.moe_intermediate}, {cfg.expert_impl})"
    else:
        body += f", MLP {cfg.intermediate}"
    return f"{body}; {param_count(cfg) / 1e9:.3f} B params ({active_param_count(cfg) / 1e9:.3f} B active)"
