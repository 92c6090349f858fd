"""`tide bench --fabric host`: both collectives on CPU ranks, checked inside
the library against independent references; injected faults must be caught."""

from __future__ import annotations

import json

import pytest

from cli_runner import run_tide

from tide import make_plan, presets

FAULTS = [
    "drop-credit", "skip-completion-fence", "corrupt-staged-chunk", "stall-peer",
    "skip-stale-zeroing", "reuse-outbox-early", "wrong-landing-offset", "lose-signal",
    "duplicate-put", "release-grads-early",
]
# A topology and mode on which each fault has something to break.
FAULT_SETUP = {
    "drop-credit": ["-M", "2", "-L", "2"],
    "skip-completion-fence": ["-M", "1", "-L", "2"],
    "corrupt-staged-chunk": ["-M", "2", "-L", "2"],
    "stall-peer": ["-M", "2", "-L", "1"],
    "skip-stale-zeroing": ["-M", "5", "-L", "2"],
    "reuse-outbox-early": ["-M", "9", "-L", "2", "--mode", "slot-reuse", "--round-width", "1"],
    "wrong-landing-offset": ["-M", "1", "-L", "2"],
    "lose-signal": ["-M", "2", "-L", "2"],
    "duplicate-put": ["-M", "3", "-L", "1"],
    "release-grads-early": ["-M", "1", "-L", "2"],
}


@pytest.mark.parametrize("topo", [("1", "4"), ("2", "2"), ("3", "2")])
def test_bench_checks_pass(topo, rng):
    seed = str(rng.seed_value)
    r = run_tide("bench", "--fabric", "host", "-M", topo[0], "-L", topo[1], "--preset", "llama-tiny",
                 "--iters", "2", "--seed", seed, "--json")
    assert r.returncode == 0, r.stderr
    report = r.json()
    assert report["all_gather"]["check"] == "ok"
    assert report["reduce_scatter"]["check"] == "ok"
    assert report["reduce_scatter"]["max_rel_err"] <= 1e-5
    assert report["error"] == ""
    ranks = int(topo[0]) * int(topo[1])
    # Every rank's landing receives the whole unsharded group by copy queues.
    assert report["all_gather"]["traffic"]["copy_bytes"] == ranks * report["all_gather"]["bytes"]
    assert (report["all_gather"]["traffic"]["rail_bytes"] > 0) == (int(topo[0]) > 1)
    # nccl-tests' sizes: every rank's output, the landing (bf16) and the fp32 shards.
    plan = make_plan(presets.load("llama-tiny")["params"], nodes=int(topo[0]), gpus_per_node=int(topo[1]))
    assert report["all_gather"]["bytes"] == plan["group"]["unsharded_bytes"]
    assert report["reduce_scatter"]["bytes"] == ranks * plan["group"]["out_bytes"]


def test_text_report_rows_are_nccl_tests_style():
    """The text report's size, time, algbw, busbw and #wrong columns, from a made-up report with
    numbers worked out here: algbw = size / time, busbw = algbw (n - 1) / n (nccl-tests' all-gather
    and reduce-scatter factor)."""
    from tide.host_bench import format_report

    traffic = {"copy_bytes": 3 << 20, "rail_bytes": 1 << 20}
    report = {"topology": {"nodes": 2, "gpus_per_node": 4, "ranks": 8}, "seed": 7, "rails": "one-sided",
              "all_gather": {"check": "ok", "wrong_bytes": 0, "seconds": 0.002, "bytes": 8_000_000, "rounds": 1,
                             "descriptors": 12, "traffic": traffic},
              "reduce_scatter": {"check": "failed", "wrong_elems": 5, "seconds": 0.004, "bytes": 16_000_000,
                                 "rounds": 1, "waves": 2, "level1_descriptors": 9, "staging_bytes": 1 << 20,
                                 "traffic": traffic, "max_rel_err": 0.5}}
    lines = format_report(report, "made up").splitlines()
    header = lines[1].split()
    assert header[:7] == ["collective", "size(B)", "time(us)", "algbw", "busbw", "#wrong", "check"]
    ag, rs = (dict(zip(header, line.split())) for line in lines[2:4])
    # 8e6 B in 2 ms: 4 GB/s, bus 4 * 7/8; 16e6 B in 4 ms: 4 GB/s too.
    assert (ag["collective"], ag["size(B)"], ag["time(us)"], ag["algbw"], ag["busbw"], ag["#wrong"], ag["check"]) \
        == ("all_gather", "8000000", "2000.0", "4.00", "3.50", "0", "ok")
    assert (rs["collective"], rs["size(B)"], rs["time(us)"], rs["algbw"], rs["busbw"], rs["#wrong"], rs["check"]) \
        == ("reduce_scatter", "16000000", "4000.0", "4.00", "3.50", "5", "failed")


