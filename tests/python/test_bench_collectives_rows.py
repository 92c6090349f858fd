"""The collectives benchmark's result rows (tide.bench.collectives): row_for's nccl-tests numbers
(size, time, algbw = size / time, busbw = algbw * (N-1)/N), print_table's columns (rank 0 only),
the rows' keys that tide.bench.plot reads, the groups' sizes, and the float64 reduce-scatter
reference that counts stock's #wrong. All of it runs only inside a GPU session otherwise.

Expected values are computed here from the shapes (ceil(D_p / N) rows per rank), not from the
module's Group properties."""

from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

from tide.bench.round_order import round_order

torch = pytest.importorskip("torch")
from tide.bench import collectives  # noqa: E402
from tide.bench.collectives import Group, Skip, System, groups_for, row_for  # noqa: E402
from tide.bench.interleaved_timing import interleaved_schedule  # noqa: E402

MiB = 1 << 20


def _system(op: str, name: str | None = None) -> System:
    return System(name or f"test_{op}", op, prepare=lambda g: None)


def _random_group(rng: random.Random) -> Group:
    ranks = rng.choice([1, 2, 3, 4, 8])
    shapes = [tuple([rng.randint(1, 300)] + [rng.randint(1, 40) for _ in range(rng.randint(0, 2))])
              for _ in range(rng.randint(1, 9))]
    return Group(f"g{rng.randrange(1000)}", shapes, ranks)


def _padded_elems_per_rank(shapes, ranks: int) -> int:
    """One rank's shard elements: FSDP2 pads every parameter's dim 0 to a multiple of N."""
    total = 0
    for shape in shapes:
        rows_per_rank = (shape[0] + ranks - 1) // ranks
        total += rows_per_rank * int(np.prod(shape[1:], dtype=np.int64))
    return total


@pytest.mark.parametrize("op,bytes_per_elem,dtype", [("ag", 2, "bf16"), ("rs", 4, "bf16->fp32")])
def test_row_numbers_follow_nccl_tests(rng, op, bytes_per_elem, dtype):
    """size: the all-gather's bf16 output or the reduce-scatter's fp32 input (N x the padded shard);
    algbw in GB/s (1e9 bytes); busbw = algbw (N-1)/N for both collectives."""
    for _ in range(50):
        group = _random_group(rng)
        ms, wrong, host_us = rng.uniform(0.001, 50.0), rng.randrange(0, 5), rng.uniform(1.0, 500.0)
        row = row_for(_system(op, "sys_x"), group, ms, wrong, host_us)
        n = group.ranks
        size = n * _padded_elems_per_rank(group.shapes, n) * bytes_per_elem
        seconds = ms / 1e3
        assert row["size_bytes"] == size
        assert row["time_us"] == pytest.approx(ms * 1e3, rel=1e-12)
        assert row["algbw_GBps"] == pytest.approx(size / seconds / 1e9, rel=1e-12)
        assert row["busbw_GBps"] == pytest.approx(size / seconds / 1e9 * (n - 1) / n, rel=1e-12)
        assert (row["system"], row["op"], row["group"], row["dtype"]) == ("sys_x", op, group.name, dtype)
        assert (row["params"], row["ranks"], row["wrong"], row["host_us"]) == (len(group.shapes), n, wrong, host_us)


def test_row_numbers_worked_by_hand():
    # 8 rows of 1024 over 4 ranks: 2 rows (2048 elements) per rank, 4 us per call.
    group = Group("g", [(8, 1024)], 4)
    ag = row_for(_system("ag"), group, 0.004, 0, 1.0)
    assert ag["size_bytes"] == 4 * 2048 * 2 == 16384
    assert ag["time_us"] == pytest.approx(4.0)
    assert ag["algbw_GBps"] == pytest.approx(4.096) and ag["busbw_GBps"] == pytest.approx(3.072)
    rs = row_for(_system("rs"), group, 0.004, 0, 1.0)
    assert rs["size_bytes"] == 32768
    assert rs["algbw_GBps"] == pytest.approx(8.192) and rs["busbw_GBps"] == pytest.approx(6.144)
    # A padded tail: 5 rows of 3 over 2 ranks is 3 rows (9 elements) per rank, 36 bytes gathered.
    assert row_for(_system("ag"), Group("p", [(5, 3)], 2), 1.0, 0, 1.0)["size_bytes"] == 36
    # One rank moves nothing over the bus.
    assert row_for(_system("ag"), Group("one", [(8, 8)], 1), 1.0, 0, 1.0)["busbw_GBps"] == 0.0


