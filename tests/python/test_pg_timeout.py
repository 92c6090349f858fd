"""tide.fsdp.pg_timeout: install()'s default deadline is the process group's own timeout,
read from real gloo groups (the world group and a sub-group with another timeout); an
unreadable or unusable one falls back to torch's default with a logged reason. The two-rank
check that install hands it to the communicator is the FSDP2 scenario
waits_last_the_process_groups_timeout."""

from __future__ import annotations

import datetime
import logging
import random
import types

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402
from torch.distributed import distributed_c10d  # noqa: E402

from tide.fsdp import pg_timeout  # noqa: E402

CPU = torch.device("cpu")


@pytest.fixture
def world_seconds(tmp_path):
    seconds = random.randint(40, 4000)
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1,
                            timeout=datetime.timedelta(seconds=seconds))
    yield seconds
    dist.destroy_process_group()


def test_the_world_groups_timeout(world_seconds):
    assert pg_timeout.process_group_timeout_s(dist.group.WORLD, CPU) == world_seconds


def test_a_sub_groups_own_timeout(world_seconds):
    seconds = world_seconds + random.randint(1, 500)
    sub = dist.new_group([0], timeout=datetime.timedelta(seconds=seconds))
    assert pg_timeout.process_group_timeout_s(sub, CPU) == seconds


class _FakeGroup:
    """A group whose backend options say `timeout` (or raise it, if it is an exception)."""

    def __init__(self, timeout):
        self.timeout = timeout

    def _get_backend(self, device):
        if isinstance(self.timeout, Exception):
            raise self.timeout
        return types.SimpleNamespace(options=types.SimpleNamespace(_timeout=self.timeout))


@pytest.mark.parametrize("timeout, why", [
    (RuntimeError("no backend for device cpu"), "no backend for device cpu"),
    (datetime.timedelta(0), "it reads 0 s"),
    (30.0, "not a timedelta"),
])
def test_an_unusable_timeout_falls_back_to_torchs_default_and_says_why(timeout, why, caplog):
    with caplog.at_level(logging.WARNING, logger="tide.fsdp"):
        got = pg_timeout.process_group_timeout_s(_FakeGroup(timeout), CPU)
    assert got == distributed_c10d.default_pg_timeout.total_seconds() > 0
    assert len(caplog.records) == 1 and why in caplog.text and "timeout_s" in caplog.text, caplog.text


def test_a_timeout_past_the_c_apis_bound_is_cut_to_it(caplog):
    days = random.randint(12, 400)  # 1e6 s is 11.6 days
    with caplog.at_level(logging.INFO, logger="tide.fsdp"):
        got = pg_timeout.process_group_timeout_s(_FakeGroup(datetime.timedelta(days=days)), CPU)
    assert got == pg_timeout.MAX_TIMEOUT_S
    assert "cut to" in caplog.text, caplog.text
