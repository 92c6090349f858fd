"""The ctypes binding of the benchmark's native helper (bench/native/nccl_baseline.cpp): NCCL
communicators with symmetric send and receive windows under a given CTA policy, for the NCCL
copy-engine all-gather baseline and the copy-engine peer-write ceiling; their windows wrapped as
torch tensors."""

from __future__ import annotations

import ctypes
import os

import torch
import torch.distributed as dist


class _CudaArray:
    """Lets torch.as_tensor wrap device memory that the native helper owns."""

    def __init__(self, ptr: int, nbytes: int):
        self.__cuda_array_interface__ = {
            "shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3, "strides": None,
            "stream": None,
        }


def wrap_device_bytes(ptr: int, nbytes: int, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(_CudaArray(ptr, nbytes), device=device)


# Each wait of a baseline communicator's bootstrap and teardown, as the CUDA fabric's host deadline:
# twice its wait timeout (TIDE_FABRIC_WAIT_TIMEOUT_S, 60 s by default) plus 10 s. Past it, a rank
# that never joins fails the run with a message.
NCCL_BOOTSTRAP_DEADLINE_S = 2 * float(os.environ.get("TIDE_FABRIC_WAIT_TIMEOUT_S", "60")) + 10


class Native:
    """bench/native/nccl_baseline.cpp: NCCL communicators with symmetric windows."""

    NCCL_CTA_POLICY_ZERO = 2
    DEFAULT_POLICY = -1

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        lib.tbn_last_error.restype = ctypes.c_char_p
        lib.tbn_create.restype = ctypes.c_void_p
        lib.tbn_create.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                   ctypes.c_size_t, ctypes.c_size_t, ctypes.c_double]
        for f in ("tbn_send", "tbn_recv"):
            getattr(lib, f).restype = ctypes.c_void_p
            getattr(lib, f).argtypes = [ctypes.c_void_p]
        lib.tbn_peer_recv.restype = ctypes.c_void_p
        lib.tbn_peer_recv.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.tbn_all_gather.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        lib.tbn_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        lib.tbn_destroy.argtypes = [ctypes.c_void_p]
        self.lib = lib

    def check(self, rc: int, what: str):
        if rc != 0:
            raise RuntimeError(f"{what}: {self.lib.tbn_last_error().decode()}")

    def unique_id(self) -> bytes:
        buf = ctypes.create_string_buffer(self.lib.tbn_unique_id_bytes())
        self.check(self.lib.tbn_get_unique_id(buf), "ncclGetUniqueId")
        return buf.raw

    def version(self) -> int:
        return self.lib.tbn_nccl_version()


class NativeComm:
    """One NCCL communicator (given CTA policy) with a send and a receive window."""

    def __init__(self, native: Native, policy: int, send_bytes: int, recv_bytes: int):
        self.native = native
        uid = [native.unique_id() if dist.get_rank() == 0 else None]
        dist.broadcast_object_list(uid, src=0)
        dev = torch.cuda.current_device()
        self.h = native.lib.tbn_create(uid[0], dist.get_world_size(), dist.get_rank(), dev, policy,
                                       send_bytes, recv_bytes, NCCL_BOOTSTRAP_DEADLINE_S)
        if not self.h:
            raise RuntimeError(f"tbn_create: {native.lib.tbn_last_error().decode()}")
        device = torch.device("cuda", dev)
        self.send = wrap_device_bytes(native.lib.tbn_send(self.h), send_bytes, device)
        self.recv = wrap_device_bytes(native.lib.tbn_recv(self.h), recv_bytes, device)

    def all_gather(self, bytes_per_rank: int):
        stream = torch.cuda.current_stream().cuda_stream
        if stream == 0:
            raise RuntimeError("NCCL's copy-engine all-gather needs a created stream, not the legacy default")
        self.native.check(self.native.lib.tbn_all_gather(self.h, bytes_per_rank, ctypes.c_void_p(stream)),
                          "ncclAllGather")

    def peer_recv(self, peer: int) -> int:
        return self.native.lib.tbn_peer_recv(self.h, peer) or 0

    def close(self):
        if self.h:
            self.native.lib.tbn_destroy(self.h)
            self.h = None
