"""The `tide plan` command, run as users run it."""

from __future__ import annotations

import json
import math
import re

import pytest

from cli_runner import run_tide, tide_script
from tide import presets

REQUIRED_KEYS = {
    "topology": {"nodes", "gpus_per_node", "ranks"},
    "group": {"params", "dtype", "grad_dtype", "shard_bytes", "unsharded_bytes", "out_bytes",
              "param_layout"},
    "all_gather": {"rounds", "round_slots", "stage_bytes", "scatter_groups", "descriptors_flat",
                   "descriptors"},
    "reduce_scatter": {"mode", "rail_lane", "passes", "waves", "wave_width", "buffer_generations",
                       "round_width", "rounds", "outbox_blocks", "staging_slots", "sub_elems",
                       "block_bytes", "level1_descriptors_flat", "level1_descriptors",
                       "sum_ctas", "landing_ctas", "staging_bytes", "fsdp2_pack_bytes",
                       "nic_seconds"},
    "memory": {"fsdp2_live_ns", "tide_live_ns", "rs_area_ns", "rs_area_in_place_ns",
               "rs_area_slot_reuse_ns", "tide_live_in_place_ns", "tide_live_slot_reuse_ns", "staging_rounding_ns"},
}
PARAM_LAYOUT_KEYS = {"rows", "row_elems", "shard_rows", "shard_bytes", "shard_offset",
                     "out_offset"}

TOPOLOGIES = [(1, 8), (2, 1), (8, 8), (64, 8)]


def assert_bad_input(result, *fragments: str) -> str:
    """Status 2 and exactly one line on stderr that contains every fragment."""
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr_lines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tide"), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert result.stdout == ""
    return lines[0]


def test_console_script_installed():
    assert tide_script() is not None, "the `tide` command is not installed (pip install .)"


@pytest.mark.parametrize("preset", presets.names())
@pytest.mark.parametrize("nodes, gpus", TOPOLOGIES)
def test_preset_json_has_every_key(preset, nodes, gpus):
    result = run_tide("plan", "--preset", preset, "--nodes", nodes, "--gpus-per-node", gpus, "--json")
    assert result.returncode == 0, result.stderr
    plan = result.json()
    for section, keys in REQUIRED_KEYS.items():
        assert keys <= set(plan[section]), (section, keys - set(plan[section]))
    for layout in plan["group"]["param_layout"]:
        assert PARAM_LAYOUT_KEYS <= set(layout)

    ranks = nodes * gpus
    params = presets.params(preset)
    assert plan["topology"] == {"nodes": nodes, "gpus_per_node": gpus, "ranks": ranks}
    assert plan["group"]["params"] == len(params)
    assert plan["group"]["unsharded_bytes"] == ranks * plan["group"]["shard_bytes"]
    # Bruck: ceil(log2 M) rounds, round d carries min(2^d, M - 2^d) slots, M - 1 in all.
    ag = plan["all_gather"]
    rounds = math.ceil(math.log2(nodes)) if nodes > 1 else 0
    assert ag["rounds"] == rounds
    assert ag["round_slots"] == [min(2**d, nodes - 2**d) for d in range(rounds)]
    assert 0 < ag["descriptors"] <= ag["descriptors_flat"]
    rs = plan["reduce_scatter"]
    assert rs["wave_width"] == gpus and rs["passes"] == 1
    assert 0 < rs["level1_descriptors"] <= rs["level1_descriptors_flat"] or gpus == 1
    assert plan["memory"]["fsdp2_live_ns"] == 4.0
    _check_memory_model(plan, nodes, gpus)


