"""tide.bench.fsdp_steps on CPU: the end-to-end FSDP2 benchmark driver with its --tiny models on
two gloo ranks (one fsdp_harness job; the scenarios below run inside its workers): every system
on both models, then the loss-curve mode. TIDE (host fabric) must give stock FSDP2's losses, and
the JSON must hold every system."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from fsdp_harness import run_job

SYSTEMS = ["stock", "pg-alloc", "tide-in-place", "tide-slot-reuse", "tide-late-free", "tide-4ctas",
           "tide-no-copy-graphs", "tide-record-stream"]
STEPS, WARMUP = 4, 2
LOSS_STEPS = 8
SCENARIOS = ["timing_run", "reference_run", "loss_curve_run", "host_profile_run"]


# ------------------------------------------------------------------ run inside the workers

def _main(ctx, *argv: str) -> None:
    from tide.bench import fsdp_steps

    rc = fsdp_steps.main(["--tiny", "--device", "cpu", *argv])
    assert rc == 0, f"fsdp_steps exited {rc}"


def timing_run(ctx) -> None:
    _main(ctx, "--model", "llama", "moe", "--systems", *SYSTEMS, "--steps", str(STEPS), "--warmup", str(WARMUP),
          "--round-steps", "2", "--memory-steps", "1", "--json", f"{ctx.tmp}/steps.json")


def reference_run(ctx) -> None:
    # An A/B among TIDE systems (as on ranks sharing one GPU, where stock is no baseline).
    _main(ctx, "--model", "llama", "--systems", "tide-slot-reuse", "tide-record-stream", "--reference", "tide-in-place",
          "--steps", "2", "--warmup", "1", "--memory-steps", "0", "--json", f"{ctx.tmp}/reference.json")


def loss_curve_run(ctx) -> None:
    _main(ctx, "--model", "llama", "--loss-curve", str(LOSS_STEPS), "--loss-window", "4", "--lr", "3e-3",
          "--systems", "stock", "tide-in-place", "tide-slot-reuse", "--json", f"{ctx.tmp}/curve.json")


def host_profile_run(ctx) -> None:
    from tide.bench import host_profile

    results = host_profile.main(["--tiny", "--device", "cpu", "--model", "llama", "--tokens", "64", "--steps", "2",
                                 "--systems", "stock", "tide-in-place", "--python", "--sync-debug"])
    if ctx.rank == 0:
        Path(f"{ctx.tmp}/host_profile.json").write_text(json.dumps(results))


# ------------------------------------------------------------------ tests (parent process)

@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fsdp-steps")
    result = run_job(2, SCENARIOS, tmp, timeout=300, module=Path(__file__).stem)
    print(f"\n2-rank fsdp_steps job: {result.seconds:.1f} s")
    return result, tmp


def _load(job, scenario: str, name: str) -> dict:
    result, tmp = job
    result.check(scenario)
    return json.loads((tmp / name).read_text())


def test_every_system_runs_and_matches_stock(job):
    report = _load(job, "timing_run", "steps.json")
    assert [(r["model"], r["tokens_per_gpu"]) for r in report["runs"]] == [("llama", 64), ("moe", 64)]
    for run in report["runs"]:
        assert "error" not in run, run.get("error")
        systems = run["systems"]
        assert list(systems) == SYSTEMS
        stock = systems["stock"]["losses"]
        assert len(stock) == WARMUP + STEPS and all(math.isfinite(x) for x in stock)
        for name, res in systems.items():
            assert res["status"] == "ok", (name, res)
            assert res["step_ms"]["n"] == STEPS and res["step_ms"]["median"] > 0
            assert res["losses"] == pytest.approx(stock, rel=1e-5, abs=1e-6), name
            assert res["max_loss_rdiff_vs_reference"] <= 1e-5
        for name in ("tide-in-place", "tide-slot-reuse", "tide-late-free", "tide-4ctas", "tide-no-copy-graphs",
                     "tide-record-stream"):
            tide = systems[name]["tide"]
            assert tide["groups_tide"] == tide["groups_total"] == run["config"]["layers"] + 1
            assert tide["arena_bytes"] > 0
            calls = tide["calls"]
            assert calls["all_gathers"] > 0 and calls["reduce_scatters"] > 0 and not calls.get("rs_stock")
            assert calls.get("rs_slot_reuse" if name == "tide-slot-reuse" else "rs_in_place", 0) > 0
            # tide-late-free hands each call's gradients to FSDP2's reduce-scatter state instead of
            # releasing them at read-done; the others never do.
            assert (calls.get("rs_inputs_retained", 0) > 0) == (name == "tide-late-free"), (name, calls)
            # tide-4ctas fixes every group's sum budget; the others take the solver's.
            ctas = {g["sum_ctas"] for g in tide["groups"] if g["status"] == "tide"}
            assert (ctas == {4}) == (name == "tide-4ctas"), (name, ctas)
            # The fabric's own counts after the run: the host fabric copies but builds no copy graphs.
            stats = [a["fabric_stats"] for a in tide["arenas"]]
            assert stats and all(st["copy_descriptors"] > 0 and st["sum_elems"] > 0 for st in stats), stats
            assert all(st["copy_graph_launches"] == st["copy_graphs_built"] == 0 for st in stats), stats
            # libtide counted the adapter's calls (one arena here), with host time inside each kind.
            assert sum(st["all_gather_calls"] for st in stats) == calls["all_gathers"], (stats, calls)
            assert sum(st["reduce_scatter_calls"] for st in stats) == calls["reduce_scatters"], (stats, calls)
            assert all(st["all_gather_host_ns"] > 0 and st["reduce_scatter_host_ns"] > 0 for st in stats), stats
            assert systems[name]["ratio_vs_reference"] > 0
        assert run["checks"]["losses_match"]
        # The speed targets are the for two H200s: a CPU run is not held to them.
        assert run["checks"]["speedup_target_pct"] is None
        assert all("speedup_met" not in c for c in run["checks"]["systems"].values()), run["checks"]


def test_another_reference_takes_stocks_place(job):
    """--reference: the named system runs (first) although --systems leaves it out, stock does
    not, every ratio and loss difference is against it, and the issue's targets (against stock)
    are not claimed."""
    (run,) = _load(job, "reference_run", "reference.json")["runs"]
    assert "error" not in run, run.get("error")
    assert list(run["systems"]) == ["tide-in-place", "tide-slot-reuse", "tide-record-stream"]
    checks = run["checks"]
    assert checks["reference"] == "tide-in-place" and checks["speedup_target_pct"] is None
    assert checks["losses_match"]
    ref = run["systems"]["tide-in-place"]
    assert ref["ratio_vs_reference"] == 1.0 and ref["max_loss_rdiff_vs_reference"] == 0.0
    for name in ("tide-slot-reuse", "tide-record-stream"):
        res = run["systems"][name]
        assert res["ratio_vs_reference"] == pytest.approx(res["step_ms"]["median"] / ref["step_ms"]["median"])
        assert res["max_loss_rdiff_vs_reference"] <= 1e-5
        assert "speedup_met" not in checks["systems"][name] and "memory_met" not in checks["systems"][name]


def test_reference_option_is_checked():
    from tide.bench import fsdp_steps

    args = fsdp_steps.parse_args(["--device", "cpu", "--systems", "tide-slot-reuse", "--reference", "tide-in-place"])
    assert args.systems == ["tide-in-place", "tide-slot-reuse"]
    assert fsdp_steps.parse_args(["--device", "cpu"]).systems[0] == "stock"
    with pytest.raises(SystemExit):  # the loss curve is stock's spread
        fsdp_steps.parse_args(["--device", "cpu", "--loss-curve", "5", "--reference", "tide-in-place"])
    with pytest.raises(SystemExit):
        fsdp_steps.parse_args(["--device", "cpu", "--reference", "nonesuch"])


def test_counts_that_would_fail_after_setup_are_refused_first(capsys):
    """A negative loss curve or memory-step count failed only after every system was built."""
    from tide.bench import fsdp_steps

    for option, words in (("--loss-curve", "--loss-curve takes a number of steps"),
                          ("--memory-steps", "--memory-steps must not be negative")):
        with pytest.raises(SystemExit) as stop:
            fsdp_steps.parse_args(["--device", "cpu", option, "-1"])
        assert stop.value.code == 2
        assert words in capsys.readouterr().err


def test_summary_names_the_reference_even_after_a_failed_configuration():
    from tide.bench import fsdp_steps

    lines: list[str] = []
    fsdp_steps.summary([{"model": "moe", "tokens_per_gpu": 64, "error": "Traceback\nRuntimeError: boom"}], lines.append,
                       "tide-in-place")
    assert any("against tide-in-place, not stock" in line for line in lines), lines
    assert any("ERROR: RuntimeError: boom" in line for line in lines), lines
    lines.clear()
    fsdp_steps.summary([], lines.append)
    assert not any("not stock" in line for line in lines), lines


def test_loss_curve_stays_within_stock_spread(job):
    curve = _load(job, "loss_curve_run", "curve.json")["loss_curve"]
    assert set(curve["curves"]) == {"stock-A", "stock-B", "tide-in-place", "tide-slot-reuse"}
    a = curve["curves"]["stock-A"]
    assert len(a) == LOSS_STEPS and a[-1] < a[0]  # it learns
    assert curve["curves"]["stock-B"] != a         # another data order
    assert len(curve["windows"]) == LOSS_STEPS // 4
    for name in ("tide-in-place", "tide-slot-reuse"):
        assert curve["curves"][name] == pytest.approx(a, rel=1e-5, abs=1e-6)
        assert curve["systems"][name]["within_spread"]
        assert curve["systems"][name]["early_max_rdiff"] <= curve["systems"][name]["early_rtol"] == 1e-4


def test_host_profile_splits_the_step_by_phase_and_function(job):
    """tide.bench.host_profile: per system, the step's host time, FSDP2's phases (all-gathers in the
    forward and backward, reduce-scatters) and, with --python, the adapter's functions for TIDE only."""
    report = _load(job, "host_profile_run", "host_profile.json")
    assert set(report) == {"stock", "tide-in-place"}, list(report)
    for name, res in report.items():
        assert res["host_ms"] > 0, (name, res["host_ms"])
        phases = res["phases"]
        for phase in ("FSDP::pre_forward", "FSDP::all_gather", "FSDP::post_backward_reduce"):
            ms, calls = phases[phase]
            assert ms > 0 and calls > 0, (name, phase, phases[phase])
        assert phases["FSDP::pre_forward"][0] <= res["host_ms"], (name, phases["FSDP::pre_forward"], res["host_ms"])
        assert res["ops"], name
    adapter = [f for _ms, _calls, f in report["tide-in-place"]["functions"] if f.startswith("tide/fsdp/")]
    assert any("all_gather.py" in f for f in adapter) and any("reduce_scatter.py" in f for f in adapter), adapter
    assert not [f for _ms, _calls, f in report["stock"]["functions"] if f.startswith("tide/fsdp/")]
    # The fabric's counts per profiled step: TIDE's copies on the host fabric (no graphs there); none for stock.
    assert report["stock"]["fabric"] == {}, report["stock"]["fabric"]
    fabric = report["tide-in-place"]["fabric"]
    assert fabric["copy_descriptors"] > 0 and fabric["copy_graph_launches"] == fabric["copy_graphs_built"] == 0, fabric
    # libtide's calls per profiled step and the host time inside them (tiny llama: 2 blocks and the root).
    assert fabric["all_gather_calls"] > 0 and fabric["reduce_scatter_calls"] > 0, fabric
    assert fabric["all_gather_host_ns"] > 0 and fabric["reduce_scatter_host_ns"] > 0, fabric
    # --python: TIDE's library calls, each kind with its calls per step; no CUDA API on the host fabric.
    library = report["tide-in-place"]["library"]
    assert {"all_gather", "reduce_scatter"} <= set(library), library
    for kind in ("all_gather", "reduce_scatter"):
        assert library[kind]["ms"] > 0 and library[kind]["calls"] > 0 and library[kind]["api"] == {}, library[kind]
    assert report["stock"]["library"] == {}, report["stock"]["library"]
    # --sync-debug: the CUDA sync debug mode has nothing to report on CPU ranks.
    assert all(res["syncs"] == [] for res in report.values()), {n: r["syncs"] for n, r in report.items()}


