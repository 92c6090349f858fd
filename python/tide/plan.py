"""Plans from Python: shapes and options in, the plan's JSON summary out.

The C library computes everything (layout, schedules, validation, memory
model, sizing solver); this module only turns Python values into a
tidePlanConfig_t and parses the JSON the library prints.
"""

from __future__ import annotations

import ctypes
import json
import math
import numbers
import operator
from collections.abc import Mapping, Sequence
from typing import Any

from tide import _capi

DTYPES = {"bf16": _capi.DataType.BF16, "fp32": _capi.DataType.FP32}
MODES = {"in-place": _capi.Mode.IN_PLACE, "slot-reuse": _capi.Mode.SLOT_REUSE}
LANDINGS = {"pull": _capi.Landing.PULL, "push": _capi.Landing.PUSH}

# Calibration keys (user units) -> (tideCalibration_t field, factor to SI units).
# GB/s means 1e9 bytes/s.
CALIBRATION_KEYS = {
    "nic_gbps": ("nicBw", 1e9),
    "sum_gbps_per_cta": ("sumBwPerCta", 1e9),
    "land_gbps_per_cta": ("landBwPerCta", 1e9),
    "land_cap_gbps": ("landCap", 1e9),
    "round_wait_ms": ("roundWait", 1e-3),
}
# Optional: node-local copy-engine rate, which single-node Level 1 must keep pace with.
OPTIONAL_CALIBRATION_KEYS = {"fabric_gbps": ("fabricBw", 1e9)}

PARAM_KEYS = ("name", "shape", "dtype")


class PlanInputError(ValueError):
    """Malformed Python input, caught before the library sees it."""

# C integer fields' ranges (c_integer).
INT32 = (-2**31, 2**31 - 1)
INT64 = (-2**63, 2**63 - 1)
UINT64 = (0, 2**64 - 1)


def make_plan(shapes: Sequence[Sequence[int] | Mapping[str, Any]], **options: Any) -> dict:
    """Plan one FSDP2 parameter group on `nodes` x `gpus_per_node` GPUs.

    shapes: parameter shapes (lists of ints) or {"name", "shape", "dtype"}
        dicts; a shape without a dtype takes `dtype`.
    grad_dtype: gradient (reduce-scatter input) dtype; default: the
        parameters' dtype.
    wave_width, round_width, sum_ctas, landing_ctas: 0 lets the library pick
        (wave width L; the sizing solver for the rest).
    landing: "pull" (default) or "push", the Level 2 landing direction across
        nodes (one direction per communicator).
    rail_lane: True puts both collectives of a group with one GPU per node
        across nodes on the paper's rail lane (App. F: no all-gather receive
        stage, no reduce-scatter staging, the same bytes and bits); ignored
        elsewhere (the plan's all_gather.rail_lane and reduce_scatter.rail_lane
        say whether it applies). Over NCCL host RMA rails, which put only from
        the arena, the reduce-scatter's lane first copies each wave's rows into
        its inbox's other generation.
    calibration: {"nic_gbps", "sum_gbps_per_cta", "land_gbps_per_cta",
        "land_cap_gbps", "round_wait_ms"} and optionally "fabric_gbps"; None
        uses the paper's platform.
    options: build_plan_config's keywords (nodes and gpus_per_node required).

    Returns the plan summary as a dict (see README for its keys). Raises
    TideError when the library refuses the input or the plan (its `reason`
    names why), PlanInputError for malformed Python input.
    """
    config, _keepalive = build_plan_config(shapes, **options)
    handle = _capi.plan_create(config)
    try:
        return json.loads(_capi.plan_get_json(handle))
    finally:
        _capi.plan_destroy(handle)


def scratch_bytes(groups: Sequence[Mapping[str, Any]]) -> int:
    """Arena bytes the collectives' scratch takes for these groups, as the library
    reserves it; each item holds build_plan_config's arguments (shapes=..., nodes=..., ...).
    The groups are one communicator's: at least one, all of one topology (TideError otherwise)."""
    configs, keep = [], []
    groups = list(groups)
    if not groups:
        raise ValueError("scratch_bytes needs at least one group (the groups one communicator will register)")
    for g in groups:
        config, alive = build_plan_config(**g)
        configs.append(config)
        keep.append(alive)
    arr = (_capi.PlanConfig * len(configs))(*configs)
    out = ctypes.c_int64()
    _capi.check(_capi.library().tideScratchBytes(arr, len(configs), ctypes.byref(out)))
    return out.value


