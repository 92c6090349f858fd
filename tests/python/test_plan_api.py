"""tide.make_plan and the ctypes binding: options, calibration, errors."""

from __future__ import annotations

import ctypes
import math

import pytest

from tide import PlanInputError, TideError, make_plan
from tide import _capi

SHAPES = [[4096, 4096], [1024, 4096], [4096]]

PAPER_CALIBRATION = {
    "nic_gbps": 47.5,
    "sum_gbps_per_cta": 99,
    "land_gbps_per_cta": 21,
    "land_cap_gbps": 90,
    "round_wait_ms": 1.3,
}


def test_library_is_loaded():
    assert _capi.library_path()


def test_shapes_and_dicts_give_the_same_plan():
    dicts = [{"name": f"w{i}", "shape": s, "dtype": "bf16"} for i, s in enumerate(SHAPES)]
    assert make_plan(SHAPES, nodes=2, gpus_per_node=4) == make_plan(dicts, nodes=2, gpus_per_node=4)


def test_dtypes():
    plan = make_plan(SHAPES, nodes=2, gpus_per_node=4, dtype="fp32")
    assert plan["group"]["dtype"] == "fp32"
    assert plan["group"]["grad_dtype"] == "fp32"
    plan = make_plan(SHAPES, nodes=2, gpus_per_node=4, grad_dtype="fp32")
    assert (plan["group"]["dtype"], plan["group"]["grad_dtype"]) == ("bf16", "fp32")


def test_options_reach_the_plan():
    plan = make_plan(SHAPES, nodes=16, gpus_per_node=8, mode="slot-reuse", wave_width=4,
                     round_width=2, passes=2)
    rs = plan["reduce_scatter"]
    assert rs["mode"] == "slot-reuse"
    assert rs["wave_width"] == 4
    assert rs["round_width"] == 2
    assert rs["passes"] == 2


def test_paper_calibration_equals_the_default():
    default = make_plan(SHAPES, nodes=8, gpus_per_node=8)
    calibrated = make_plan(SHAPES, nodes=8, gpus_per_node=8, calibration=PAPER_CALIBRATION)
    assert default == calibrated


@pytest.mark.parametrize("fabric_gbps", [40.0, 390.0, 1000.0])
def test_fabric_rate_sizes_the_one_node_sums(fabric_gbps):
    """fabric_gbps reaches the solver in GB/s: on one node the Level 1 sum keeps pace with the
    copy engines' pushes (Eq. 13's one-node form, written out here): per output element the sum
    moves L bf16 items in and 4 bytes out while the pushes carry L - 1 items, so
    sum_ctas = ceil(1.5 * (2L + 4) / (2 (L - 1)) * fabric_gbps / sum_gbps_per_cta)."""
    gpus = 4
    plan = make_plan(SHAPES, nodes=1, gpus_per_node=gpus,
                     calibration={**PAPER_CALIBRATION, "fabric_gbps": fabric_gbps})
    ratio = (2 * gpus + 4) / (2 * (gpus - 1)) * fabric_gbps / PAPER_CALIBRATION["sum_gbps_per_cta"]
    assert plan["reduce_scatter"]["sum_ctas"] == max(1, math.ceil(1.5 * ratio - 1e-9))


def test_calibration_keys_are_checked():
    with pytest.raises(PlanInputError, match="missing keys"):
        make_plan(SHAPES, nodes=2, gpus_per_node=2,
                  calibration={k: v for k, v in PAPER_CALIBRATION.items() if k != "nic_gbps"})
    with pytest.raises(PlanInputError, match="unknown keys"):
        make_plan(SHAPES, nodes=2, gpus_per_node=2, calibration={**PAPER_CALIBRATION, "nic": 1})
    with pytest.raises(PlanInputError, match="must be a number"):
        make_plan(SHAPES, nodes=2, gpus_per_node=2, calibration={**PAPER_CALIBRATION, "nic_gbps": "fast"})


def test_non_positive_calibration_is_refused():
    with pytest.raises(TideError) as info:
        make_plan(SHAPES, nodes=2, gpus_per_node=2, calibration={**PAPER_CALIBRATION, "nic_gbps": 0})
    assert info.value.reason == "bad_calibration"