def test_sync_warnings_are_counted_per_step_by_line():
    """host_profile.count_sync_warnings: the sync debug mode's warnings, per step and issuing line,
    most frequent first; any other warning is not counted."""
    import warnings

    from tide.bench.host_profile import count_sync_warnings

    def warned(message, filename, lineno):
        return warnings.WarningMessage(UserWarning(message), UserWarning, filename, lineno)

    sync = "called a synchronizing CUDA operation"
    caught = ([warned(sync, "/x/site-packages/torch/nn/functional.py", 12)] * 6
              + [warned(sync, "/work/python/tide/bench/models.py", 204)] * 4
              + [warned("Full backward hook is firing", "/x/torch/nn/modules/module.py", 3)] * 5)
    assert count_sync_warnings(caught, steps=2) == [(3.0, "torch/nn/functional.py:12"),
                                                    (2.0, "tide/bench/models.py:204")]
    assert count_sync_warnings([], steps=2) == []


def test_library_api_calls_counts_the_cuda_calls_inside_each_library_call():
    """host_profile.library_api_calls: a CUDA API event counts for the TIDE library call whose span
    on the same thread contains it; other threads' and calls outside any span do not count."""
    from tide.bench.host_profile import library_api_calls

    def py(name, ts, dur, tid=1):
        return {"ph": "X", "cat": "python_function", "name": name, "ts": ts, "dur": dur, "tid": tid}

    def cuda(name, ts, dur, tid=1, cat="cuda_runtime"):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "tid": tid}

    trace = {"traceEvents": [
        py("/w/python/tide/comm.py(114): reduce_scatter", 100, 300),
        py("/w/python/tide/comm.py(110): all_gather", 1000, 100),
        py("/w/python/tide/fsdp/backend.py(254): all_gather", 990, 200),  # not a library call
        cuda("cudaMemcpyBatchAsync", 120, 40), cuda("cuLaunchKernelEx", 200, 20, cat="cuda_driver"),
        cuda("cudaMemcpyBatchAsync", 300, 60), cuda("cudaEventRecord", 1010, 10),
        cuda("cudaEventQuery", 500, 5),            # between the calls
        cuda("cudaMemcpyBatchAsync", 150, 7, tid=2),  # another thread
    ]}
    out = library_api_calls(trace, steps=2)
    assert set(out) == {"reduce_scatter", "all_gather"}
    rs, ag = out["reduce_scatter"], out["all_gather"]
    assert rs["ms"] == pytest.approx(0.15) and rs["calls"] == pytest.approx(0.5)
    assert rs["api"] == {"cudaMemcpyBatchAsync": [pytest.approx(0.05), pytest.approx(1.0)],
                         "cuLaunchKernelEx": [pytest.approx(0.01), pytest.approx(0.5)]}
    assert ag["ms"] == pytest.approx(0.05) and ag["api"] == {"cudaEventRecord": [pytest.approx(0.005), pytest.approx(0.5)]}
    assert library_api_calls({"traceEvents": []}, steps=1) == {}


