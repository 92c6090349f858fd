"""tide.bench.plot turns a benchmark run's JSON into the three PNG plots."""

from __future__ import annotations

import json

from tide.bench import plot


def test_plots_from_a_run(tmp_path, rng):
    rows = []
    for op in ("ag", "rs"):
        for system in ("stock", "tide"):
            for size in (64 << 20, 256 << 20, 416 << 20):
                rows.append({"op": op, "system": f"{system}_{op}", "group": f"g{size}", "size_bytes": size,
                             "time_us": size / 1e6 * rng.uniform(1, 3)})
    interference = [{"system": s, "group": "llama", "gemm_alone_us": 50.0, "gemm_during_us": 60.0,
                     "slowdown_pct": 20.0, "overlapped": 40} for s in ("stock_ag", "tide_ag")]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"meta": {"ranks": 2, "device": "GPU", "date": "today"}, "rows": rows,
                               "interference": interference}))
    assert plot.main([str(run), "--out", str(tmp_path / "plots")]) == 0
    for name in ("all_gather_latency.png", "reduce_scatter_latency.png", "gemm_slowdown.png"):
        data = (tmp_path / "plots" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, name