def test_llama_layer_rows_are_the_whole_layer():
    """One Llama-3.1-8B decoder layer is 218,112,000 bf16 parameters: the all-gather output is
    436,224,000 bytes and the reduce-scatter's fp32 input twice that, whatever N (2, 4, 8 divide
    every row count, so nothing is padded)."""
    params = 2 * 4096 * 4096 + 2 * 1024 * 4096 + 3 * 14336 * 4096 + 2 * 4096
    assert params == 218_112_000
    for n in (2, 4, 8):
        llama = groups_for("ag", n)[0]
        assert llama.name == "llama3.1-8b-layer"
        assert row_for(_system("ag"), llama, 1.0, 0, 0.0)["size_bytes"] == 2 * params
        assert row_for(_system("rs"), groups_for("rs", n)[0], 1.0, 0, 0.0)["size_bytes"] == 4 * params


@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_synthetic_groups_are_the_sizes_their_names_say(ranks):
    """'32MiB-P30': 30 parameters whose bf16 shards add up to about 32 MiB per rank (AG); 'P16'
    groups: 16 parameters, fp32 output per rank (RS). Some have padded tails (D_p not a multiple
    of N), which the landing and the copy-out must handle."""
    for op, bytes_per_elem, params in (("ag", 2, 30), ("rs", 4, 16)):
        groups = groups_for(op, ranks)
        assert [g.name for g in groups[1:]] == [f"32MiB-P{params}", f"128MiB-P{params}"]
        for group, mib in zip(groups[1:], (32, 128)):
            assert len(group.shapes) == params and group.ranks == ranks
            per_rank = _padded_elems_per_rank(group.shapes, ranks) * bytes_per_elem
            assert abs(per_rank - mib * MiB) <= 0.01 * mib * MiB, (op, group.name, per_rank / MiB)
            assert any(s[0] % ranks for s in group.shapes), group.name


def test_print_table_prints_every_row_on_rank_zero_only(monkeypatch, capsys, rng):
    rows = []
    for op in ("ag", "rs"):
        for name in (f"stock_{op}", f"tide_{op}"):
            group = _random_group(rng)
            group = Group(group.name, group.shapes, max(2, group.ranks))  # busbw unlike algbw
            size = row_for(_system(op), group, 1.0, 0, 0.0)["size_bytes"]
            ms = size / rng.uniform(5e9, 400e9) * 1e3  # 5 to 400 GB/s: bandwidths the 0.1 column tells apart
            rows.append(row_for(_system(op, name), group, ms, rng.randrange(3), rng.uniform(1.0, 900.0)))
    capsys.readouterr()  # the rng fixture's seed line
    monkeypatch.setattr(collectives.dist, "get_rank", lambda: 1)
    collectives.print_table(rows)
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(collectives.dist, "get_rank", lambda: 0)
    collectives.print_table(rows)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 + len(rows)
    assert lines[0].lstrip("#").split() == ["op", "group", "system", "size(B)", "time(us)", "algbw", "busbw",
                                            "#wrong", "host(us)"]
    for line, row in zip(lines[1:], rows):
        op, group, system, size, time_us, algbw, busbw, wrong, host_us = line.split()
        assert (op, group, system, int(size), int(wrong)) == (row["op"], row["group"], row["system"],
                                                              row["size_bytes"], row["wrong"])
        # One decimal: within half a unit of the last place.
        for shown, value in ((time_us, row["time_us"]), (algbw, row["algbw_GBps"]), (busbw, row["busbw_GBps"]),
                             (host_us, row["host_us"])):
            assert abs(float(shown) - value) <= 0.05 + 1e-9, (line, shown, value)
    # The columns line up under the header (right-aligned): each field ends where its title does.
    header_ends = [m.end() for m in re.finditer(r"\S+", lines[0].replace("#", " ", 1))]
    for line in lines[1:]:
        assert [m.end() for m in re.finditer(r"\S+", line)] == header_ends, (lines[0], line)