def test_ipc_option_is_for_cuda_ranks_and_reaches_install():
    """--ipc (ranks sharing GPUs) refuses CPU ranks with a message, and hands install() the
    cuda-ipc fabric through the training configuration; without it install picks by device."""
    from tide.bench import fsdp_steps

    with pytest.raises(SystemExit):
        fsdp_steps.parse_args(["--device", "cpu", "--ipc"])
    assert fsdp_steps.train_config(fsdp_steps.parse_args(["--device", "cuda", "--ipc"])).tide_fabric == "cuda-ipc"
    assert fsdp_steps.train_config(fsdp_steps.parse_args(["--device", "cpu"])).tide_fabric is None


def test_a_curve_inside_the_data_order_spread_but_off_from_its_first_steps_fails():
    """Stock's spread between two data orders is wide (0.87 on the GPU's 200-step curve): a TIDE
    curve off by a constant 1 % from the first step on, a wrong gradient's kind of error, stayed
    within it. The first LOSS_CHECK_STEPS steps must now match stock-A within the tolerance."""
    from tide.bench import fsdp_steps

    steps = 40
    a = [5.0 - 0.05 * i for i in range(steps)]
    b = [x + (0.5 if i % 2 else -0.5) for i, x in enumerate(a)]  # another data order: wide spread
    near = [x * (1 + 1e-4 * (-1) ** i) for i, x in enumerate(a)]
    off = [x * 1.01 for x in a]
    curves = {"stock-A": a, "stock-B": b, "near": near, "off": off}
    windows, spread, per = fsdp_steps.curve_verdicts(curves, ["near", "off"], 20, 2e-3)
    assert len(windows) == 2 and min(spread) == pytest.approx(0.5)
    assert all(d <= sp for d, sp in zip(per["off"]["window_max_abs_diff"], spread))  # within the spread
    assert per["near"]["within_spread"]
    assert not per["off"]["within_spread"] and per["off"]["early_max_rdiff"] == pytest.approx(0.01, rel=0.1)