def build_plan_config(
    shapes: Sequence[Sequence[int] | Mapping[str, Any]],
    *,
    nodes: int,
    gpus_per_node: int,
    dtype: str = "bf16",
    grad_dtype: str | None = None,
    mode: str = "in-place",
    wave_width: int = 0,
    round_width: int = 0,
    passes: int = 1,
    sum_ctas: int = 0,
    landing_ctas: int = 0,
    landing: str = "pull",
    calibration: Mapping[str, float] | None = None,
    rail_lane: bool = False,
) -> tuple[_capi.PlanConfig, tuple]:
    """A tidePlanConfig_t for make_plan's arguments, and the ctypes objects it
    points into (keep them alive while the config is in use)."""
    params = normalize_params(shapes, default_dtype=dtype)
    if grad_dtype is None:
        grad_dtype = params[0]["dtype"] if params else dtype
    grad = _dtype_code(grad_dtype, "grad_dtype")

    ndims = [len(p["shape"]) for p in params]
    dims = [d for p in params for d in p["shape"]]
    dtypes = [DTYPES[p["dtype"]] for p in params]
    # Keep the arrays alive until the call returns; ctypes wants at least one element.
    ndims_arr = (ctypes.c_int * max(1, len(ndims)))(*ndims)
    dims_arr = (ctypes.c_int64 * max(1, len(dims)))(*dims)
    dtypes_arr = (ctypes.c_int * max(1, len(dtypes)))(*dtypes)

    config = _capi.PlanConfig(
        nodes=_c_int(nodes, "nodes"),
        gpusPerNode=_c_int(gpus_per_node, "gpus_per_node"),
        numParams=len(params),
        ndims=ndims_arr,
        dims=dims_arr,
        dtypes=dtypes_arr,
        gradDtype=grad,
        mode=_mode_code(mode),
        waveWidth=_c_int(wave_width, "wave_width"),
        roundWidth=_c_int(round_width, "round_width"),
        passes=_c_int(passes, "passes"),
        sumCtas=_c_int(sum_ctas, "sum_ctas"),
        landingCtas=_c_int(landing_ctas, "landing_ctas"),
        landing=_landing_code(landing),
        railLane=_bool_flag(rail_lane, "rail_lane"),
    )
    cal = None
    if calibration is not None:
        cal = to_c_calibration(calibration)
        config.calibration = ctypes.pointer(cal)

    return config, (ndims_arr, dims_arr, dtypes_arr, cal)

def normalize_params(
    shapes: Sequence[Sequence[int] | Mapping[str, Any]], *, default_dtype: str = "bf16"
) -> list[dict]:
    """[{"name", "shape", "dtype"}] from shapes or parameter dicts.

    Checks types only; the contract (non-empty group, at most 256 parameters,
    one dtype, no 0-d or empty tensors) is the library's to judge, so that
    its reason names reach the caller.
    """
    _dtype_code(default_dtype, "dtype")
    if isinstance(shapes, (str, bytes)) or not isinstance(shapes, Sequence):
        raise PlanInputError("shapes must be a list of shapes or of {name, shape, dtype} objects")
    params = []
    for index, entry in enumerate(shapes):
        if isinstance(entry, Mapping):
            unknown = sorted(set(entry) - set(PARAM_KEYS))
            if unknown:
                raise PlanInputError(
                    f"parameter {index}: unknown keys {unknown} (allowed: {list(PARAM_KEYS)})")
            if "shape" not in entry:
                raise PlanInputError(f"parameter {index}: missing 'shape'")
            name = str(entry.get("name", f"param{index}"))
            shape = _shape(entry["shape"], name)
            dtype = entry.get("dtype", default_dtype)
            _dtype_code(dtype, f"{name}: dtype")
        else:
            name = f"param{index}"
            shape = _shape(entry, name)
            dtype = default_dtype
        params.append({"name": name, "shape": shape, "dtype": dtype})
    return params