def test_rows_carry_what_the_plots_read(tmp_path, rng):
    """The --json rows are row_for's dicts: tide.bench.plot must find its keys in them and draw a
    latency plot per collective from them (after a trip through JSON)."""
    pytest.importorskip("matplotlib")
    from tide.bench import plot

    rows = [row_for(_system(op, f"{kind}_{op}"), g, rng.uniform(0.05, 5.0), 0, 10.0)
            for op in ("ag", "rs") for kind in ("stock", "tide") for g in groups_for(op, 2)]
    for row in rows:
        assert set(plot._ROW_KEYS) <= set(row), row
    run = json.loads(json.dumps({"meta": {"ranks": 2, "device": "GPU", "date": "today"}, "rows": rows}))
    for op in ("ag", "rs"):
        path = tmp_path / f"{op}.png"
        assert plot.plot_latency(run, op, path) is True
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_drawn_interference_plot_is_reported_as_drawn(tmp_path):
    pytest.importorskip("matplotlib")
    from tide.bench import plot

    interference = [{"system": s, "group": "llama", "gemm_alone_us": 50.0, "gemm_during_us": 60.0,
                     "slowdown_pct": 20.0, "overlapped": 40} for s in ("stock_ag", "tide_ag")]
    path = tmp_path / "gemm_slowdown.png"
    drawn = plot.plot_interference({"interference": interference}, path)
    assert path.exists()  # drawn either way
    assert drawn is True


def test_rs_reference_is_the_float64_average_of_every_ranks_rows(rng):
    """rs_reference (what stock_rs's #wrong counts against): rank r's padded rows of each
    parameter, averaged over the ranks' gradients in float64, packed parameter after parameter,
    zeros in the padding."""
    cpu = torch.device("cpu")
    for _ in range(8):
        group = _random_group(rng)
        n = group.ranks
        grads = [[g.double().numpy() for g in collectives.rs_grads(group, q, cpu)] for q in range(n)]
        for rank in range(n):
            parts = []
            for p, shape in enumerate(group.shapes):
                rows_per_rank = -(-shape[0] // n)
                row_elems = int(np.prod(shape[1:], dtype=np.int64))
                total = sum(grads[q][p].reshape(shape[0], row_elems) for q in range(n)) / n
                padded = np.zeros((rows_per_rank * n, row_elems))
                padded[:shape[0]] = total
                parts.append(padded[rank * rows_per_rank:(rank + 1) * rows_per_rank].reshape(-1))
            want = np.concatenate(parts)
            got = collectives.rs_reference(group, rank, cpu).numpy()
            assert got.dtype == np.float64 and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-15)
        # The gradients differ between ranks, so a rank's average is no single rank's rows.
        if n > 1:
            assert not np.array_equal(grads[0][0], grads[1][0])


def test_stock_rows_and_ranks_use_different_inputs():
    """ag_shard and rs_grads seed by rank: were two ranks' inputs equal, a collective that
    copied one rank's data everywhere would count no #wrong."""
    cpu = torch.device("cpu")
    group = Group("g", [(6, 5), (3,)], 3)
    shards = [collectives.ag_shard(group, r, cpu) for r in range(3)]
    assert all(not torch.equal(shards[a], shards[b]) for a in range(3) for b in range(a + 1, 3))
    grads = [torch.cat([g.flatten() for g in collectives.rs_grads(group, r, cpu)]) for r in range(3)]
    assert all(not torch.equal(grads[a], grads[b]) for a in range(3) for b in range(a + 1, 3))
    assert float(collectives.rs_reference(group, 0, cpu).abs().sum()) > 0.0


