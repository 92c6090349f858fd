"""How long TIDE's waits last when install() is given no timeout_s: as long as
the process group's own collectives wait (init_process_group(timeout=...) or
new_group(timeout=...); torch's default is 30 minutes for gloo and 10 for
NCCL). A rank that stock FSDP2 would wait for (a straggler loading a
checkpoint, a slow first compile) then does not fail TIDE alone.

torch exposes a group's timeout only on its backend's options (private but
stable since 2.0); where that cannot be read, TIDE waits torch's default
process group timeout and says why in one logged line."""

from __future__ import annotations

import datetime
import logging
from typing import Any

import torch
from torch.distributed import distributed_c10d

log = logging.getLogger("tide.fsdp")

# The C API's bound on a wait (tide.h: timeoutSeconds); a longer group timeout is cut to it.
MAX_TIMEOUT_S = 1e6


def _read(pg: Any, device: torch.device) -> float:
    timeout = pg._get_backend(device).options._timeout
    if not isinstance(timeout, datetime.timedelta):
        raise TypeError(f"options._timeout is {type(timeout).__name__}, not a timedelta")
    return timeout.total_seconds()


def process_group_timeout_s(pg: Any, device: torch.device) -> float:
    """The seconds pg's collectives on `device` wait, within (0, MAX_TIMEOUT_S]."""
    try:
        seconds = _read(pg, device)
        why = None if seconds > 0 else f"it reads {seconds:g} s"
    except Exception as e:  # noqa: BLE001 -- any failure to read it has the same remedy
        seconds, why = 0.0, f"{type(e).__name__}: {e}"
    if why is not None:
        seconds = distributed_c10d.default_pg_timeout.total_seconds()
        log.warning("tide.fsdp: the process group's timeout could not be read (%s); TIDE's waits last "
                    "torch's default, %g s (install(timeout_s=...) sets them)", why, seconds)
    if seconds > MAX_TIMEOUT_S:
        log.info("tide.fsdp: the process group's timeout, %g s, is cut to %g s for TIDE's waits",
                 seconds, MAX_TIMEOUT_S)
        seconds = MAX_TIMEOUT_S
    return seconds