def to_c_calibration(calibration: Mapping[str, float]) -> _capi.Calibration:
    """tideCalibration_t (bytes/s, seconds) from the user-unit dict."""
    if not isinstance(calibration, Mapping):
        raise PlanInputError("calibration must be a mapping")
    unknown = sorted(set(calibration) - set(CALIBRATION_KEYS) - set(OPTIONAL_CALIBRATION_KEYS))
    missing = sorted(set(CALIBRATION_KEYS) - set(calibration))
    if unknown or missing:
        parts = []
        if unknown:
            parts.append(f"unknown keys {unknown}")
        if missing:
            parts.append(f"missing keys {missing}")
        raise PlanInputError(f"calibration: {', '.join(parts)} (expected: {sorted(CALIBRATION_KEYS)})")
    fields = {}
    for key, (field, scale) in {**CALIBRATION_KEYS, **OPTIONAL_CALIBRATION_KEYS}.items():
        if key not in calibration:
            continue
        value = calibration[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise PlanInputError(f"calibration: {key} must be a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        scaled = number * scale  # in the library's units: a value finite as given may overflow here
        if not math.isfinite(scaled):
            raise PlanInputError(f"calibration: {key} must be finite (within range), got {value!r}")
        if key in OPTIONAL_CALIBRATION_KEYS and number <= 0:  # the library reads 0 as "not given"
            raise PlanInputError(f"calibration: {key} must be > 0 (leave it out for the default), got {value!r}")
        fields[field] = scaled
    return _capi.Calibration(**fields)


# ------------------------------------------------------------------ helpers

def _integer(value: Any, error: str) -> int:
    """value as an int (bools and non-integers refused with `error`)."""
    if isinstance(value, bool):
        raise PlanInputError(error)
    try:
        return operator.index(value)
    except TypeError:
        raise PlanInputError(error) from None


def _shape(raw: Any, name: str) -> list[int]:
    not_ints = f"{name}: shape must be a list of integers, got {raw!r}"
    if isinstance(raw, (str, bytes, Mapping)) or not isinstance(raw, Sequence):
        raise PlanInputError(not_ints)
    shape = []
    for dim in raw:
        dim = _integer(dim, not_ints)
        if dim < 0 or dim > INT64[1]:
            raise PlanInputError(f"{name}: dimension {dim} out of range")
        shape.append(dim)
    return shape


def _c_int(value: Any, what: str) -> int:
    return c_integer(value, what, *INT32)


def c_integer(value: Any, what: str, lo: int, hi: int) -> int:
    """value as an int within [lo, hi] (a C field's range), else PlanInputError: ctypes would
    silently keep only the low bits of a larger number."""
    value = _integer(value, f"{what} must be an integer, got {value!r}")
    if not lo <= value <= hi:
        raise PlanInputError(f"{what} = {value} out of range {lo}..{hi}")
    return value


def c_real(value: Any, what: str) -> float:
    """A real number argument (seconds, a scale) as a float, refused by name when it is a bool
    (True would mean 1), not a number at all (TypeError), or an int past float's range (ValueError)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a real number, got {value!r}")
    try:
        return float(value)
    except OverflowError:  # out of range, as an infinity is
        raise ValueError(f"{what} {value!r} is out of range") from None


def _dtype_code(name: Any, what: str) -> _capi.DataType:
    if not isinstance(name, str) or name not in DTYPES:
        raise PlanInputError(f"{what}: unsupported dtype {name!r} (expected one of {sorted(DTYPES)})")
    return DTYPES[name]


def _bool_flag(value: Any, what: str) -> int:
    # Only a real bool: "false" or 2 would read as on.
    if not isinstance(value, bool):
        raise PlanInputError(f"{what} must be True or False, got {value!r}")
    return int(value)


def _landing_code(name: Any) -> _capi.Landing:
    if not isinstance(name, str) or name not in LANDINGS:
        raise PlanInputError(f"landing: unknown landing {name!r} (expected one of {sorted(LANDINGS)})")
    return LANDINGS[name]


def _mode_code(name: Any) -> _capi.Mode:
    if not isinstance(name, str) or name not in MODES:
        raise PlanInputError(f"mode: unknown mode {name!r} (expected one of {sorted(MODES)})")
    return MODES[name]