class _FakeTideContext:
    """What tide_systems reads of a TideContext, for the topologies of `ranks` GPUs, with the
    communicators the context makes: the one-node one without copy graphs, and across nodes the
    push and net-landing ones and, where asked (L = 1), the rail lane's."""

    def __init__(self, ranks: int, lane: bool):
        from tide.bench.topologies import node_splits

        self.topologies = node_splits(ranks)
        self.comms, self.own_node_ctas = {}, {}
        for m, l in self.topologies:
            self.comms[(m, l)] = object()
            if m == 1 and ranks > 1:
                self.comms[(m, l, "no-graphs")] = object()
            if m > 1:
                self.comms[(m, l, "push")] = self.comms[(m, l, "net-landing")] = object()
                self.own_node_ctas[(m, l)] = 2 * m
                if lane and l == 1:
                    self.comms[(m, l, "lane")] = object()


@pytest.mark.parametrize("ranks", [1, 2, 4, 8])
def test_rail_lane_rows_only_on_one_gpu_per_node(ranks):
    """tide_ag_M{M}L1_lane and tide_rs_M{M}L1_lane (tide_rs_M2L1_lane on two GPUs) are listed only for
    the L = 1 topology across nodes, each right after its collective's row of that topology (the
    reduce-scatter's after its other variants), on the Llama group only; every other row keeps
    its name and place (the list without the lane's communicator)."""
    with_lane = [s for s in collectives.tide_systems(_FakeTideContext(ranks, lane=True))]
    without = [s.name for s in collectives.tide_systems(_FakeTideContext(ranks, lane=False))]
    names = [s.name for s in with_lane]
    lanes = [s for s in with_lane if s.name.endswith("_lane")]
    if ranks == 1:
        assert lanes == [] and names == without
        return
    ag, rs = lanes
    assert (ag.name, rs.name) == (f"tide_ag_M{ranks}L1_lane", f"tide_rs_M{ranks}L1_lane")
    assert collectives.lane_row_name((ranks, 1)) == rs.name
    assert (ag.op, rs.op) == ("ag", "rs") and ag.llama_only and rs.llama_only
    assert [n for n in names if not n.endswith("_lane")] == without
    if ranks == 2:
        assert "tide_rs_M2L1_lane" in names and "tide_rs_M2L1" in without
    assert names[names.index(ag.name) - 1] == f"tide_ag_M{ranks}L1", names
    assert names[names.index(rs.name) - 1] == f"tide_rs_M{ranks}L1_netlanding", names


def test_rail_lane_registration_refused_leaves_its_row_out(rng, monkeypatch):
    """A registration that refuses the lane's group (the same on every rank): the context closes
    the lane's communicator, says why in `skipped`, and lists no lane row; the other rows stay."""
    from tide._capi import Result, TideError

    monkeypatch.setattr(collectives.dist, "get_rank", lambda: 0)  # log() prints on rank 0
    m = rng.choice([2, 4, 8])
    ctx = _FakeTideContext(m, lane=False)
    closed, asked, landings = [], [], []

    class Comm:
        def close(self):
            closed.append(True)

    message = f"arena of {rng.randrange(10**6)} bytes is too small"

    def refuse(topo, name, env, landing_bytes=0, **plan_options):
        asked.append((topo, name, env, plan_options))
        landings.append(landing_bytes)
        ctx.comms[(*topo, name)] = Comm()  # made before the registration refused the plan
        raise TideError(Result.INVALID_ARGUMENT, "invalid_usage", message)

    ctx._llama_rs_variant = refuse
    ctx.groups = {g.name: g for g in groups_for("rs", m)}
    ctx.skipped, ctx.lane_plans = [], {}
    collectives.TideContext._rail_lane_variant(ctx, (m, 1))
    group = ctx.groups["llama3.1-8b-layer"]
    assert asked == [((m, 1), "lane", {}, {"rail_lane": True})]
    assert landings == [group.ranks * group.shard_elems * 2]  # for the all-gather's lane row
    assert closed == [True] and (m, 1, "lane") not in ctx.comms and ctx.lane_plans == {}
    assert len(ctx.skipped) == 1 and ctx.skipped[0].what == f"tide_rs_M{m}L1_lane" and message in ctx.skipped[0].why
    assert not ctx.skipped[0].past_deadline
    names = [s.name for s in collectives.tide_systems(ctx)]
    assert not any(n.endswith("_lane") for n in names) and f"tide_rs_M{m}L1_netlanding" in names, names