@pytest.mark.parametrize("inputs", ["integer", "nonfinite"])
def test_bench_input_kinds(inputs, rng):
    """--inputs reaches the run: integer sums are checked exactly (and come out exact), NaN and
    infinities land where the reference puts them."""
    r = run_tide("bench", "--fabric", "host", "-M", "2", "-L", "2", "--preset", "llama-tiny", "--iters", "2",
                 "--seed", str(rng.seed_value), "--inputs", inputs, "--json")
    assert r.returncode == 0, r.stderr
    report = r.json()
    assert report["inputs"] == inputs
    assert report["reduce_scatter"]["exact"] == (inputs == "integer")
    assert report["all_gather"]["check"] == "ok" and report["reduce_scatter"]["check"] == "ok", report
    assert report["reduce_scatter"]["wrong_elems"] == 0
    if inputs == "integer":
        assert report["reduce_scatter"]["max_rel_err"] == 0.0, report["reduce_scatter"]


@pytest.mark.parametrize("topo", [("2", "2"), ("4", "1"), ("3", "2")])
def test_bench_two_sided_rails(topo, rng):
    """The send/recv rail path (every transfer received by its peer) and the RMA
    path (one-sided puts with counted signals and credits) give the one-sided
    run's results: same seed, all checked against the references."""
    seed = str(rng.seed_value)
    reports = {}
    for rails in ("one-sided", "two-sided", "rma"):
        r = run_tide("bench", "--fabric", "host", "-M", topo[0], "-L", topo[1], "--preset", "llama-tiny",
                     "--iters", "2", "--seed", seed, "--rails", rails, "--passes", "2", "--json")
        assert r.returncode == 0, r.stderr
        reports[rails] = r.json()
        assert reports[rails]["rails"] == rails
        assert reports[rails]["error"] == ""
        assert reports[rails]["all_gather"]["check"] == "ok"
        assert reports[rails]["reduce_scatter"]["check"] == "ok"
    # The same bytes cross the rails either way.
    for rails in ("two-sided", "rma"):
        assert reports[rails]["reduce_scatter"]["traffic"]["rail_bytes"] == \
            reports["one-sided"]["reduce_scatter"]["traffic"]["rail_bytes"] > 0


def test_bench_human_output():
    r = run_tide("bench", "--fabric", "host", "-M", "2", "-L", "2", "--preset", "llama-tiny", "--iters", "1")
    assert r.returncode == 0, r.stderr
    assert "all_gather" in r.stdout and "reduce_scatter" in r.stdout and " ok " in r.stdout


def test_list_faults():
    r = run_tide("bench", "--list-faults")
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert set(FAULTS) | {"call-order"} == {line.split()[0] for line in lines}
    assert [line for line in lines if line.startswith("call-order")] == ["call-order  (C++ test only: needs two groups)"]


@pytest.mark.parametrize("fault", FAULTS)
def test_injected_fault_is_detected(fault):
    r = run_tide("bench", "--fabric", "host", *FAULT_SETUP[fault], "--preset",
                 "llama-tiny", "--iters", "2", "--timeout", "1", "--inject", fault)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert f"fault {fault} detected" in r.stderr
    assert f"fault {fault}: acted" in r.stdout and f"fault {fault}: acted 0 time" not in r.stdout, r.stdout


