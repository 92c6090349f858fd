"""ctypes binding of the TIDE C API (include/tide/tide.h).

This module mirrors tide.h one to one and knows nothing of PyTorch, so one
build of libtide serves every torch version. Every call that returns a
tideResult_t other than tideSuccess raises TideError.
"""

from __future__ import annotations

import ctypes
import enum
import os
import threading
from pathlib import Path

LIBRARY_ENV = "TIDE_LIBRARY"
LIBRARY_NAME = "libtide.so"


class Result(enum.IntEnum):
    """tideResult_t."""

    SUCCESS = 0
    INVALID_ARGUMENT = 1
    PLAN_REJECTED = 2
    INTERNAL_ERROR = 3
    TIMEOUT = 4
    PROTOCOL_ERROR = 5
    UNAVAILABLE = 6


class DataType(enum.IntEnum):
    """tideDataType_t."""

    BF16 = 0
    FP32 = 1


class Mode(enum.IntEnum):
    """tideMode_t."""

    IN_PLACE = 0
    SLOT_REUSE = 1


class Landing(enum.IntEnum):
    """tideLanding_t."""

    PULL = 0
    PUSH = 1


class TideError(RuntimeError):
    """A TIDE call failed.

    result:  the tideResult_t (a Result when the code is known)
    reason:  stable reason name, e.g. "too_many_params" or "plan_collision"
    message: the library's message for the failed call
    """

    def __init__(self, result: int, reason: str, message: str):
        try:
            result = Result(result)
        except ValueError:
            pass
        self.result = result
        self.reason = reason
        self.message = message
        super().__init__(f"{message} [{reason}]")


class LibraryNotFound(ImportError):
    """libtide could not be located or loaded."""


# ------------------------------------------------------------------ structs

class Calibration(ctypes.Structure):
    """tideCalibration_t: bandwidths in bytes/s, roundWait in seconds."""

    _fields_ = [
        ("nicBw", ctypes.c_double),
        ("sumBwPerCta", ctypes.c_double),
        ("landBwPerCta", ctypes.c_double),
        ("landCap", ctypes.c_double),
        ("roundWait", ctypes.c_double),
        ("fabricBw", ctypes.c_double),
    ]


# C enums are passed as int.
_c_enum = ctypes.c_int


class PlanConfig(ctypes.Structure):
    """tidePlanConfig_t."""

    _fields_ = [
        ("nodes", ctypes.c_int),
        ("gpusPerNode", ctypes.c_int),
        ("numParams", ctypes.c_int),
        ("ndims", ctypes.POINTER(ctypes.c_int)),
        ("dims", ctypes.POINTER(ctypes.c_int64)),
        ("dtypes", ctypes.POINTER(_c_enum)),
        ("gradDtype", _c_enum),
        ("mode", _c_enum),
        ("waveWidth", ctypes.c_int),
        ("roundWidth", ctypes.c_int),
        ("passes", ctypes.c_int),
        ("sumCtas", ctypes.c_int),
        ("landingCtas", ctypes.c_int),
        ("calibration", ctypes.POINTER(Calibration)),
        ("landing", _c_enum),
        ("railLane", ctypes.c_int),
    ]


PlanHandle = ctypes.c_void_p  # tidePlan_t (opaque)


class UniqueId(ctypes.Structure):
    """tideUniqueId_t (an NCCL unique id inside)."""

    # Bytes, not a C string: an NCCL id holds zeros, which c_char would cut at.
    _fields_ = [("internal", ctypes.c_ubyte * 128)]


class CommConfig(ctypes.Structure):
    """tideCommConfig_t."""

    _fields_ = [
        ("nodes", ctypes.c_int),
        ("gpusPerNode", ctypes.c_int),
        ("rank", ctypes.c_int),
        ("arenaBytes", ctypes.c_int64),
        ("timeoutSeconds", ctypes.c_double),
        ("device", ctypes.c_int),
    ]


CommHandle = ctypes.c_void_p   # tideComm_t (opaque)
GroupHandle = ctypes.c_void_p  # tideGroup_t (opaque)


