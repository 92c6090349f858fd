"""Group layout against FSDP2's padding rule, and the landing map (Sec. 2.1).

FSDP2 shards dim 0 with `_chunk_with_empty`: torch.chunk, so every rank gets
chunks[0].size(0) = ceil(D/N) rows and padding sits only at the tail of dim 0.
"""

from __future__ import annotations

import math

import numpy as np

from tide import make_plan

ITEM_SIZE = {"bf16": 2, "fp32": 4}


def random_shape(rng, max_rows=300, max_trailing=12) -> list[int]:
    ndim = rng.choice([1, 1, 2, 2, 2, 3])
    # Rows below, at and above N, multiples of N and not, all show up.
    rows = rng.choice([1, 2, 3, rng.randint(1, 16), rng.randint(1, max_rows)])
    return [rows] + [rng.randint(1, max_trailing) for _ in range(ndim - 1)]


def random_group(rng, max_params=12, **shape_kw) -> list[list[int]]:
    return [random_shape(rng, **shape_kw) for _ in range(rng.randint(1, max_params))]


def random_topology(rng, max_nodes=12) -> tuple[int, int]:
    return rng.randint(1, max_nodes), rng.randint(1, 8)


def fsdp2_shard_rows(shape: list[int], ranks: int) -> int:
    import torch  # a missing torch fails the test: CI installs it

    chunks = torch.chunk(torch.empty(shape, device="meta"), ranks, dim=0)
    return chunks[0].size(0)


def check_layout(plan: dict, shapes: list[list[int]], dtype: str, where: str) -> None:
    ranks = plan["topology"]["ranks"]
    group = plan["group"]
    item = ITEM_SIZE[dtype]
    assert group["params"] == len(shapes), where
    assert len(group["param_layout"]) == len(shapes), where
    shard_offset = out_offset = 0
    for index, (shape, p) in enumerate(zip(shapes, group["param_layout"], strict=True)):
        at = f"{where}, parameter {index} shape {shape}"
        rows, row_elems = shape[0], math.prod(shape[1:])
        assert p["rows"] == rows, at
        assert p["row_elems"] == row_elems, at
        assert p["shard_rows"] == fsdp2_shard_rows(shape, ranks), at
        assert p["shard_bytes"] == p["shard_rows"] * row_elems * item, at
        assert p["shard_offset"] == shard_offset, at
        assert p["out_offset"] == out_offset, at
        shard_offset += p["shard_bytes"]
        out_offset += p["shard_rows"] * row_elems
    assert group["shard_bytes"] == shard_offset, where
    assert group["unsharded_bytes"] == ranks * shard_offset, where
    assert group["out_bytes"] == 4 * out_offset, where


def test_shard_rows_match_fsdp2_chunk_rule(rng):
    for case in range(300):
        nodes, gpus = random_topology(rng, max_nodes=64 if case % 10 == 0 else 12)
        shapes = random_group(rng)
        dtype = rng.choice(["bf16", "fp32"])
        plan = make_plan(shapes, nodes=nodes, gpus_per_node=gpus, dtype=dtype)
        check_layout(plan, shapes, dtype,
                     f"seed {rng.seed_value} case {case}: M={nodes} L={gpus} {dtype}")


def landing(p: dict, rank: int, ranks: int) -> int:
    """Eq. 2: Landing(p, r) = o_p * N + r * s_p."""
    return p["shard_offset"] * ranks + rank * p["shard_bytes"]


def test_landing_map_is_a_bijection(rng):
    for case in range(200):
        nodes, gpus = random_topology(rng, max_nodes=6)
        shapes = random_group(rng, max_params=8, max_rows=40, max_trailing=6)
        plan = make_plan(shapes, nodes=nodes, gpus_per_node=gpus)
        ranks = nodes * gpus
        total = plan["group"]["unsharded_bytes"]
        covered = np.zeros(total, dtype=np.int32)
        for p in plan["group"]["param_layout"]:
            for rank in range(ranks):
                start = landing(p, rank, ranks)
                assert 0 <= start and start + p["shard_bytes"] <= total
                covered[start:start + p["shard_bytes"]] += 1
        where = f"seed {rng.seed_value} case {case}: M={nodes} L={gpus} shapes {shapes}"
        assert np.all(covered == 1), where


def test_landing_holds_fsdp2_unsharded_parameters(rng):
    """Scattering every rank's packed shard by Landing(p, r) gives each
    parameter contiguous and tail-padded: the bytes of FSDP2's copy-out."""
    import torch

    for case in range(50):
        nodes, gpus = random_topology(rng, max_nodes=5)
        ranks = nodes * gpus
        shapes = random_group(rng, max_params=6, max_rows=30, max_trailing=5)
        plan = make_plan(shapes, nodes=nodes, gpus_per_node=gpus)
        layout = plan["group"]["param_layout"]
        shard_elems = plan["group"]["shard_bytes"] // 2

        params = [torch.randint(-2**15, 2**15, shape, dtype=torch.int16) for shape in shapes]
        # FSDP2's sharding: chunk dim 0, pad each chunk at its tail to chunks[0]'s rows.
        packed = np.zeros((ranks, shard_elems), dtype=np.int16)
        for param, geo in zip(params, layout, strict=True):
            chunks = torch.chunk(param, ranks, dim=0)
            for rank in range(ranks):
                padded = torch.zeros((geo["shard_rows"], *param.shape[1:]), dtype=torch.int16)
                if rank < len(chunks):
                    padded[: chunks[rank].size(0)] = chunks[rank]
                start = geo["shard_offset"] // 2
                packed[rank, start:start + padded.numel()] = padded.flatten().numpy()

        landing_buffer = np.full(ranks * shard_elems, -1, dtype=np.int16)
        for geo in layout:
            elems = geo["shard_bytes"] // 2
            for rank in range(ranks):
                src = packed[rank, geo["shard_offset"] // 2:][:elems]
                dst = landing(geo, rank, ranks) // 2
                landing_buffer[dst:dst + elems] = src

        where = f"seed {rng.seed_value} case {case}: M={nodes} L={gpus} shapes {shapes}"
        for param, geo in zip(params, layout, strict=True):
            rows = geo["shard_rows"] * ranks
            expected = torch.zeros((rows, *param.shape[1:]), dtype=torch.int16)
            expected[: param.shape[0]] = param
            start = landing(geo, 0, ranks) // 2
            got = landing_buffer[start:start + expected.numel()]
            assert np.array_equal(got, expected.flatten().numpy()), where