@pytest.mark.parametrize("fault_rank", [1, 2, 3])
def test_early_return_is_detected_on_any_rank(fault_rank):
    """skip-completion-fence on a rank other than 0: its caller returns before its landing is
    written. The harness checks the misbehaving rank's landing first, as its own consumer would
    read it; checked after rank 0's wait (which its late copies hold up), it looked whole."""
    r = run_tide("bench", "--fabric", "host", "-M", "1", "-L", "4", "--preset", "llama-tiny", "--iters", "2",
                 "--timeout", "5", "--inject", "skip-completion-fence", "--fault-rank", str(fault_rank))
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "fault skip-completion-fence detected" in r.stderr


@pytest.mark.parametrize("fault_rank", [0, 2, 4])
def test_wrong_landing_offset_on_any_rank(fault_rank, tmp_path):
    """The last rank's one-byte-off shard once ran past the end of its arena (a heap overrun that
    aborted the process); now it stays inside its own range, is detected as wrong bytes, and the
    host fabric refuses any copy that would run past an arena."""
    shapes = tmp_path / "shapes.json"
    shapes.write_text("[[100, 31]]")
    r = run_tide("bench", "--fabric", "host", "-M", "5", "-L", "1", "--shapes", str(shapes), "--iters", "2",
                 "--timeout", "5", "--inject", "wrong-landing-offset", "--fault-rank", str(fault_rank))
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "fault wrong-landing-offset detected: all_gather failed" in r.stderr


@pytest.mark.parametrize("fault,setup", [("drop-credit", ["-M", "1", "-L", "2"]),
                                         ("duplicate-put", ["-M", "3", "-L", "1", "--rails", "two-sided"])])
def test_fault_with_nothing_to_act_on_is_not_a_miss(fault, setup):
    """drop-credit on one node (no rail rounds), duplicate-put on two-sided rails (each transfer
    received once): the fault never acts, the outputs are right, and the bench says so with exit 2,
    not "NOT detected" (exit 1)."""
    r = run_tide("bench", "--fabric", "host", *setup, "--preset", "llama-tiny", "--iters", "2", "--timeout", "5",
                 "--inject", fault, "--json")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert f"fault {fault} never acted" in r.stderr, r.stderr
    report = json.loads(r.stdout)
    assert report["fault_firings"] == 0 and report["fault"] == fault, report
    assert report["all_gather"]["check"] == "ok" and report["reduce_scatter"]["check"] == "ok", report


@pytest.mark.parametrize("setup,code", [(FAULT_SETUP["reuse-outbox-early"], 1), (["-M", "2", "-L", "2"], 2)])
def test_reuse_outbox_early_over_the_default_five_calls(setup, code):
    """From the third call on, the banks' outbox blocks are ones an earlier call sent: the fault
    once counted skipping their (long met) waits as firings, and the bench said "NOT detected"
    (exit 1) where it acted on nothing. Now: detected where a call refills its own unsent block,
    never acted (exit 2) where none does."""
    r = run_tide("bench", "--fabric", "host", *setup, "--preset", "llama-tiny", "--timeout", "1",
                 "--inject", "reuse-outbox-early")
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    assert "NOT detected" not in r.stderr, r.stderr
    assert ("fault reuse-outbox-early detected" if code == 1 else "never acted") in r.stderr, r.stderr


def test_a_run_that_stops_reports_no_error_figure():
    """A run that stops (here every wait's deadline is a nanosecond) compared no output: its checks
    say "error", not "failed" next to zero wrong elements and an error of 0, and the message
    says the run failed, with the deadline as given and how to give a longer one."""
    r = run_tide("bench", "--fabric", "host", "-M", "2", "-L", "2", "--preset", "llama-tiny", "--timeout", "1e-9",
                 "--json")
    assert r.returncode == 1, (r.returncode, r.stderr)
    report = r.json()
    assert report["error"], report
    assert report["all_gather"]["check"] == report["reduce_scatter"]["check"] == "error", report
    assert "max_rel_err" not in report["reduce_scatter"], report
    assert r.stderr.startswith("tide bench: run failed: "), r.stderr
    assert "timed out after 1e-09 s" in r.stderr, r.stderr
    assert r.stderr.rstrip().endswith("may need a longer --timeout (now 1e-09 s)"), r.stderr
    # With a fault that never acted (drop-credit on one node), the stop is not its detection.
    r = run_tide("bench", "--fabric", "host", "-M", "1", "-L", "2", "--preset", "llama-tiny", "--timeout", "1e-9",
                 "--inject", "drop-credit")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert r.stderr.startswith("tide bench: run failed (the injected fault drop-credit never acted): "), r.stderr