def _check_memory_model(plan: dict, m: int, l: int) -> None:
    """The JSON's memory section against Sec. 5.4's Eqs. 10-12 written out here, in units of one
    unsharded group (N S bytes, S in the group's all-gather type; one fp32 shard S_fp32 =
    (4 / item) N S / (M L): 2 N S / (M L) for bf16, as in the paper)."""
    rs, mem = plan["reduce_scatter"], plan["memory"]
    item = {"bf16": 2, "fp32": 4}[plan["group"]["dtype"]]
    grad_item = {"bf16": 2, "fp32": 4}[plan["group"]["grad_dtype"]]
    fp32_shard = 4.0 / item / (m * l)
    multi = m > 1
    # Eq. 10's bf16 staging slot (one node: a row per sender; one GPU per node: none), twice as large
    # for fp32 gradients.
    slot = (((l / 2) if l > 1 else 0) if multi else (l - 1) / (2 * l)) * grad_item / 2
    # The paper's equations are for one pass: each pass's sub-chunk is 1/passes of the shard, and
    # each outbox bank has min(passes, 2) spares.
    passes = rs["passes"]

    def area(outbox_blocks: float) -> float:
        return (slot * rs["staging_slots"] + l * rs["buffer_generations"] + 2 * outbox_blocks
                + (2 * min(passes, 2) if multi else 0)) * fp32_shard / passes

    in_place = area(m - 1 if multi else 0)                        # Eq. 11
    slot_reuse = area(min(2 * rs["round_width"], m - 1) if multi else 0)  # Eq. 12, never past Eq. 11's outbox
    ring = 2 + (1 / l if multi else 0)
    # Slot-Reuse parks gradients in the vacated slot where they fit: wider ones live as In-Place's.
    grads = grad_item / item
    # What the plan stages beyond the closed form (its sub-chunks rounded up to 8 elements).
    rounding = mem["staging_rounding_ns"]
    assert rounding >= 0
    want = {"rs_area_in_place_ns": in_place, "rs_area_slot_reuse_ns": slot_reuse,
            "rs_area_ns": (in_place if rs["mode"] == "in-place" else slot_reuse) + rounding,
            "tide_live_in_place_ns": ring + in_place + grads,
            "tide_live_slot_reuse_ns": ring + slot_reuse + (grads if grads > 1 else 0),
            "fsdp2_live_ns": 2 + 4 / item}
    want["tide_live_ns"] = want["tide_live_in_place_ns" if rs["mode"] == "in-place" else "tide_live_slot_reuse_ns"] \
        + rounding
    ns = plan["group"]["unsharded_bytes"]
    assert rs["staging_bytes"] / ns <= want["rs_area_ns"] * (1 + 1e-12), (rs["staging_bytes"] / ns, want["rs_area_ns"])
    for key, value in want.items():
        assert mem[key] == pytest.approx(value, rel=1e-12), (key, mem[key], value)


def test_the_table_says_what_rounding_adds(tmp_path):
    """A 4096-element bias on 64 x 8 ranks: its sub-chunks round up to 8 elements, so the plan
    stages far more than the closed form; the table's mode value says how much of it is rounding,
    and a group that divides evenly says nothing of the kind."""
    shapes = tmp_path / "bias.json"
    shapes.write_text(json.dumps([{"name": "bias", "shape": [4096], "dtype": "bf16"}]))
    plan = run_tide("plan", "--shapes", shapes, "--nodes", 64, "--gpus-per-node", 8, "--json").json()
    rounding = plan["memory"]["staging_rounding_ns"]
    assert rounding > 1.0, plan["memory"]
    assert plan["memory"]["rs_area_ns"] == pytest.approx(plan["memory"]["rs_area_in_place_ns"] + rounding)
    text = run_tide("plan", "--shapes", shapes, "--nodes", 64, "--gpus-per-node", 8).stdout
    assert f"the in-place value adds {rounding:.3f} of rounding" in text, text
    even = run_tide("plan", "--preset", "llama3.1-8b", "--nodes", 8, "--gpus-per-node", 8)
    assert even.returncode == 0 and "rounding" not in even.stdout, even.stdout


