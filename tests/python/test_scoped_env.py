"""tide.bench.scoped_env: variables set for a block, the previous state restored after, also when
the block raises; C getenv sees them (libtide reads TIDE_COPY_GRAPHS that way)."""

from __future__ import annotations

import ctypes
import os

import pytest

from tide.bench.scoped_env import scoped_env

_getenv = ctypes.CDLL(None).getenv
_getenv.restype = ctypes.c_char_p
_getenv.argtypes = [ctypes.c_char_p]


def test_sets_for_the_block_and_restores_absent_and_present(monkeypatch):
    monkeypatch.delenv("TIDE_SCOPED_A", raising=False)
    monkeypatch.setenv("TIDE_SCOPED_B", "before")
    with scoped_env({"TIDE_SCOPED_A": "1", "TIDE_SCOPED_B": "inside"}):
        assert os.environ["TIDE_SCOPED_A"] == "1" and os.environ["TIDE_SCOPED_B"] == "inside"
        assert _getenv(b"TIDE_SCOPED_A") == b"1" and _getenv(b"TIDE_SCOPED_B") == b"inside"
    assert "TIDE_SCOPED_A" not in os.environ and _getenv(b"TIDE_SCOPED_A") is None
    assert os.environ["TIDE_SCOPED_B"] == "before" and _getenv(b"TIDE_SCOPED_B") == b"before"


def test_restores_when_the_block_raises(monkeypatch):
    monkeypatch.delenv("TIDE_SCOPED_A", raising=False)
    with pytest.raises(RuntimeError), scoped_env({"TIDE_SCOPED_A": "1"}):
        raise RuntimeError("inside")
    assert "TIDE_SCOPED_A" not in os.environ
