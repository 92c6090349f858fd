"""Shared fixtures for the Python tests (they run against the installed package)."""

from __future__ import annotations

import os
import random
import time

import pytest


@pytest.fixture
def rng(request) -> random.Random:
    """A fresh random draw each run, seeded by time; TIDE_TEST_SEED repeats one."""
    seed = int(os.environ.get("TIDE_TEST_SEED", time.time_ns() % 2**32))
    print(f"{request.node.name}: seed {seed} (repeat with TIDE_TEST_SEED={seed})")
    generator = random.Random(seed)
    generator.seed_value = seed
    return generator