def _create_through_the_c_api(**calibration) -> tuple[int, str]:
    """tidePlanCreate of one 4096 x 4096 bf16 parameter on 1 x 8 ranks, with the paper's calibration
    but for `calibration`'s fields, bypassing make_plan's own checks: (result, reason)."""
    fields = dict(nicBw=47.5e9, sumBwPerCta=99e9, landBwPerCta=21e9, landCap=90e9, roundWait=1.3e-3, fabricBw=0.0)
    cal = _capi.Calibration(**{**fields, **calibration})
    ndims, dims, dtypes = (ctypes.c_int * 1)(2), (ctypes.c_int64 * 2)(4096, 4096), (ctypes.c_int * 1)(0)
    config = _capi.PlanConfig(nodes=1, gpusPerNode=8, numParams=1, ndims=ndims, dims=dims, dtypes=dtypes,
                              gradDtype=0, mode=0, calibration=ctypes.pointer(cal), landing=0)
    result, _, reason = _plan_create(config)
    return result, reason


def _plan_create(config) -> tuple[int, str, str]:
    """tidePlanCreate of `config` straight through the C API: (result, message, reason), the
    message and reason empty on success (the plan is destroyed again)."""
    lib = _capi.library()
    handle = ctypes.c_void_p()
    result = lib.tidePlanCreate(ctypes.byref(config), ctypes.byref(handle))
    if result == _capi.Result.SUCCESS:
        lib.tidePlanDestroy(handle)
        return result, "", ""
    return result, lib.tideGetLastError().decode(), lib.tideGetLastReason().decode()


@pytest.mark.parametrize("field", ["fabricBw", "nicBw"])
@pytest.mark.parametrize("value", [-1.0, math.nan, -math.inf, math.inf])
def test_the_c_api_refuses_a_bad_rate(field, value):
    """A C caller's negative, NaN or infinite rate is refused (fabricBw's became the default
    unnoticed); fabricBw 0 is the documented default."""
    assert _create_through_the_c_api(**{field: value}) == (_capi.Result.INVALID_ARGUMENT, "bad_calibration")


def test_the_c_api_names_a_bad_dtype_mode_or_landing():
    """A C caller's unknown enum value is refused naming the field and the value."""
    def create(dtype=0, grad=0, mode=0, landing=0) -> tuple[int, str]:
        ndims, dims, dtypes = (ctypes.c_int * 2)(1, 1), (ctypes.c_int64 * 2)(64, 64), (ctypes.c_int * 2)(0, dtype)
        config = _capi.PlanConfig(nodes=2, gpusPerNode=2, numParams=2, ndims=ndims, dims=dims, dtypes=dtypes,
                                  gradDtype=grad, mode=mode, landing=landing)
        result, message, _ = _plan_create(config)
        return result, message

    assert create() == (_capi.Result.SUCCESS, "")
    for kwargs, want in (({"dtype": 7}, "dtypes[1]: unknown dtype code 7"),
                         ({"grad": 9}, "gradDtype: unknown dtype code 9"),
                         ({"mode": 5}, "unknown mode 5"), ({"landing": 3}, "unknown landing 3")):
        result, message = create(**kwargs)
        assert result != _capi.Result.SUCCESS and want in message, (kwargs, message)


def test_the_c_api_takes_fabric_rate_zero_as_the_default():
    assert _create_through_the_c_api(fabricBw=0.0) == (_capi.Result.SUCCESS, "")
    assert _create_through_the_c_api(fabricBw=390e9) == (_capi.Result.SUCCESS, "")


@pytest.mark.parametrize(
    "shapes, kwargs, result, reason",
    [
        (SHAPES, {"nodes": 0, "gpus_per_node": 8}, _capi.Result.INVALID_ARGUMENT, "bad_topology"),
        (SHAPES, {"nodes": 1, "gpus_per_node": 9}, _capi.Result.INVALID_ARGUMENT, "bad_topology"),
        ([], {"nodes": 1, "gpus_per_node": 8}, _capi.Result.PLAN_REJECTED, "empty_group"),
        ([[4]] * 257, {"nodes": 1, "gpus_per_node": 8}, _capi.Result.PLAN_REJECTED, "too_many_params"),
        ([[4], []], {"nodes": 1, "gpus_per_node": 8}, _capi.Result.PLAN_REJECTED, "zero_dim_tensor"),
        ([[4], [0, 3]], {"nodes": 1, "gpus_per_node": 8}, _capi.Result.PLAN_REJECTED, "empty_param"),
        ([{"shape": [4], "dtype": "bf16"}, {"shape": [4], "dtype": "fp32"}],
         {"nodes": 1, "gpus_per_node": 8}, _capi.Result.PLAN_REJECTED, "mixed_dtypes"),
        (SHAPES, {"nodes": 9, "gpus_per_node": 8, "wave_width": 3},
         _capi.Result.PLAN_REJECTED, "plan_collision"),
    ],
)
def test_library_errors_carry_result_and_reason(shapes, kwargs, result, reason):
    with pytest.raises(TideError) as info:
        make_plan(shapes, **kwargs)
    assert info.value.result == result
    assert info.value.reason == reason
    assert info.value.message


