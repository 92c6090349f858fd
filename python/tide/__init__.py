"""TIDE: zero-copy, layout-aware all-gather and reduce-scatter for PyTorch FSDP2.

The native library (libtide) does the work; this package binds its C API
with ctypes and never compiles against PyTorch.
"""

from importlib import metadata as _metadata

from tide._capi import TideError
from tide.plan import PlanInputError, make_plan

try:
    __version__ = _metadata.version("tide")
except _metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "unknown"

__all__ = ["TideError", "PlanInputError", "make_plan", "__version__"]


def __getattr__(name: str):
    # `tide.fsdp` imports torch; load it only when asked for.
    if name == "fsdp":
        import importlib

        return importlib.import_module("tide.fsdp")
    raise AttributeError(f"module 'tide' has no attribute {name!r}")
