"""Environment variables set for a block of code only."""

from __future__ import annotations

import contextlib
import os


@contextlib.contextmanager
def scoped_env(values: dict[str, str]):
    """`values` in this process's environment for the block, previous values (or absence) restored
    after. os.environ writes through to C getenv, so libtide reads them too (e.g. TIDE_COPY_GRAPHS
    when a CUDA endpoint is made)."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
