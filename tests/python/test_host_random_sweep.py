"""Random draws of everything `tide bench --fabric host` takes at once: topology, group shapes and
dtypes, gradient dtype, memory mode, passes, wave and round widths, CTA budgets, the platform
calibration the sizing solver plans for, landing direction, rail kind and input class. Every draw
either runs with both collectives checked against the independent references inside the library,
or is refused as a plan (never a failure inside the run). A sweep
like this found Slot-Reuse's within-wave outbox reuse at narrow rounds ("a send before its read",
M4L3 at round width 1); the fixed draws below keep that case in every run."""

from __future__ import annotations

import math

import pytest

from tide import _capi, host_bench
from tide.plan import PlanInputError, make_plan

DRAWS = 40
MAX_ELEMS = 60_000  # per group: keeps a draw of up to 32 CPU ranks on two cores to a second or two
CALIBRATION_RANGES = {"nic_gbps": (1, 400), "sum_gbps_per_cta": (1, 100), "land_gbps_per_cta": (1, 100),
                      "land_cap_gbps": (10, 3000), "round_wait_ms": (0.001, 2), "fabric_gbps": (10, 900)}


def _draw(rng) -> dict:
    while True:
        m = rng.choice([1, 2, 3, 4, 5, 8])
        l = rng.choice([1, 2, 3, 4]) if m > 4 else rng.choice([1, 2, 3, 4, 8])
        dtype = rng.choice(["bf16", "fp32"])
        params = [{"shape": [rng.choice([1, 2, 3, 7, 8, 31, 64, 100, 257]) for _ in range(rng.choice([1, 2, 3]))],
                   "dtype": dtype} for _ in range(rng.choice([1, 2, 3, 5, 9]))]
        if sum(math.prod(p["shape"]) for p in params) > MAX_ELEMS:
            continue
        opts = {"mode": rng.choice(["in-place", "slot-reuse"]), "passes": rng.choice([1, 2, 3]),
                "landing": rng.choice(["pull", "push"]), "wave_width": rng.choice([0, 0, 1, 2, 3]),
                "round_width": rng.choice([0, 0, 1, 2]), "sum_ctas": rng.choice([0, 0, 1, 3]),
                "landing_ctas": rng.choice([0, 0, 1, 2])}
        if rng.random() < 0.3:
            opts["grad_dtype"] = rng.choice(["bf16", "fp32"])
        if rng.random() < 0.3:  # another platform: the sizing solver picks other rounds, slots and CTAs
            opts["calibration"] = {key: math.exp(rng.uniform(math.log(lo), math.log(hi)))
                                   for key, (lo, hi) in CALIBRATION_RANGES.items()}
        rails = rng.choice(host_bench.RAILS)
        # App. F's rail lane: ignored unless L = 1 across nodes; over every rail kind.
        if rng.random() < 0.3:
            opts["rail_lane"] = True
        return {"m": m, "l": l, "params": params, "opts": opts, "rails": rails,
                "inputs": rng.choice(["normal", "integer", "nonfinite"]), "seed": rng.getrandbits(63)}


def _run(draw: dict) -> dict | None:
    """The report, or None where the plan is refused (a clean rejection, not a failure). Only the
    planning may refuse: a plan made is run, and a refusal then fails the test (it once counted as
    a clean one, so a run-time regression would only have shrunk the sweep)."""
    try:
        make_plan(draw["params"], nodes=draw["m"], gpus_per_node=draw["l"], **draw["opts"])
    except PlanInputError:
        return None
    except _capi.TideError as e:
        if e.result in (_capi.Result.PLAN_REJECTED, _capi.Result.INVALID_ARGUMENT):
            return None
        raise
    return host_bench.run_host(draw["params"], nodes=draw["m"], gpus_per_node=draw["l"], iters=2,
                               seed=draw["seed"], inputs=draw["inputs"], rails=draw["rails"], timeout_s=30,
                               **draw["opts"])