def test_default_output_is_a_table():
    result = run_tide("plan", "--preset", "llama3.1-8b", "--nodes", 8, "--gpus-per-node", 8)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    text = result.stdout
    for label in ("llama3.1-8b", "8 x 8 = 64 ranks", "all-gather", "Bruck rounds",
                  "reduce-scatter", "Level-1 descriptors", "sum / landing CTAs",
                  "FSDP2 live", "TIDE live", "RS area"):
        assert label in text, label
    assert "416.02 MiB" in text  # 436,224,000 bytes


@pytest.mark.parametrize("preset", presets.names())
def test_every_preset_prints(preset):
    result = run_tide("plan", "--preset", preset, "-M", 4, "-L", 2, "--mode", "slot-reuse")
    assert result.returncode == 0, result.stderr
    assert "slot-reuse" in result.stdout


def test_shapes_file(tmp_path):
    plain = tmp_path / "plain.json"
    plain.write_text(json.dumps([[4096, 4096], [1024, 4096], [4096]]))
    named = tmp_path / "named.json"
    named.write_text(json.dumps([
        {"name": "q", "shape": [4096, 4096], "dtype": "bf16"},
        {"name": "k", "shape": [1024, 4096], "dtype": "bf16"},
        {"name": "norm", "shape": [4096], "dtype": "bf16"},
    ]))
    preset_style = tmp_path / "preset_style.json"
    preset_style.write_text(json.dumps({"name": "mine", "params": json.loads(named.read_text())}))
    outputs = []
    for path in (plain, named, preset_style):
        result = run_tide("plan", "--shapes", path, "--nodes", 4, "--gpus-per-node", 8, "--json")
        assert result.returncode == 0, result.stderr
        outputs.append(result.json())
    assert outputs[0] == outputs[1] == outputs[2]
    assert outputs[0]["group"]["params"] == 3
    result = run_tide("plan", "--shapes", plain, "--nodes", 4, "--gpus-per-node", 8)
    assert result.returncode == 0 and "plain.json" in result.stdout


def test_shapes_file_name_that_is_not_utf8(tmp_path):
    """A file name the filesystem holds as bytes that are not UTF-8 still heads the table, escaped,
    under a strict UTF-8 output encoding (it used to end in a UnicodeEncodeError traceback)."""
    import os
    import subprocess

    from cli_runner import tide_command

    name = os.fsdecode(b"shapes-\xff.json")
    try:
        (tmp_path / name).write_text(json.dumps([[4096, 4096], [4096]]))
    except (OSError, UnicodeError):
        pytest.skip("this filesystem refuses a non-UTF-8 file name")
    proc = subprocess.run(tide_command() + ["plan", "--shapes", str(tmp_path / name), "-M", "1", "-L", "2"],
                          capture_output=True, env={**os.environ, "PYTHONIOENCODING": "utf-8"}, timeout=120,
                          check=False)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert b"shapes-\\xff.json" in proc.stdout, proc.stdout[:300]


@pytest.mark.parametrize("dtype,grad_dtype,nodes,passes",
                         [("fp32", "bf16", 2, 1), ("fp32", "fp32", 4, 4), ("bf16", "fp32", 1, 3), ("bf16", "bf16", 3, 6)])
def test_dtype_options(dtype, grad_dtype, nodes, passes):
    result = run_tide("plan", "--preset", "llama3.1-8b", "-M", nodes, "-L", 8, "--dtype", dtype,
                      "--grad-dtype", grad_dtype, "--passes", passes, "--json")
    assert result.returncode == 0, result.stderr
    plan = result.json()
    assert (plan["group"]["dtype"], plan["group"]["grad_dtype"]) == (dtype, grad_dtype)
    # NS is the group in its own type: an fp32 group's fp32 terms halve in NS units.
    _check_memory_model(plan, nodes, 8)


