"""Plots of a collective benchmark run (the JSON `tide bench --fabric cuda --json` writes, to
tide_bench_cuda.json or its --json-out path):
latency against size per system for each collective, and the GEMM slowdown per system.

    python -m tide.bench.plot RUN.json --out DIR

matplotlib is needed only here (`pip install matplotlib`); nothing else in tide imports it.
"""

from __future__ import annotations

import argparse
import json
import math
from collections import defaultdict
from pathlib import Path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def latency_series(run: dict, op: str) -> dict[str, list[tuple[int, float, bool]]]:
    """Per system, its rows of `op` as (size in bytes, median us, wrong) in size order; wrong: the
    row's output had #wrong > 0 (its time is no result, and the plot marks it)."""
    series = defaultdict(list)
    for row in run["rows"]:
        if row["op"] == op:
            series[row["system"]].append((row["size_bytes"], row["time_us"], bool(row.get("wrong", 0))))
    return {system: sorted(points) for system, points in series.items()}


def series_label(system: str, points: list[tuple[int, float, bool]]) -> str:
    """The legend's name of a system, with how many of its rows had wrong outputs."""
    wrong = sum(1 for p in points if p[2])
    return f"{system} (#wrong > 0 in {wrong} of {len(points)} rows)" if wrong else system


def plot_latency(run: dict, op: str, path: Path) -> bool:
    """Median latency (us) against message size, one line per system (rows whose outputs were
    wrong crossed out in red); False (no file) when the run has no row of `op`."""
    series = latency_series(run, op)
    if not series:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for system, points in sorted(series.items()):
        style = "-o" if system.startswith("tide") else "--s"
        ax.plot([p[0] / 2**20 for p in points], [p[1] for p in points], style, label=series_label(system, points),
                linewidth=2.2 if system.startswith("tide") else 1.2)
        bad = [p for p in points if p[2]]
        if bad:
            ax.plot([p[0] / 2**20 for p in bad], [p[1] for p in bad], "x", color="red", markersize=12,
                    markeredgewidth=2.5)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("size (MiB): all-gather output N*S / reduce-scatter fp32 input N*E*4")
    ax.set_ylabel("median time per call (us)")
    meta = run.get("meta", {})
    ax.set_title(f"{'all-gather' if op == 'ag' else 'reduce-scatter'}: {meta.get('ranks', '?')} x "
                 f"{meta.get('device', 'GPU')}, {meta.get('date', '')}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_interference(run: dict, path: Path) -> bool:
    """GEMM slowdown (%) while each system loops on a side stream (the worst rank's), each against
    that rank's GEMM alone right before and after that system (printed under its bar with the rank);
    False (no file) when no system overlapped the GEMM in at least 20 calls with a finite slowdown."""
    rows = [r for r in run.get("interference", [])
            if r.get("overlapped", 0) >= 20 and math.isfinite(r.get("slowdown_pct", math.nan))]
    if not rows:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    labels = [f"{r['system']}\n{r['group']}\nalone {r['gemm_alone_us']:.0f} us (rank {r.get('times_of_rank', 0)})"
              for r in rows]
    values = [r["slowdown_pct"] for r in rows]
    colors = ["tab:blue" if r["system"].startswith("tide") else "tab:gray" for r in rows]
    ax.bar(range(len(rows)), values, color=colors)
    ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("GEMM slowdown (%)")
    ax.set_title("256x8192x8192 bf16 GEMM while each collective loops (against its time alone around it)")
    for i, v in enumerate(values):
        ax.text(i, v, f"{v:.0f}%", ha="center", va="bottom", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


_ROW_KEYS = ("op", "system", "size_bytes", "time_us", "group")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="JSON written by tide bench --fabric cuda --json")
    ap.add_argument("--out", type=Path, required=True, help="directory for the PNG files")
    args = ap.parse_args(argv)
    try:
        run = json.loads(args.run.read_text())
    except OSError as e:
        ap.error(f"{args.run}: {e.strerror or e}")
    except ValueError as e:
        ap.error(f"{args.run}: not JSON ({e})")
    rows = run.get("rows") if isinstance(run, dict) else None
    if not isinstance(rows, list) or not rows:
        ap.error(f"{args.run}: no rows (want the JSON of tide bench --fabric cuda --json)")
    bad = [i for i, r in enumerate(rows) if not isinstance(r, dict) or any(k not in r for k in _ROW_KEYS)]
    if bad:
        ap.error(f"{args.run}: row {bad[0]} lacks one of {', '.join(_ROW_KEYS)}")
    try:
        args.out.mkdir(parents=True, exist_ok=True)
        drawn = {name: draw() for name, draw in (
            ("all_gather_latency.png", lambda: plot_latency(run, "ag", args.out / "all_gather_latency.png")),
            ("reduce_scatter_latency.png", lambda: plot_latency(run, "rs", args.out / "reduce_scatter_latency.png")),
            ("gemm_slowdown.png", lambda: plot_interference(run, args.out / "gemm_slowdown.png")))}
    except OSError as e:
        ap.error(f"--out {args.out}: {e.strerror or e}")
    made = [name for name, ok in drawn.items() if ok]
    skipped = [name for name, ok in drawn.items() if not ok]
    print(f"plots in {args.out}: {', '.join(made) or 'none'}"
          + (f" (no data for {', '.join(skipped)})" if skipped else ""))
    return 0 if made else 1


if __name__ == "__main__":
    raise SystemExit(main())