def _assert_ok(report: dict, draw: dict) -> None:
    assert report["error"] == "", draw
    assert report["all_gather"]["check"] == "ok", (report["all_gather"], draw)
    assert report["reduce_scatter"]["check"] == "ok", (report["reduce_scatter"], draw)
    lane = draw["opts"].get("rail_lane", False) and draw["m"] > 1 and draw["l"] == 1
    assert report["reduce_scatter"]["rail_lane"] == lane, (report["reduce_scatter"], draw)


def test_random_draws_run_or_are_refused(rng):
    ran = 0
    for _ in range(DRAWS):
        draw = _draw(rng)
        report = _run(draw)
        if report is not None:
            _assert_ok(report, draw)
            ran += 1
    assert ran >= DRAWS // 2, f"only {ran} of {DRAWS} draws made a plan: the sweep tests too little"


@pytest.mark.parametrize("rails", host_bench.RAILS)
def test_slot_reuse_with_rounds_narrower_than_a_wave(rails, rng):
    """M4L3 at round width 1: three rounds per wave, an outbox of two blocks."""
    draw = {"m": 4, "l": 3, "params": [{"shape": [100], "dtype": "bf16"}, {"shape": [31, 7], "dtype": "bf16"}],
            "opts": {"mode": "slot-reuse", "round_width": 1, "passes": 2}, "rails": rails, "inputs": "normal",
            "seed": rng.getrandbits(63)}
    report = _run(draw)
    assert report is not None, "the plan must be made"
    _assert_ok(report, draw)


FAULT_DRAWS = 16


def test_random_faults_that_act_are_detected(rng):
    """Random fault x configuration x misbehaving rank: a fault that acted (`fault_firings` > 0) must
    be detected, by a wrong output or a fabric error; one that never acted (nothing to act on here)
    must leave the outputs right. A sweep like this found two harness bugs (a landing shifted past
    the arena, an early return checked too late) and four faults counted as acting where they
    changed nothing."""
    faults = [f for f in host_bench.fault_names() if f != "call-order"]  # call-order needs two groups
    acted = 0
    for _ in range(FAULT_DRAWS):
        fault = rng.choice(faults)
        m, l = rng.choice([(1, 2), (2, 1), (2, 2), (3, 1), (4, 1), (5, 2), (3, 3)])
        opts = {"mode": rng.choice(["in-place", "slot-reuse"]), "landing": rng.choice(["pull", "push"]),
                "passes": rng.choice([1, 2, 4])}
        if rng.random() < 0.4:
            opts["round_width"] = rng.randint(1, max(1, m - 1))
        shapes = [[rng.randint(1, 90), rng.randint(1, 40)] for _ in range(rng.randint(1, 3))]
        draw = {"fault": fault, "m": m, "l": l, "rank": rng.randrange(m * l), "rails": rng.choice(host_bench.RAILS),
                "shapes": shapes, "opts": opts, "seed": rng.getrandbits(63)}
        try:
            report = host_bench.run_host(shapes, nodes=m, gpus_per_node=l, iters=2, seed=draw["seed"],
                                         timeout_s=1.0, fault=fault, fault_rank=draw["rank"], rails=draw["rails"],
                                         **opts)
        except _capi.TideError as e:
            if e.result == _capi.Result.PLAN_REJECTED:
                continue  # e.g. a round width the topology cannot take: refused cleanly
            raise
        detected = bool(report["error"]) or report["all_gather"]["check"] != "ok" or \
            report["reduce_scatter"]["check"] != "ok"
        if report["fault_firings"] > 0:
            acted += 1
            assert detected, ("acted but not detected", report["fault_firings"], draw)
        else:
            assert not detected, ("never acted, yet the run failed", report, draw)
    assert acted >= FAULT_DRAWS // 3, f"only {acted} of {FAULT_DRAWS} faults acted: the sweep tests too little"
