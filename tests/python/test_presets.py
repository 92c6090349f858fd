"""Preset parameter groups match the models' published sizes."""

from __future__ import annotations

import math

import pytest

from tide import make_plan, presets

MIB = 1 << 20

# Parameters of one layer, from the model configs:
#   Llama 3.1 8B: 32 layers x 218,112,000 + 2 x 128256 x 4096 (embeddings, lm_head) = 8.03 B
#   Llama 3.1 70B: 80 layers x 855,654,400 + 2 x 128256 x 8192 = 70.55 B
#   Qwen3-30B-A3B: 48 layers x 623,120,640 + 2 x 151936 x 2048 = 30.53 B
#   Wan2.2 14B: 40 blocks x 351,394,304 = 14.06 B
EXPECTED = {
    "llama3.1-8b": (9, 218_112_000),
    "llama3.1-70b": (9, 855_654_400),
    "qwen3-30b-a3b": (11, 623_120_640),
    "wan2.2-14b": (27, 351_394_304),
    "llama-tiny": (9, 725_504),  # CPU-sized stand-in, not a published model
}


def test_preset_names():
    assert presets.names() == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_preset_parameter_counts(name):
    params = presets.params(name)
    count, elems = EXPECTED[name]
    assert len(params) == count
    assert sum(math.prod(p["shape"]) for p in params) == elems
    assert len({p["name"] for p in params}) == count, "parameter names repeat"
    assert all(p["dtype"] == "bf16" for p in params)
    assert set(presets.load(name)) == {"name", "description", "params"}
    assert presets.load(name)["name"] == name


def test_llama8b_layer_is_416_mib():
    plan = make_plan(presets.params("llama3.1-8b"), nodes=8, gpus_per_node=8)
    # Every dim 0 of the layer divides by 64: no padding.
    assert plan["group"]["unsharded_bytes"] == 2 * 218_112_000
    assert round(plan["group"]["unsharded_bytes"] / MIB) == 416


def test_qwen_experts_are_fused_3d():
    shapes = {p["name"]: p["shape"] for p in presets.params("qwen3-30b-a3b")}
    assert shapes["mlp.experts.gate_up_proj"] == [128, 1536, 2048]
    assert shapes["mlp.experts.down_proj"] == [128, 2048, 768]


def test_unknown_preset():
    with pytest.raises(KeyError, match="unknown preset"):
        presets.load("gpt-5")