def test_knobs_reach_the_plan(tmp_path):
    calibration = tmp_path / "calibration.json"
    calibration.write_text(json.dumps({
        "nic_gbps": 47.5, "sum_gbps_per_cta": 99, "land_gbps_per_cta": 21,
        "land_cap_gbps": 90, "round_wait_ms": 1.3,
    }))
    result = run_tide("plan", "--preset", "llama3.1-70b", "-M", 16, "-L", 8, "--wave-width", 4,
                      "--round-width", 2, "--passes", 2, "--calibration", calibration, "--json")
    assert result.returncode == 0, result.stderr
    rs = result.json()["reduce_scatter"]
    assert (rs["wave_width"], rs["round_width"], rs["passes"]) == (4, 2, 2)


def write_shapes(tmp_path, shapes) -> str:
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(shapes))
    return str(path)


def test_bad_topology():
    assert_bad_input(run_tide("plan", "--preset", "llama3.1-8b", "--nodes", 0, "--gpus-per-node", 8),
                     "bad_topology")
    assert_bad_input(run_tide("plan", "--preset", "llama3.1-8b", "--nodes", 1, "--gpus-per-node", 9),
                     "bad_topology")


def test_unknown_preset():
    assert_bad_input(run_tide("plan", "--preset", "gpt-5", "--nodes", 1, "--gpus-per-node", 8),
                     "gpt-5")


def test_too_many_params(tmp_path):
    path = write_shapes(tmp_path, [[8, 8]] * 257)
    assert_bad_input(run_tide("plan", "--shapes", path, "-M", 1, "-L", 8), "rejected (too_many_params)")


def test_mixed_dtypes(tmp_path):
    path = write_shapes(tmp_path, [{"shape": [8, 8], "dtype": "bf16"},
                                   {"shape": [8], "dtype": "fp32"}])
    assert_bad_input(run_tide("plan", "--shapes", path, "-M", 1, "-L", 8), "rejected (mixed_dtypes)")


def test_zero_dim_shape(tmp_path):
    path = write_shapes(tmp_path, [[8, 8], []])
    assert_bad_input(run_tide("plan", "--shapes", path, "-M", 1, "-L", 8), "rejected (zero_dim_tensor)")


# Short ids: pytest puts the id in the environment of the `tide` process it starts.
@pytest.mark.parametrize("content", ["not json", '{"shapes": [[4]]}', '{"params": [[4]], "parms": [[5]]}',
                                     '[["a"]]', "[[4, -1]]", "[" * 200000, "[[" + "9" * 5000 + "]]"],
                         ids=["text", "object", "object-typo", "string", "negative", "too-deep",
                              "too-many-digits"])
def test_malformed_shapes_file(tmp_path, content):
    path = tmp_path / "shapes.json"
    path.write_text(content)
    assert_bad_input(run_tide("plan", "--shapes", path, "-M", 1, "-L", 8))


def test_endless_files_are_refused_by_size():
    """/dev/zero as the shapes file, /dev/urandom as the calibration: read only up to the cap, then
    refused in one line (they were read whole, until memory ran out)."""
    assert_bad_input(run_tide("plan", "--shapes", "/dev/zero", "-M", 1, "-L", 8), "larger than 16 MiB")
    assert_bad_input(run_tide("plan", "--preset", "llama-tiny", "-M", 1, "-L", 8, "--calibration", "/dev/urandom"),
                     "larger than 16 MiB")


def test_missing_files(tmp_path):
    assert_bad_input(run_tide("plan", "--shapes", tmp_path / "none.json", "-M", 1, "-L", 8),
                     "none.json")
    assert_bad_input(run_tide("plan", "--preset", "llama3.1-8b", "-M", 1, "-L", 8,
                              "--calibration", tmp_path / "none.json"), "none.json")


def test_bad_calibration_file(tmp_path):
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"nic_gbps": 47.5}))
    assert_bad_input(run_tide("plan", "--preset", "llama3.1-8b", "-M", 2, "-L", 8,
                              "--calibration", path), "missing keys")