def test_call_order_needs_two_groups():
    r = run_tide("bench", "-M", "2", "-L", "2", "--preset", "llama-tiny", "--inject", "call-order")
    assert r.returncode == 2
    assert "two groups" in r.stderr


def test_bench_bad_input():
    assert run_tide("bench", "-M", "2", "--preset", "llama-tiny").returncode == 2
    assert run_tide("bench", "-M", "2", "-L", "9", "--preset", "llama-tiny").returncode == 2
    assert run_tide("bench", "-M", "2", "-L", "2", "--preset", "llama-tiny", "--inject", "nope").returncode == 2
    # An empty fault name ran with no fault; a fault rank without a fault was ignored.
    r = run_tide("bench", "-M", "2", "-L", "2", "--preset", "llama-tiny", "--inject", "")
    assert r.returncode == 2 and "unknown fault ''" in r.stderr, (r.returncode, r.stderr)
    r = run_tide("bench", "-M", "2", "-L", "2", "--preset", "llama-tiny", "--fault-rank", "3")
    assert r.returncode == 2 and "give --inject too" in r.stderr, (r.returncode, r.stderr)


def test_host_fabric_refuses_cuda_only_options():
    """--gpus, --native, --json-out and --allow-missing-baselines mean nothing to the CPU ranks:
    refused, not ignored."""
    for extra, flag in ((["--gpus", "4"], "--gpus"), (["--native", "/nope.so"], "--native"),
                        (["--json", "--json-out", "x.json"], "--json-out"),
                        (["--allow-missing-baselines"], "--allow-missing-baselines")):
        r = run_tide("bench", "-M", "1", "-L", "2", "--preset", "llama-tiny", *extra)
        assert r.returncode == 2 and flag in r.stderr and "--fabric cuda only" in r.stderr, (extra, r.stderr)


def test_cuda_fabric_json_out_needs_json():
    r = run_tide("bench", "--fabric", "cuda", "--json-out", "x.json")
    assert r.returncode == 2 and "give --json too" in r.stderr, r.stderr


def test_output_that_cannot_be_written_is_one_line():
    """stdout on a full disk: one line and status 1, not a traceback."""
    import subprocess

    from cli_runner import tide_command

    with open("/dev/full", "w") as full:
        proc = subprocess.run(tide_command() + ["plan", "--preset", "llama3.1-8b", "-M", "2", "-L", "8", "--json"],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "cannot write the output" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_cuda_fabric_without_gpu_says_so():
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: tools/gpu_run.sh runs --fabric cuda there")
    r = run_tide("bench", "--fabric", "cuda")
    assert r.returncode == 2
    assert "no CUDA device" in r.stderr


def test_text_report_of_an_infinite_error(rng):
    """A NaN output makes the worst error infinite, which JSON carries as null: the text report
    says inf instead of failing on it."""
    import json

    from tide.host_bench import format_report

    r = run_tide("bench", "--fabric", "host", "-M", "1", "-L", "2", "--preset", "llama-tiny", "--iters", "1",
                 "--seed", str(rng.seed_value), "--json")
    report = r.json()
    report["reduce_scatter"]["max_rel_err"] = json.loads("null")
    assert "max rel err vs float64: inf" in format_report(report, "nan output")


def test_cuda_fabric_refuses_host_only_options():
    """--fabric cuda runs the GPU driver's own groups: options it would drop are an error, not ignored."""
    from cli_runner import run_tide as run

    r = run("bench", "--fabric", "cuda", "--preset", "llama-tiny", "--iters", "7")
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--preset" in r.stderr and "--iters" in r.stderr, r.stderr
    # Every host option counts, the mutually exclusive source among them.
    r = run("bench", "--fabric", "cuda", "--shapes", "x.json", "--rails", "two-sided", "--mode", "slot-reuse",
            "--inputs", "integer", "-M", "2", "--list-faults")
    assert r.returncode == 2, (r.returncode, r.stderr)
    for option in ("--shapes", "--rails", "--mode", "--inputs", "--nodes", "--list-faults"):
        assert option in r.stderr, (option, r.stderr)
    r = run("bench", "--fabric", "cuda", "--gpus", "0")
    assert r.returncode == 2 and "--gpus" in r.stderr, r.stderr
    # Given with the host fabric's default value, an option is still given (it was let through).
    r = run("bench", "--fabric", "cuda", "--mode", "in-place", "--iters", "5", "--fault-rank", "0")
    assert r.returncode == 2, (r.returncode, r.stderr)
    for option in ("--mode", "--iters", "--fault-rank"):
        assert option in r.stderr, (option, r.stderr)


def test_a_fault_needs_two_iterations():
    """A credit dropped in the only call starves nothing: --iters 1 reported it "NOT detected",
    a false miss. Faults are injected over at least two calls, and one is refused with why."""
    r = run_tide("bench", "--fabric", "host", "-M", "2", "-L", "1", "--preset", "llama-tiny", "--iters", "1",
                 "--timeout", "1", "--inject", "drop-credit")
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "at least 2 iterations" in r.stderr, r.stderr
    assert "NOT detected" not in r.stdout + r.stderr


def test_running_out_of_host_memory_says_so():
    """Ranks whose arenas do not fit in the memory the process may use: the error once said only
    "internal error: std::bad_alloc"; it now names what ran out."""
    import resource
    import subprocess

    from cli_runner import tide_command

    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (1500 << 20, 1500 << 20))

    proc = subprocess.run([*tide_command(), "bench", "--fabric", "host", "--preset", "llama3.1-8b", "-M", "2", "-L",
                           "4", "--iters", "2", "--timeout", "5"], capture_output=True, text=True, timeout=300,
                          preexec_fn=limit_memory)
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "out of host memory" in proc.stderr and "out_of_memory" in proc.stderr, proc.stderr


