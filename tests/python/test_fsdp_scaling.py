"""How TIDE-RS scales FSDP2's reduce-scatter (reduce_scatter._scaling): the sum's alpha, the
fp32 pre-multiply, or why the call runs stock, against FSDP2's own divide factors."""

from __future__ import annotations

import math
import random
import types

import pytest
import torch

from tide.fsdp.reduce_scatter import _scaling


def scaling(factor, grad_dtype=torch.bfloat16, force_sum=False):
    tg = types.SimpleNamespace(info=types.SimpleNamespace(world_size=4))
    return _scaling(tg, None, None, torch.float32, grad_dtype, torch.device("cpu"), factor, force_sum)


def test_no_factor_on_one_rank_sums():
    assert scaling(None) == (1.0, None)


def test_a_power_of_two_factor_is_alpha_exactly():
    k = random.randint(-60, 60)
    assert scaling(2.0**k, torch.float32) == (2.0**-k, None)


def test_other_factors_scale_fp32_gradients_first_and_bf16_in_the_sum():
    factor = random.choice([3.0, 5.0, 7.0, 6.5])
    assert scaling(factor, torch.float32) == (1.0, 1.0 / factor)
    assert scaling(factor, torch.bfloat16) == (1.0 / factor, None)


def test_a_sum_forced_for_the_comms_leaves_the_divide_to_fsdp2():
    assert scaling(3.0, force_sum=True) == (1.0, None)


@pytest.mark.parametrize("factor,in_fp32", [(1e-40, "inf"), (2.0**-200, "inf"), (-1e-45, "-inf"), (1e46, "0.0"),
                                             (2.0**151, "0.0")])
@pytest.mark.parametrize("grad_dtype", [torch.bfloat16, torch.float32])
def test_a_reciprocal_beyond_fp32_runs_stock_with_the_reason(factor, in_fp32, grad_dtype):
    why = scaling(factor, grad_dtype)
    assert isinstance(why, str) and f"is {in_fp32} in fp32" in why, why
    assert math.isfinite(1.0 / factor) and 1.0 / factor != 0  # float64 holds it: only fp32 cannot


def test_a_reciprocal_in_fp32s_subnormals_is_kept():
    assert scaling(1e40, torch.bfloat16) == (1e-40, None)  # 1e-40 is an fp32 subnormal, not 0