# ------------------------------------------------------------------ issue 4's targets


def _target_rows(times: dict[str, float], group: str = "llama3.1-8b-layer", wrong: tuple = ()) -> list[dict]:
    return [{"system": s, "group": group, "time_us": us, "wrong": 3 if s in wrong else 0} for s, us in times.items()]


def test_issue4_targets_come_from_the_fixed_rows_on_both_sides_of_each_limit():
    """Each target from its own rows (tide_ag, tide_rs and their baselines on the Llama group), recomputed
    here; a value just inside its limit meets it, just outside misses; another group's rows and other TIDE
    variants (a faster tide_rs_ctas4) never stand in."""
    rng = random.Random()
    stock_ag, stock_rs = rng.uniform(500, 2000), rng.uniform(1000, 4000)
    for inside in (True, False):
        eps = -1e-3 if inside else 1e-3
        ag = stock_ag * (0.55 + eps)
        ce = ag / (0.8 + eps)  # tide_ag / nccl_ce_ag = 0.8 + eps
        ceiling = ag * (0.9 - eps)  # ce_peer_write / tide_ag = 0.9 - eps
        rs = stock_rs * (0.35 + eps)
        rows = _target_rows({"tide_ag": ag, "stock_ag": stock_ag, "nccl_ce_ag": ce, "ce_peer_write": ceiling,
                             "tide_rs": rs, "stock_rs": stock_rs, "tide_rs_ctas4": rs / 10})
        rows += _target_rows({"tide_ag": 1.0, "tide_rs": 1.0}, group="32MiB-P16")
        interference = [{"system": "tide_ag", "group": "llama3.1-8b-layer", "slowdown_pct": 2.0 + 100 * eps,
                         "overlapped": 40},
                        {"system": "tide_rs", "group": "llama3.1-8b-layer", "slowdown_pct": 5.0 + 100 * eps,
                         "overlapped": 40},
                        {"system": "tide_rs_ctas4", "group": "llama3.1-8b-layer", "slowdown_pct": 0.0,
                         "overlapped": 40}]
        staging = [{"topology": [2, 1], "group": "llama3.1-8b-layer", "ratio_to_NS": 0.0},
                   {"topology": [1, 2], "group": "llama3.1-8b-layer", "ratio_to_NS": 0.6 + eps}]
        got = collectives.issue4_targets(rows, interference, staging)
        want = {"ag_time_vs_stock": ag / stock_ag, "ag_time_vs_nccl_ce_with_copy_out": ag / ce,
                "ag_share_of_ce_ceiling": ceiling / ag, "rs_time_vs_stock": rs / stock_rs,
                "gemm_slowdown_pct_during_ag": 2.0 + 100 * eps, "gemm_slowdown_pct_during_rs": 5.0 + 100 * eps,
                "rs_staging_vs_NS": 0.6 + eps}
        assert set(got) == set(want)
        for name, value in want.items():
            assert got[name]["value"] == pytest.approx(value, rel=1e-12), name
            assert got[name]["met"] is inside, (name, got[name])