@pytest.mark.parametrize("key, value", [("round_wait_ms", 10**400), ("nic_gbps", "Infinity"),
                                        ("fabric_gbps", -5), ("fabric_gbps", "NaN")])
def test_calibration_values_must_be_finite_and_positive(tmp_path, key, value):
    """Values JSON can carry but no rate is: a huge integer, infinity, NaN, a negative optional
    rate (which the library would have read as "not given")."""
    calibration = {"nic_gbps": 47.5, "sum_gbps_per_cta": 99, "land_gbps_per_cta": 21, "land_cap_gbps": 90,
                   "round_wait_ms": 1.3}
    path = tmp_path / "calibration.json"
    body = json.dumps(calibration)[:-1] + f', "{key}": ' + (str(value) if not isinstance(value, str) else value) + "}"
    if key in calibration:
        body = body.replace(f'"{key}": {json.dumps(calibration[key])}, ', "")
    path.write_text(body)
    assert_bad_input(run_tide("plan", "--preset", "llama3.1-8b", "-M", 2, "-L", 8, "--calibration", path), key)


def test_numbers_beyond_c_ranges_are_refused():
    """ctypes keeps the low bits of a larger number: --iters 2**32 + 200 once ran 200 iterations."""
    assert_bad_input(run_tide("bench", "--fabric", "host", "--preset", "llama-tiny", "-M", 1, "-L", 2,
                              "--iters", 2**32 + 200), "iters")
    assert_bad_input(run_tide("bench", "--fabric", "host", "--preset", "llama-tiny", "-M", 1, "-L", 2,
                              "--seed", 2**64), "seed")


def test_usage_errors_are_one_line():
    assert_bad_input(run_tide("plan", "--nodes", 1, "--gpus-per-node", 8))  # no group
    assert_bad_input(run_tide("plan", "--preset", "llama3.1-8b", "--gpus-per-node", 8))  # no M
    assert_bad_input(run_tide("plan", "--preset", "llama3.1-8b", "-M", "two", "-L", 8))
    assert_bad_input(run_tide("plan", "--preset", "llama3.1-8b", "-M", 1, "-L", 8, "--mode", "x"))
    assert_bad_input(run_tide())  # no command


def test_colliding_plan_is_rejected():
    """M = 9, L = 8, W_wave = 3 puts two contributors of one wave on one GPU at one offset."""
    result = run_tide("plan", "--preset", "llama3.1-8b", "--nodes", 9, "--gpus-per-node", 8,
                      "--wave-width", 3)
    line = assert_bad_input(result, "tide plan: rejected (plan_collision)")
    assert re.search(r"wave \d+", line), line
    assert re.search(r"contributors? \d+", line), line


@pytest.mark.parametrize("wave_width", [1, 2, 4, 8])
def test_wave_widths_dividing_l_are_accepted(wave_width):
    result = run_tide("plan", "--preset", "llama3.1-8b", "--nodes", 9, "--gpus-per-node", 8,
                      "--wave-width", wave_width, "--json")
    assert result.returncode == 0, result.stderr
    assert result.json()["reduce_scatter"]["wave_width"] == wave_width


