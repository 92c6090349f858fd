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


def test_bad_runs_are_refused_in_one_line(tmp_path, capsys):
    """A missing file, one that is not JSON, one without rows, or rows without their keys exit 2
    with one line naming the file, not a traceback; no PNG is written for them."""
    import pytest

    cases = {"missing.json": None, "broken.json": "{", "empty.json": "{}", "no_rows.json": '{"rows": []}',
             "odd_row.json": '{"rows": [{"op": "ag"}]}'}
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        with pytest.raises(SystemExit) as info:
            plot.main([str(path), "--out", str(tmp_path / "plots")])
        assert info.value.code == 2, name
        err = capsys.readouterr().err
        assert name in err and "Traceback" not in err, (name, err)
    assert not list((tmp_path / "plots").glob("*.png"))  # no such folder: no file either


def test_a_run_of_one_collective_says_what_it_left_out(tmp_path, capsys):
    rows = [{"op": "ag", "system": s, "group": "g", "size_bytes": 1 << 20, "time_us": t}
            for s, t in (("stock_ag", 40.0), ("tide_ag", 20.0))]
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"rows": rows}))
    assert plot.main([str(run), "--out", str(tmp_path / "plots")]) == 0
    out = capsys.readouterr().out
    assert "all_gather_latency.png" in out and "no data for reduce_scatter_latency.png, gemm_slowdown.png" in out, out
    assert sorted(p.name for p in (tmp_path / "plots").glob("*.png")) == ["all_gather_latency.png"]


def test_rows_with_wrong_outputs_are_named_in_the_legend(rng):
    """A row whose output had #wrong > 0 was drawn like any other point: its time is no result."""
    bad = rng.randint(1, 9)
    rows = [{"op": "ag", "system": "tide_ag", "group": "g1", "size_bytes": 2 << 20, "time_us": 9.0, "wrong": bad},
            {"op": "ag", "system": "tide_ag", "group": "g0", "size_bytes": 1 << 20, "time_us": 5.0, "wrong": 0},
            {"op": "ag", "system": "stock_ag", "group": "g0", "size_bytes": 1 << 20, "time_us": 7.0},
            {"op": "rs", "system": "stock_rs", "group": "g0", "size_bytes": 1 << 20, "time_us": 7.0}]
    series = plot.latency_series({"rows": rows}, "ag")
    assert series == {"tide_ag": [(1 << 20, 5.0, False), (2 << 20, 9.0, True)], "stock_ag": [(1 << 20, 7.0, False)]}
    assert plot.series_label("tide_ag", series["tide_ag"]) == "tide_ag (#wrong > 0 in 1 of 2 rows)"
    assert plot.series_label("stock_ag", series["stock_ag"]) == "stock_ag"


def test_interference_plot_skips_rows_without_a_finite_slowdown(tmp_path):
    rows = [{"op": "ag", "system": "tide_ag", "group": "g", "size_bytes": 1 << 20, "time_us": 5.0}]
    inf_only = [{"system": "tide_ag", "group": "llama", "gemm_alone_us": 50.0, "gemm_during_us": 60.0,
                 "slowdown_pct": float("inf"), "overlapped": 40}]
    assert not plot.plot_interference({"rows": rows, "interference": inf_only}, tmp_path / "g.png")
    ok = inf_only + [dict(inf_only[0], system="stock_ag", slowdown_pct=12.0, gemm_alone_us=51.0)]
    assert plot.plot_interference({"rows": rows, "interference": ok}, tmp_path / "g.png")
    assert (tmp_path / "g.png").read_bytes()[:4] == b"\x89PNG"