def test_issue4_targets_name_what_is_missing():
    """A row with wrong outputs, an unmeasured baseline, too few overlapped GEMMs: missing, not met."""
    rows = _target_rows({"tide_ag": 100.0, "stock_ag": 400.0, "tide_rs": 50.0, "stock_rs": 400.0},
                        wrong=("tide_rs",))
    interference = [{"system": "tide_ag", "group": "llama3.1-8b-layer", "slowdown_pct": 1.0, "overlapped": 19}]
    got = collectives.issue4_targets(rows, interference, [])
    assert got["ag_time_vs_stock"]["met"] is True
    assert got["ag_time_vs_nccl_ce_with_copy_out"] == {"missing": "nccl_ce_ag not measured"}
    assert got["rs_time_vs_stock"] == {"missing": "tide_rs had wrong outputs"}
    assert "at least 20 overlapped GEMMs" in got["gemm_slowdown_pct_during_ag"]["missing"]
    assert got["rs_staging_vs_NS"] == {"missing": "no one-node staging row"}
    assert all("met" not in v for k, v in got.items() if k != "ag_time_vs_stock")


def test_interleaved_schedule_gives_every_system_its_calls_in_changing_orders():
    rng = random.Random()
    for _ in range(200):
        systems, iters, rounds = rng.randint(1, 12), rng.randint(1, 60), rng.randint(1, 10)
        schedule = interleaved_schedule(systems, iters, rounds)
        used = min(rounds, iters)
        assert len(schedule) == used
        calls = [0] * systems
        for r, blocks in enumerate(schedule):
            order = [i for i, _ in blocks]
            assert sorted(order) == list(range(systems)), (systems, iters, rounds, r)  # each system once a round
            assert order == round_order(systems, r, used)
            for i, n in blocks:
                calls[i] += n
        assert all(c == calls[0] for c in calls)  # the same calls for every system
        assert iters <= calls[0] < iters + used  # at least iters, less than one more per round


def test_interleaved_schedule_refuses_empty_inputs():
    for bad in ((0, 20, 5), (3, 0, 5), (3, 20, 0)):
        with pytest.raises(ValueError, match="want systems, iters and rounds >= 1"):
            interleaved_schedule(*bad)


def test_rs_wrong_elements_counts_against_the_output_scale():
    """NCCL's average scales each input by 1/N before it sums (N = 3 here), so an element whose
    inputs cancel is off its float64 value by the inputs' rounding, not its own: not wrong. A
    dropped contribution, a NaN and an unwritten (poisoned) element are."""
    gen = torch.Generator().manual_seed(random.randrange(1 << 31))
    n = 3
    inputs = torch.randn(n, 1 << 16, generator=gen, dtype=torch.float64).to(torch.bfloat16).float()
    inputs[2, :64] = -(inputs[0, :64] + inputs[1, :64])  # cancels to about zero
    ref = inputs.double().sum(0) / n
    premultiplied = (inputs * torch.tensor(1.0 / n, dtype=torch.float32)).sum(0)  # fp32, as NCCL's AVG
    relative_each = (~((premultiplied.double() - ref).abs() <= 1e-6 * ref.abs() + 1e-12)).sum()
    assert collectives.rs_wrong_elements(premultiplied, ref) == 0, f"{int(relative_each)} flagged per element"
    broken = premultiplied.clone()
    broken[100] = inputs[0, 100] / n  # two ranks' contributions dropped
    broken[200] = float("nan")
    assert collectives.rs_wrong_elements(broken, ref) == 2