def test_a_library_that_is_not_libtide_is_one_line(tmp_path):
    """TIDE_LIBRARY pointing at another library (or a stale build): one line, no traceback."""
    import os
    import subprocess
    import sys

    # The C library this Python process has mapped: a shared library that is surely not libtide.
    with open("/proc/self/maps") as maps:
        libc = next(line.split()[-1] for line in maps if "/libc.so" in line or "/libc-" in line)
    env = dict(os.environ, TIDE_LIBRARY=libc)
    r = subprocess.run([sys.executable, "-m", "tide", "plan", "--preset", "llama-tiny", "-M", "1", "-L", "2"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "lacks a libtide symbol" in lines[0], r.stderr


@pytest.mark.parametrize("key, value", [("sum_gbps_per_cta", 1e-7), ("land_gbps_per_cta", 1e-9), ("nic_gbps", 1e300),
                                        ("nic_gbps", 5e-324)])
def test_calibrations_beyond_any_cta_count_are_refused(tmp_path, key, value):
    """A rate per CTA so low that the solver's CTA count passes INT_MAX was cast to int and came
    out as 1 CTA; a NIC rate finite as given but infinite in bytes/s planned 1 CTA in 0 s; a denormal
    NIC rate made the wire time infinite (JSON null)."""
    calibration = {"nic_gbps": 47.5, "sum_gbps_per_cta": 99, "land_gbps_per_cta": 21, "land_cap_gbps": 90,
                   "round_wait_ms": 1.3, key: value}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(calibration))
    assert_bad_input(run_tide("plan", "--preset", "llama-tiny", "-M", 2, "-L", 8, "--calibration", path),
                     "CTAs" if key != "nic_gbps" else "nic_gbps" if value > 1 else "wire time")


def _table_value(text: str, quantity: str) -> str:
    """The value column of the table row whose quantity is `quantity`."""
    for line in text.splitlines():
        m = re.match(r"^(\S*)\s+" + re.escape(quantity) + r"\s{2,}(.*)$", line)
        if m:
            return m.group(2)
    raise AssertionError(f"no row {quantity!r} in\n{text}")


def test_one_node_has_no_level_2_landing_whatever_was_asked():
    """--landing push on one node: nothing lands across nodes, so the table and the JSON say none
    (they echoed the request, or said pull)."""
    args = ("plan", "--preset", "llama-tiny", "--nodes", 1, "--gpus-per-node", 8, "--landing", "push")
    text = run_tide(*args)
    assert text.returncode == 0, text.stderr
    assert _table_value(text.stdout, "Level-2 landing") == "none (one node: no Level 2)", text.stdout
    rs = run_tide(*args, "--json").json()["reduce_scatter"]
    assert (rs["landing"], rs["push_area_bytes"]) == ("none", 0), rs


def test_rail_lane_flag_llama_on_two_nodes_of_one():
    """The brief's example: Llama-3.1-8B's layer on 2 x 1 at four passes stages 104 MiB (0.25 NS)
    on the rail lane against 832 MiB (2 NS) on the staged path; the table says which path it is."""
    args = ("plan", "--preset", "llama3.1-8b", "--nodes", 2, "--gpus-per-node", 1, "--passes", 4)
    lane, staged = run_tide(*args, "--rail-lane"), run_tide(*args)
    assert lane.returncode == 0 and staged.returncode == 0, (lane.stderr, staged.stderr)
    assert lane.stderr == "" and staged.stderr == ""
    assert _table_value(lane.stdout, "staging + inbox + outbox") == "104.00 MiB (0.250 NS)", lane.stdout
    assert _table_value(staged.stdout, "staging + inbox + outbox") == "832.03 MiB (2.000 NS)", staged.stdout
    assert _table_value(lane.stdout, "rail lane").startswith("yes"), lane.stdout
    assert _table_value(staged.stdout, "rail lane").startswith("no"), staged.stdout
    assert _table_value(lane.stdout, "Level-2 landing") == "none (rail lane: sums from its inbox)", lane.stdout
    assert _table_value(staged.stdout, "Level-2 landing") == "pull", staged.stdout
    assert _table_value(lane.stdout, "outbox blocks") == "0" and _table_value(staged.stdout, "outbox blocks") == "1"
    rs = run_tide(*args, "--rail-lane", "--json").json()["reduce_scatter"]
    assert rs["rail_lane"] is True and rs["staging_bytes"] == 104 * (1 << 20) + 4096, rs


@pytest.mark.parametrize("draw", range(3))
def test_rail_lane_flag_reaches_the_plan(tmp_path, rng, draw):
    """Random groups, gradient dtypes, passes, modes and landings on M x 1 (M > 1): --rail-lane puts
    the group on the lane (no outbox or spares, one inbox block of a row in the gradient dtype per
    generation, no Level 2 landing), and the table says so; without it the same plan is staged.
    On L > 1 or one node the flag is ignored: the same JSON as without it, and the table says the
    lane does not apply."""
    n = rng.randint(1, 12)
    dtype = rng.choice(["bf16", "fp32"])
    shapes = [{"name": f"p{i}", "shape": [rng.randint(1, 3000)] + [rng.randint(1, 300)] * rng.randint(0, 1),
               "dtype": dtype} for i in range(n)]
    path = write_shapes(tmp_path, shapes)
    grad = rng.choice(["bf16", "fp32"]) if dtype == "bf16" else "fp32"
    nodes, passes = rng.randint(2, 16), rng.randint(1, 6)
    knobs = ["--grad-dtype", grad, "--passes", passes, "--mode", rng.choice(["in-place", "slot-reuse"]),
             "--landing", rng.choice(["pull", "push"])]
    lane = run_tide("plan", "--shapes", path, "-M", nodes, "-L", 1, *knobs, "--rail-lane", "--json")
    staged = run_tide("plan", "--shapes", path, "-M", nodes, "-L", 1, *knobs, "--json")
    assert lane.returncode == 0 and staged.returncode == 0, (knobs, lane.stderr, staged.stderr)
    rs, base = lane.json()["reduce_scatter"], staged.json()["reduce_scatter"]
    assert rs["rail_lane"] is True and base["rail_lane"] is False, (rs, base)
    itemsize = {"bf16": 2, "fp32": 4}[grad]
    assert (rs["outbox_blocks"], rs["spare_blocks"], rs["landing"]) == (0, 0, "none"), rs
    assert rs["block_bytes"] == rs["sub_elems"] * itemsize, rs
    assert rs["staging_bytes"] == rs["buffer_generations"] * rs["block_bytes"], rs
    assert rs["staging_bytes"] < base["staging_bytes"], (rs, base)
    assert (rs["passes"], rs["waves"], rs["sub_elems"]) == (base["passes"], base["waves"], base["sub_elems"])
    text = run_tide("plan", "--shapes", path, "-M", nodes, "-L", 1, *knobs, "--rail-lane").stdout
    assert _table_value(text, "rail lane").startswith("yes"), text
    assert _table_value(text, "Level-2 landing") == "none (rail lane: sums from its inbox)", text
    ns = lane.json()["group"]["unsharded_bytes"]
    assert _table_value(text, "staging + inbox + outbox") == \
        f"{rs['staging_bytes'] / (1 << 20):,.2f} MiB ({rs['staging_bytes'] / ns:.3f} NS)", text
    # Where the lane does not apply (L > 1, or one node), the flag changes nothing.
    m, l = rng.choice([(1, rng.randint(1, 8)), (rng.randint(2, 8), rng.randint(2, 8))])
    knobs = ["--grad-dtype", grad, "--passes", passes]
    asked = run_tide("plan", "--shapes", path, "-M", m, "-L", l, *knobs, "--rail-lane", "--json")
    plain = run_tide("plan", "--shapes", path, "-M", m, "-L", l, *knobs, "--json")
    assert asked.returncode == 0 and plain.returncode == 0, (asked.stderr, plain.stderr)
    assert asked.json() == plain.json() and plain.json()["reduce_scatter"]["rail_lane"] is False
    text = run_tide("plan", "--shapes", path, "-M", m, "-L", l, *knobs, "--rail-lane").stdout
    assert _table_value(text, "rail lane") == "no (one GPU per node across nodes only)", text


def test_rail_lane_flag_takes_no_value():
    assert_bad_input(run_tide("plan", "--preset", "llama-tiny", "-M", 2, "-L", 1, "--rail-lane", "yes"),
                     "unrecognized arguments")