@pytest.mark.parametrize("rails", ["one-sided", "two-sided", "rma"])
def test_bench_rail_lane(rng, rails):
    """--rail-lane on M x 1: both collectives run on the rail lane (the report says so), checked
    against the float64 reference on fresh random inputs, with less staging than the staged run of
    the same seed, rows sent in the gradient dtype (at most half the bytes of the staged path's
    fp32 blocks for bf16 gradients) and no Level 2 landing; integer inputs come out exact. Over RMA
    rails (puts only from the arena) the reduce-scatter copies exactly the rows it puts into the
    arena first, and nothing elsewhere."""
    nodes = str(rng.randint(2, 4))
    seed = str(rng.seed_value)
    inputs = rng.choice(["normal", "integer"])
    common = ("bench", "--fabric", "host", "-M", nodes, "-L", "1", "--preset", "llama-tiny", "--iters", "2",
              "--seed", seed, "--rails", rails, "--passes", str(rng.randint(1, 3)), "--inputs", inputs, "--json")
    reports = {}
    for lane in (True, False):
        r = run_tide(*common, *(["--rail-lane"] if lane else []))
        assert r.returncode == 0, r.stderr
        reports[lane] = r.json()
        assert reports[lane]["error"] == "", reports[lane]["error"]
        assert reports[lane]["all_gather"]["check"] == "ok" and reports[lane]["reduce_scatter"]["check"] == "ok"
    lane, staged = reports[True]["reduce_scatter"], reports[False]["reduce_scatter"]
    assert lane["rail_lane"] is True and staged["rail_lane"] is False
    # The all-gather's lane: no receive stage to scatter, so fewer copied bytes, the same rail bytes.
    ag_lane, ag_staged = reports[True]["all_gather"], reports[False]["all_gather"]
    assert ag_lane["rail_lane"] is True and ag_staged["rail_lane"] is False
    assert ag_lane["traffic"]["rail_bytes"] == ag_staged["traffic"]["rail_bytes"], (ag_lane, ag_staged)
    assert ag_lane["traffic"]["copy_bytes"] < ag_staged["traffic"]["copy_bytes"], (ag_lane, ag_staged)
    assert lane["staging_bytes"] < staged["staging_bytes"], (lane, staged)
    assert lane["traffic"]["land_elems"] == 0 < staged["traffic"]["land_elems"], (lane, staged)
    packed = lane["traffic"]["rail_bytes"] if rails == "rma" else 0
    assert lane["traffic"]["copy_bytes"] == packed, (rails, lane)
    # bf16 rows where they are against whole fp32 blocks (their padding too).
    assert 0 < 2 * lane["traffic"]["rail_bytes"] <= staged["traffic"]["rail_bytes"], (lane, staged)
    if inputs == "integer":
        assert lane["exact"] and lane["max_rel_err"] == 0.0, lane
    text = run_tide(*common[:-1], "--rail-lane")
    assert text.returncode == 0 and "both collectives on the rail lane" in text.stdout.splitlines()[0], text.stdout
    # Ignored where it does not apply (L > 1): the same staged run, and the report says so.
    r = run_tide("bench", "--fabric", "host", "-M", "2", "-L", "2", "--preset", "llama-tiny", "--iters", "1",
                 "--seed", seed, "--rail-lane", "--json")
    assert r.returncode == 0 and r.json()["reduce_scatter"]["rail_lane"] is False, r.stderr