class CommStats(ctypes.Structure):
    """tideCommStats_t (its fields in order, named as Communicator.stats reports them)."""

    _fields_ = [(name, ctypes.c_int64) for name in (
        "copy_bytes", "copy_descriptors", "rail_bytes", "rail_puts", "sum_elems", "land_elems",
        "copy_graph_launches", "copy_graphs_built", "all_gather_calls", "all_gather_host_ns",
        "reduce_scatter_calls", "reduce_scatter_host_ns")]


class HostRunOptions(ctypes.Structure):
    """tideHostRunOptions_t."""

    _fields_ = [
        ("iters", ctypes.c_int),
        ("seed", ctypes.c_uint64),
        ("inputKind", ctypes.c_int),
        ("timeoutSeconds", ctypes.c_double),
        ("fault", ctypes.c_char_p),
        ("faultRank", ctypes.c_int),
        ("rails", ctypes.c_int),
    ]


# ------------------------------------------------------------------ loading

def _library_file() -> Path:
    """TIDE_LIBRARY if set, else the libtide.so installed next to this module."""
    override = os.environ.get(LIBRARY_ENV)
    return Path(override) if override else Path(__file__).resolve().parent / LIBRARY_NAME


def _declare(lib: ctypes.CDLL) -> None:
    """argtypes/restype of every function in tide.h."""
    lib.tideGetLastError.argtypes = []
    lib.tideGetLastError.restype = ctypes.c_char_p
    lib.tideGetLastReason.argtypes = []
    lib.tideGetLastReason.restype = ctypes.c_char_p
    lib.tideGetErrorString.argtypes = [_c_enum]
    lib.tideGetErrorString.restype = ctypes.c_char_p

    lib.tidePlanCreate.argtypes = [ctypes.POINTER(PlanConfig), ctypes.POINTER(PlanHandle)]
    lib.tidePlanCreate.restype = _c_enum
    lib.tidePlanGetJson.argtypes = [PlanHandle, ctypes.POINTER(ctypes.c_char_p)]
    lib.tidePlanGetJson.restype = _c_enum
    lib.tidePlanDestroy.argtypes = [PlanHandle]
    lib.tidePlanDestroy.restype = _c_enum

    lib.tideHostRun.argtypes = [ctypes.POINTER(PlanConfig), ctypes.POINTER(HostRunOptions),
                                ctypes.POINTER(ctypes.c_void_p)]
    lib.tideHostRun.restype = _c_enum
    lib.tideFaultNames.argtypes = []
    lib.tideFaultNames.restype = ctypes.c_char_p
    lib.tideFreeString.argtypes = [ctypes.c_void_p]
    lib.tideFreeString.restype = None

    lib.tideHasCuda.argtypes = []
    lib.tideHasCuda.restype = ctypes.c_int
    lib.tideGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
    lib.tideCommInitCuda.argtypes = [ctypes.POINTER(CommConfig), ctypes.POINTER(UniqueId), ctypes.POINTER(CommHandle)]
    lib.tideCommInitHost.argtypes = [ctypes.POINTER(CommConfig), ctypes.c_char_p, ctypes.POINTER(CommHandle)]
    lib.tideCommInitCudaIpc.argtypes = [ctypes.POINTER(CommConfig), ctypes.c_char_p, ctypes.POINTER(CommHandle)]
    lib.tideCommDestroy.argtypes = [CommHandle]
    lib.tideCommAlloc.argtypes = [CommHandle, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                                  ctypes.POINTER(ctypes.c_void_p)]
    lib.tideGroupRegister.argtypes = [CommHandle, ctypes.POINTER(PlanConfig), ctypes.POINTER(GroupHandle)]
    lib.tideGroupGetJson.argtypes = [GroupHandle, ctypes.POINTER(ctypes.c_char_p)]
    lib.tideAllGather.argtypes = [CommHandle, GroupHandle, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    lib.tideReduceScatter.argtypes = [CommHandle, GroupHandle, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                      ctypes.c_float, ctypes.c_int, ctypes.c_void_p]
    lib.tideCommSynchronize.argtypes = [CommHandle]
    lib.tideCommWaitInputsRead.argtypes = [CommHandle, ctypes.c_void_p]
    lib.tideCommReservedBytes.argtypes = [CommHandle, ctypes.POINTER(ctypes.c_int64)]
    lib.tideCommGetRails.argtypes = [CommHandle, ctypes.POINTER(ctypes.c_char_p)]
    lib.tideCommGetStats.argtypes = [CommHandle, ctypes.POINTER(CommStats)]
    lib.tideScratchBytes.argtypes = [ctypes.POINTER(PlanConfig), ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]
    for name in ("tideScratchBytes", "tideGetUniqueId", "tideCommInitCuda", "tideCommInitHost", "tideCommInitCudaIpc",
                 "tideCommDestroy", "tideCommAlloc",
                 "tideGroupRegister", "tideGroupGetJson", "tideAllGather", "tideReduceScatter",
                 "tideCommSynchronize", "tideCommWaitInputsRead", "tideCommReservedBytes",
                 "tideCommGetRails", "tideCommGetStats"):
        getattr(lib, name).restype = _c_enum


_lib: ctypes.CDLL | None = None
_lib_path: str | None = None
_lib_lock = threading.Lock()


def library() -> ctypes.CDLL:
    """The loaded libtide; loaded on first use so that `import tide` never fails."""
    global _lib, _lib_path
    # Loaded: no lock, so that a signal handler that calls into tide while its thread is in
    # here (or a fork while another thread was) does not wait for a lock that is never released.
    lib = _lib
    if lib is not None:
        return lib
    with _lib_lock:
        if _lib is None:
            _lib, _lib_path = _load()
        return _lib


def _load() -> tuple[ctypes.CDLL, str]:
    path = _library_file()
    if not path.is_file():
        hint = (f"check {LIBRARY_ENV}" if LIBRARY_ENV in os.environ
                else f"install the package (`pip install .`) or set {LIBRARY_ENV}")
        raise LibraryNotFound(f"cannot load {LIBRARY_NAME}: no file {path}; {hint}")
    try:
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        raise LibraryNotFound(f"cannot load {path}: {exc}") from None
    try:
        _declare(lib)
    except AttributeError as exc:  # not libtide, or a build older than this package
        raise LibraryNotFound(f"{path} lacks a libtide symbol ({exc}): a stale build, or not libtide") from None
    return lib, str(path)


def library_path() -> str:
    """Where the loaded libtide lives (loads it if needed)."""
    library()
    return _lib_path


# ------------------------------------------------------------------ calls

def _decode(raw: bytes | None) -> str:
    return raw.decode("utf-8", errors="replace") if raw else ""


def check(result: int) -> None:
    """Raise TideError for any result other than tideSuccess."""
    if result == Result.SUCCESS:
        return
    lib = library()
    message = _decode(lib.tideGetLastError()) or _decode(lib.tideGetErrorString(result))
    reason = _decode(lib.tideGetLastReason()) or "unknown"
    raise TideError(result, reason, message)


def error_string(result: int) -> str:
    return _decode(library().tideGetErrorString(result))


def plan_create(config: PlanConfig) -> PlanHandle:
    handle = PlanHandle()
    check(library().tidePlanCreate(ctypes.byref(config), ctypes.byref(handle)))
    return handle


def plan_get_json(handle: PlanHandle) -> str:
    text = ctypes.c_char_p()
    check(library().tidePlanGetJson(handle, ctypes.byref(text)))
    return _decode(text.value)


def plan_destroy(handle: PlanHandle) -> None:
    check(library().tidePlanDestroy(handle))


def host_run(config: PlanConfig, options: HostRunOptions) -> tuple[int, str]:
    """Run both collectives on CPU ranks; returns (result, report JSON).

    A fabric failure (deadline, peer failure) still returns its report, with
    result TIMEOUT; other failures raise TideError."""
    lib = library()
    raw = ctypes.c_void_p()
    result = lib.tideHostRun(ctypes.byref(config), ctypes.byref(options), ctypes.byref(raw))
    try:
        report = ctypes.string_at(raw.value).decode("utf-8") if raw.value else ""
    finally:
        if raw.value:
            lib.tideFreeString(raw)
    if result != Result.SUCCESS and not report:
        check(result)
    return result, report


def fault_names() -> list[str]:
    return _decode(library().tideFaultNames()).split(",")