@pytest.mark.parametrize("option,value,words", [
    ("--iters", "0", "--iters must be at least 1"),
    ("--rounds", "0", "--rounds must be at least 1"),
    ("--warmup", "-1", "--warmup must be at least 0"),
    ("--gemms", "0", "--gemms must be at least 1"),
    ("--hang-s", "0", "--hang-s must be a positive number of seconds"),
    ("--deadline-s", "nan", "--deadline-s must be a positive number of seconds"),
    ("--topologies", "2x2", "--topologies: topology '2x2' is no split of 1 ranks"),
])
def test_driver_refuses_counts_that_fail_after_setup(option, value, words):
    """Refused before any process group or GPU is touched (they failed after the warm-up, or
    inside faulthandler), so this runs on any machine."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "tide.bench.collectives", option, value],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-500:])
    assert words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr[-500:]


def test_wrong_outputs_and_a_tide_that_could_not_start_fail_the_run(rng):
    """The driver printed #wrong > 0 and exited 0, so a GPU run whose outputs were wrong passed;
    a TIDE with its CUDA fabric that failed to start left the step green with no TIDE rows."""
    g = groups_for("ag", 2)[0]
    clean = [row_for(System("stock_ag", "ag", None), g, 1.0, 0, 3.0),
             row_for(System("tide_ag_M1L2", "ag", None), g, 0.5, 0, 2.0)]
    assert collectives.failed_checks(clean, "") == []
    wrong = rng.randint(1, 1000)
    rows = clean + [row_for(System("nccl_ce_ag", "ag", None), g, 0.7, wrong, 1.0)]
    assert collectives.failed_checks(rows, "") == [f"nccl_ce_ag/{g.name}: #wrong {wrong}"]
    assert collectives.failed_checks(clean, "no NCCL") == ["no NCCL"]


def test_a_target_baseline_that_did_not_run_fails_the_run_unless_the_deadline_cut_it():
    """Without the native helper the NCCL copy-engine all-gather and the copy-engine ceiling had
    no rows, the skip list said nothing, and the run exited 0: the targets that divide by them
    read "missing" in a green step."""
    ag, rs = groups_for("ag", 2)[0], groups_for("rs", 2)[0]
    assert ag.name == rs.name == collectives.TARGET_GROUP
    full = [row_for(System(n, "ag", None), ag, 1.0, 0, 1.0) for n in ("stock_ag", "nccl_ce_ag", "ce_peer_write")]
    full.append(row_for(System("stock_rs", "rs", None), rs, 1.0, 0, 1.0))
    assert collectives.missing_baselines(full, [], 2) == []
    no_helper = [r for r in full if r["system"] not in ("nccl_ce_ag", "ce_peer_write")]
    skipped = [Skip(f"nccl_ce_ag/{ag.name}", "no native helper (x)"),
               Skip(f"ce_peer_write/{ag.name}", "needs two ranks (y)")]
    got = collectives.missing_baselines(no_helper, skipped, 2)
    assert got == [f"baseline ce_peer_write/{ag.name} not measured: needs two ranks (y) (--allow-missing-baselines "
                   "accepts it)",
                   f"baseline nccl_ce_ag/{ag.name} not measured: no native helper (x) (--allow-missing-baselines "
                   "accepts it)"]
    assert collectives.failed_checks(no_helper, "", got) == got
    # One rank: the ceiling (a peer write) cannot exist, and is not asked for.
    assert [m.split()[1] for m in collectives.missing_baselines(no_helper, [], 1)] == [f"nccl_ce_ag/{ag.name}"]
    # Cut by the deadline: logged as such, not a missing baseline.
    late = [Skip(f"stock_rs/{rs.name}", "past --deadline-s 330", past_deadline=True)]
    assert collectives.missing_baselines([r for r in full if r["system"] != "stock_rs"], late, 2) == []
    # A reason that merely mentions the deadline is no cut (the old string match took it for one).
    odd = [Skip(f"stock_rs/{rs.name}", "NCCL init ran past --deadline-s of its own")]
    assert collectives.missing_baselines([r for r in full if r["system"] != "stock_rs"], odd, 2) == [
        f"baseline stock_rs/{rs.name} not measured: NCCL init ran past --deadline-s of its own "
        "(--allow-missing-baselines accepts it)"]
    # A skip of the footprint or interference measurement of a baseline is not its row's skip.
    other_what = [Skip(f"footprint stock_rs/{rs.name}", "past --deadline-s 330", past_deadline=True)]
    assert [m.split()[1] for m in collectives.missing_baselines(
        [r for r in full if r["system"] != "stock_rs"], other_what, 2)] == [f"stock_rs/{rs.name}"]
    # A row on another group does not stand in for the target group's.
    other = groups_for("ag", 2)[1]
    moved = [row_for(System("stock_ag", "ag", None), other, 1.0, 0, 1.0)] + full[1:]
    assert collectives.missing_baselines(moved, [], 2) == [
        f"baseline stock_ag/{ag.name} not measured: no row (--allow-missing-baselines accepts it)"]