def test_bench_rail_lane_refused_on_the_cuda_fabric():
    """The GPU driver runs its own lane rows: --rail-lane with --fabric cuda is bad input (status 2)."""
    r = run_tide("bench", "--fabric", "cuda", "--rail-lane")  # the GPU driver runs its own rows
    assert r.returncode == 2 and "--rail-lane" in r.stderr, r.stderr


def _fake_cuda_driver(monkeypatch, driver):
    """--fabric cuda as far as this machine can take it: torch says one GPU is present and
    `driver(cmd)` stands in for the torchrun subprocess (its return value is the exit code)."""
    import subprocess

    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(subprocess, "call", lambda cmd, env=None: driver(cmd))


def test_cuda_bench_json_of_a_failed_run_is_not_an_old_one(tmp_path, monkeypatch, capsys):
    """A run that ends without rows leaves no file from an earlier run behind, and the CLI says
    it has no rows instead of announcing the file."""
    from tide import cli

    out = tmp_path / "rows.json"
    out.write_text('[{"system": "from an earlier run"}]')
    _fake_cuda_driver(monkeypatch, lambda cmd: 1)
    code = cli.main(["bench", "--fabric", "cuda", "--json", "--json-out", str(out)])
    err = capsys.readouterr()
    assert code == 1
    assert not out.exists(), "an earlier run's rows survived a failed run"
    assert "no rows in" in err.err and "rows as JSON in" not in err.out, err


def _fake_driver_writing_rows(monkeypatch, out, code: int) -> list:
    """A driver that writes rows to `out` and exits with `code`; returns the commands it was given."""
    seen = []

    def driver(cmd):
        seen.append(cmd)
        out.write_text("[]")
        return code

    _fake_cuda_driver(monkeypatch, driver)
    return seen


def test_cuda_bench_json_of_a_finished_run_is_announced(tmp_path, monkeypatch, capsys):
    from tide import cli

    out = tmp_path / "rows.json"
    seen = _fake_driver_writing_rows(monkeypatch, out, 0)
    code = cli.main(["bench", "--fabric", "cuda", "--json", "--json-out", str(out)])
    assert code == 0
    assert seen and seen[0][seen[0].index("--json") + 1] == str(out)
    assert f"rows as JSON in {out}" in capsys.readouterr().out


def test_cuda_bench_rows_of_a_run_that_failed_its_checks_are_announced_with_the_failure(tmp_path, monkeypatch,
                                                                                        capsys):
    """The driver writes its rows before its checks (#wrong, a missing baseline) fail the run: the CLI
    said "no rows" about a file that was there; --allow-missing-baselines reaches the driver."""
    from tide import cli

    out = tmp_path / "rows.json"
    seen = _fake_driver_writing_rows(monkeypatch, out, 1)
    assert cli.main(["bench", "--fabric", "cuda", "--json", "--json-out", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"rows as JSON in {out}" in err and "the run failed (the driver exited with code 1" in err, err
    assert "--allow-missing-baselines" not in seen[0]
    assert cli.main(["bench", "--fabric", "cuda", "--allow-missing-baselines", "--json", "--json-out", str(out)]) == 1
    assert "--allow-missing-baselines" in seen[1]