def test_exactly_256_params_is_accepted():
    assert make_plan([[4]] * 256, nodes=1, gpus_per_node=8)["group"]["params"] == 256


@pytest.mark.parametrize(
    "shapes, kwargs",
    [
        ([["a"]], {}),
        ([[True]], {}),
        ([[-1]], {}),
        ("4096", {}),
        ([{"shape": [4], "size": 3}], {}),
        ([{"name": "x"}], {}),
        ([[4]], {"dtype": "fp16"}),
        ([[4]], {"mode": "sideways"}),
        ([[4]], {"nodes": 2**40}),
    ],
)
def test_malformed_python_input(shapes, kwargs):
    kwargs = {"nodes": 1, "gpus_per_node": 2, **kwargs}
    with pytest.raises(PlanInputError):
        make_plan(shapes, **kwargs)


def test_landing_direction_reaches_the_plan():
    """Push landing across nodes adds a push area the size of the inbox to the staging; one node
    has no Level 2, so its plan says none; an unknown direction is refused before the library."""
    shapes = [[257, 64], [64], [1000]]
    pull = make_plan(shapes, nodes=2, gpus_per_node=4, passes=2)["reduce_scatter"]
    push = make_plan(shapes, nodes=2, gpus_per_node=4, passes=2, landing="push")["reduce_scatter"]
    assert (pull["landing"], pull["push_area_bytes"]) == ("pull", 0)
    assert push["landing"] == "push"
    inbox = push["buffer_generations"] * 4 * push["block_bytes"]
    assert push["push_area_bytes"] == inbox > 0
    assert push["staging_bytes"] == pull["staging_bytes"] + inbox
    one_node = make_plan(shapes, nodes=1, gpus_per_node=4, landing="push")["reduce_scatter"]
    assert (one_node["landing"], one_node["push_area_bytes"]) == ("none", 0)
    with pytest.raises(PlanInputError, match="landing"):
        make_plan(shapes, nodes=2, gpus_per_node=4, landing="sideways")


def test_a_param_count_beyond_the_arrays_is_refused_before_they_are_read():
    """Through the raw C API: a numParams larger than the arrays behind ndims, dims and dtypes
    (garbage, or a count meant for another config) is refused by its size, too_many_params, before
    the library sizes anything by it or reads past the arrays (it once read numParams entries)."""
    from tide.plan import build_plan_config

    config, _alive = build_plan_config([[4, 4]], nodes=1, gpus_per_node=2)
    for count in (257, 1 << 20, (1 << 31) - 1):
        config.numParams = count
        handle = _capi.PlanHandle()
        result = _capi.library().tidePlanCreate(ctypes.byref(config), ctypes.byref(handle))
        assert result == _capi.Result.PLAN_REJECTED, (count, result)
        assert _capi.library().tideGetLastReason().decode() == "too_many_params"
        assert str(count) in _capi.library().tideGetLastError().decode()


def test_a_dimension_count_out_of_range_names_the_parameter_and_the_limit():
    """Through the raw C API: ndims past 16 (or negative) is refused before that parameter's dims
    are read, and the message says which parameter and what the limit is."""
    from tide.plan import build_plan_config

    config, _alive = build_plan_config([[4, 4], [8]], nodes=1, gpus_per_node=2)
    for bad in (17, -1):
        config.ndims[1] = bad
        handle = _capi.PlanHandle()
        result = _capi.library().tidePlanCreate(ctypes.byref(config), ctypes.byref(handle))
        assert result != _capi.Result.SUCCESS
        error = _capi.library().tideGetLastError().decode()
        assert f"parameter 1: ndims {bad} outside 0..16" in error, error


def test_scratch_bytes_refuses_groups_of_different_topologies():
    from tide.plan import scratch_bytes
    one = {"shapes": [[8]], "nodes": 2, "gpus_per_node": 2}
    assert scratch_bytes([one, dict(one, shapes=[[64, 3]])]) > 0  # same topology: one communicator's groups
    with pytest.raises(TideError, match=r"share one topology: 2 x 2 and 3 x 4"):
        scratch_bytes([one, dict(one, nodes=3, gpus_per_node=4)])


def test_scratch_bytes_of_no_group_is_refused_by_name():
    from tide.plan import scratch_bytes
    with pytest.raises(ValueError, match="at least one group"):
        scratch_bytes([])
