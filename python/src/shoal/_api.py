"""Checkpointing for mpi4py programs: the libshoal C API through ctypes.

One implementation of checkpoints, the C library's: shards written from Python are
those of a C or Fortran program (docs/shard-format.md), and a program may be restarted
from them by any of the three. Protected NumPy arrays are read in place at each
checkpoint and restored in place on a restart: no copies beyond the library's own.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import zlib
from typing import Any, Dict, Optional, Sequence, Union

from ._errors import ShoalError, check

__all__ = [
    "init", "protect", "protect_block", "protect_subarray", "protect_replicated",
    "protect_scalar", "unprotect", "status", "recover", "stored_count", "restart_nranks",
    "old_bytes", "read_old", "snapshot", "checkpoint", "progress", "finalize", "strerror",
    "version_number", "Scalar", "library_path", "FRESH", "RESTARTED", "RESIZED",
]

# What status() says (shoal.h's SHOAL_FRESH, SHOAL_RESTARTED, SHOAL_RESIZED).
FRESH, RESTARTED, RESIZED = 0, 1, 2

_lib: Optional[ctypes.CDLL] = None
_protected: Dict[int, Any] = {}  # id -> the object whose memory libshoal reads
_names: Dict[int, str] = {}  # id -> the name it was derived from
_types: Dict[Any, Any] = {}  # NumPy dtype (or element size) -> MPI datatype handle
_snapshot = None  # the bound C function, kept apart so that a call is one lookup


def library_path() -> str:
    """Where libshoal is loaded from: $SHOAL_LIBRARY, the path recorded when this
    package was installed by Shoal's build, or the dynamic linker's search."""
    env = os.environ.get("SHOAL_LIBRARY")
    if env:
        return env
    try:
        from ._libshoal import PATH  # written by make build / make install
    except ImportError:
        PATH = None
    if PATH and os.path.exists(PATH):
        return PATH
    return ctypes.util.find_library("shoal") or "libshoal.so"


def _load() -> ctypes.CDLL:
    global _lib, _snapshot
    if _lib is not None:
        return _lib
    path = library_path()
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError(f"shoal: cannot load libshoal ({path}): {e}; set SHOAL_LIBRARY") from e
    from mpi4py import MPI

    # MPI handles are pointers in Open MPI and ints in MPICH.
    def handle_type(cls: Any) -> Any:
        return ctypes.c_void_p if MPI._sizeof(cls) == ctypes.sizeof(ctypes.c_void_p) else ctypes.c_int

    comm_t, type_t = handle_type(MPI.Comm), handle_type(MPI.Datatype)
    lib.shoal_init.argtypes = [comm_t]
    lib.shoal_protect.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, type_t]
    lib.shoal_protect_replicated.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, type_t]
    lib.shoal_protect_block.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, type_t,
                                        ctypes.c_uint64, ctypes.c_uint64]
    ints = ctypes.POINTER(ctypes.c_int)
    lib.shoal_protect_subarray.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ints, ints,
                                           ints, ctypes.c_int, type_t]
    lib.shoal_restart_nranks.argtypes = [ctypes.POINTER(ctypes.c_int)]
    lib.shoal_old_bytes.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
    lib.shoal_read_old.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p,
                                   ctypes.c_size_t]
    lib.shoal_unprotect.argtypes = [ctypes.c_int]
    lib.shoal_stored_count.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_size_t)]
    lib.shoal_progress.argtypes = [ctypes.c_double]
    lib.shoal_strerror.argtypes = [ctypes.c_int]
    lib.shoal_strerror.restype = ctypes.c_char_p
    for name in ("status", "recover", "snapshot", "checkpoint", "finalize", "version_number"):
        getattr(lib, "shoal_" + name).argtypes = []
    _snapshot = lib.shoal_snapshot
    _lib = lib
    return lib


def region_id(name_or_id: Union[str, int]) -> int:
    """The region id for a name: a stable hash in [2**30, 2**31), the same on every rank
    and in every run, so that names survive restarts. Ints are ids already."""
    if isinstance(name_or_id, bool) or not isinstance(name_or_id, (int, str)):
        raise TypeError(f"shoal: region name or id must be str or int, not {type(name_or_id).__name__}")
    if isinstance(name_or_id, int):
        return name_or_id
    return (zlib.crc32(name_or_id.encode("utf-8")) & 0x3FFFFFFF) | 0x40000000


def _datatype(dtype: Any) -> Any:
    """The MPI datatype of a NumPy dtype: for a native number the C type of the same
    representation (float64 as MPI_DOUBLE, int32 as MPI_INT...), whose code the shard
    records as a C program's would (docs/shard-format.md, "Datatype codes"); for any
    other (structured, byte-swapped, void) a type of as many bytes, recorded as bytes."""
    import numpy as np

    dtype = np.dtype(dtype)
    t = _types.get(dtype)
    if t is None:
        from mpi4py import MPI

        native = {("f", 4): MPI.FLOAT, ("f", 8): MPI.DOUBLE, ("i", 1): MPI.INT8_T,
                  ("i", 2): MPI.INT16_T, ("i", 4): MPI.INT, ("i", 8): MPI.INT64_T,
                  ("u", 1): MPI.UINT8_T, ("u", 2): MPI.UINT16_T, ("u", 4): MPI.UINT32_T,
                  ("u", 8): MPI.UINT64_T, ("c", 8): MPI.C_FLOAT_COMPLEX,
                  ("c", 16): MPI.C_DOUBLE_COMPLEX, ("b", 1): MPI.C_BOOL}
        dt = native.get((dtype.kind, dtype.itemsize)) if dtype.isnative and not dtype.fields else None
        if dt is None:
            dt = _types.get(dtype.itemsize)
            if dt is None:
                dt = _types[dtype.itemsize] = MPI.BYTE.Create_contiguous(dtype.itemsize).Commit()
        t = _types[dtype] = MPI._handleof(dt)
    return t


def init(comm: Any = None) -> None:
    """Collective, after MPI is initialised (importing mpi4py.MPI does it). comm is an
    mpi4py communicator, COMM_WORLD by default. Finds the checkpoint to restart from."""
    from mpi4py import MPI

    lib = _load()
    if comm is None:
        comm = MPI.COMM_WORLD
    check(lib.shoal_init(MPI._handleof(comm)), "init")


def _region(name_or_id: Union[str, int], array: Any, call: str) -> Any:
    """The checks every protect call makes: the region's id and its array."""
    import numpy as np

    rid = region_id(name_or_id)
    if isinstance(array, Scalar):
        array = array.array
    if not isinstance(array, np.ndarray):
        raise TypeError(f"shoal.{call}({name_or_id!r}): want a numpy.ndarray (or shoal.Scalar), "
                        f"not {type(array).__name__}")
    if not (array.flags.c_contiguous or array.flags.f_contiguous):
        raise ShoalError.from_code(-1, f"{call}({name_or_id!r}): array not contiguous")
    if not array.flags.writeable:
        raise ShoalError.from_code(-1, f"{call}({name_or_id!r}): array is read-only")
    if array.dtype.hasobject:
        raise ShoalError.from_code(-1, f"{call}({name_or_id!r}): dtype {array.dtype} holds Python objects")
    if isinstance(name_or_id, str) and _names.get(rid, name_or_id) != name_or_id:
        raise ShoalError.from_code(-1, f"{call}({name_or_id!r}): its id {rid} is that of {_names[rid]!r}")
    return rid, array


def _keep(name_or_id: Union[str, int], rid: int, array: Any) -> None:
    _protected[rid] = array
    if isinstance(name_or_id, str):
        _names[rid] = name_or_id


def protect(name_or_id: Union[str, int], array: Any) -> None:
    """Registers a NumPy array (any dtype without object references, C- or
    Fortran-contiguous, writeable) under a name or an int id, as this rank's own
    (per-rank) region. libshoal keeps its address, so the array is checkpointed where it
    is and restored in place; this module keeps a reference to it until it is
    unprotected or protected again. Protect an array again after replacing it (a swap of
    two buffers, a resize)."""
    rid, array = _region(name_or_id, array, "protect")
    check(_load().shoal_protect(rid, array.ctypes.data, array.size, _datatype(array.dtype)),
          f"protect({name_or_id!r})")
    _keep(name_or_id, rid, array)


def protect_block(name_or_id: Union[str, int], array: Any, global_count: int, offset: int) -> None:
    """Registers this rank's part of a 1-D array of global_count elements distributed in
    blocks: array (as protect takes it) holds its elements offset to offset + array.size
    - 1. After a change of the rank count each rank's part is filled from the old
    ranks' parts that hold it."""
    rid, array = _region(name_or_id, array, "protect_block")
    check(_load().shoal_protect_block(rid, array.ctypes.data, array.size, _datatype(array.dtype),
                                      global_count, offset),
          f"protect_block({name_or_id!r})")
    _keep(name_or_id, rid, array)


def protect_subarray(name_or_id: Union[str, int], array: Any, sizes: Sequence[int],
                     starts: Sequence[int]) -> None:
    """Registers this rank's box of an N-d array of shape sizes, as
    MPI_Type_create_subarray describes it: array's shape is the box, which starts at
    starts (0-based) in the global array; a C-contiguous array is in C order, a
    Fortran-contiguous one (not also C-contiguous) in Fortran order."""
    rid, array = _region(name_or_id, array, "protect_subarray")
    if len(sizes) != array.ndim or len(starts) != array.ndim:
        raise ShoalError.from_code(-1, f"protect_subarray({name_or_id!r}): sizes and starts need "
                                   f"{array.ndim} values, one per dimension of the array")
    from mpi4py import MPI

    order = MPI.ORDER_C if array.flags.c_contiguous else MPI.ORDER_FORTRAN
    ints = ctypes.c_int * array.ndim
    check(_load().shoal_protect_subarray(rid, array.ctypes.data, array.ndim, ints(*sizes),
                                         ints(*array.shape), ints(*starts), order,
                                         _datatype(array.dtype)),
          f"protect_subarray({name_or_id!r})")
    _keep(name_or_id, rid, array)


def protect_replicated(name_or_id: Union[str, int], array: Any) -> None:
    """Registers an array (or a Scalar) that is the same on every rank: a step counter,
    a parameter. After a change of the rank count it comes from one old rank, checked
    equal on all of them."""
    rid, array = _region(name_or_id, array, "protect_replicated")
    check(_load().shoal_protect_replicated(rid, array.ctypes.data, array.size,
                                           _datatype(array.dtype)),
          f"protect_replicated({name_or_id!r})")
    _keep(name_or_id, rid, array)


class Scalar:
    """One protected number: read and write it through .value. It lives in a 0-d NumPy
    array, which is what libshoal reads and restores."""

    __slots__ = ("array",)

    def __init__(self, value: Any = 0, dtype: Any = "int64") -> None:
        import numpy as np

        self.array = np.array(value, dtype=dtype)

    @property
    def value(self) -> Any:
        return self.array[()]

    @value.setter
    def value(self, v: Any) -> None:
        self.array[()] = v

    def __repr__(self) -> str:
        return f"shoal.Scalar({self.array[()]!r}, dtype={str(self.array.dtype)!r})"


def protect_scalar(name_or_id: Union[str, int], value: Any = 0, dtype: Any = "int64",
                   replicated: bool = False) -> Scalar:
    """Protects one number, initially value, and returns it as a Scalar; replicated: the
    same on every rank (protect_replicated), so that it survives a change of the rank
    count:

        step = shoal.protect_scalar("step", 0, replicated=True)
        while step.value < steps:
            shoal.snapshot()          # on a restart, step.value is the checkpointed one
            ...
            step.value += 1
    """
    s = Scalar(value, dtype)
    (protect_replicated if replicated else protect)(name_or_id, s)
    return s


def unprotect(name_or_id: Union[str, int]) -> None:
    """Local. Forgets a region (shoal.RegionNotFound if it is not protected)."""
    rid = region_id(name_or_id)
    check(_load().shoal_unprotect(rid), f"unprotect({name_or_id!r})")
    _protected.pop(rid, None)
    _names.pop(rid, None)


def status() -> int:
    """FRESH (0), RESTARTED (1), or RESIZED (2): restarted from a checkpoint of another
    number of ranks (shoal.StateError before init)."""
    rc = int(_load().shoal_status())
    check(min(rc, 0), "status")
    return rc


def recover() -> None:
    """Collective. Restores every protected region in place from the restart checkpoint."""
    check(_load().shoal_recover(), "recover")


def stored_count(name_or_id: Union[str, int]) -> int:
    """Element count of a region in the restart checkpoint, to size an array before
    protecting it."""
    n = ctypes.c_size_t()
    check(_load().shoal_stored_count(region_id(name_or_id), ctypes.byref(n)),
          f"stored_count({name_or_id!r})")
    return n.value


def restart_nranks() -> int:
    """The number of ranks that wrote the restart checkpoint (shoal.NoCheckpoint on a
    fresh start)."""
    n = ctypes.c_int()
    check(_load().shoal_restart_nranks(ctypes.byref(n)), "restart_nranks")
    return n.value


def old_bytes(old_rank: int, name_or_id: Union[str, int]) -> int:
    """The size in bytes of a region in the restart checkpoint's shard of old_rank."""
    n = ctypes.c_size_t()
    check(_load().shoal_old_bytes(old_rank, region_id(name_or_id), ctypes.byref(n)),
          f"old_bytes({old_rank}, {name_or_id!r})")
    return n.value


def read_old(old_rank: Optional[int], name_or_id: Union[str, int], out: Any = None,
             offset: int = 0) -> Any:
    """Collective: every rank reads out.nbytes bytes at offset (bytes) of a region of the
    restart checkpoint's shard of old_rank into out, a writeable contiguous NumPy array,
    wherever that shard is; a rank with nothing to read passes out=None. Returns out.
    For state a program redistributes itself after a change of the rank count."""
    import numpy as np

    rid = region_id(name_or_id)
    if out is None:
        check(_load().shoal_read_old(0, rid, 0, None, 0), f"read_old({old_rank}, {name_or_id!r})")
        return None
    if not isinstance(out, np.ndarray) or not out.flags.writeable or not (
            out.flags.c_contiguous or out.flags.f_contiguous):
        raise ShoalError.from_code(-1, f"read_old({old_rank}, {name_or_id!r}): out must be a "
                                   "writeable contiguous numpy.ndarray")
    check(_load().shoal_read_old(old_rank, rid, offset, out.ctypes.data, out.nbytes),
          f"read_old({old_rank}, {name_or_id!r})")
    return out


def snapshot() -> None:
    """Collective, once per iteration where no message is in flight. Checkpoints when
    one is due; on the first call after a restart, restores the protected regions."""
    rc = _snapshot()
    if rc:
        check(rc, "snapshot")


def checkpoint() -> None:
    """Collective. Checkpoints now."""
    check(_load().shoal_checkpoint(), "checkpoint")


def progress(fraction: float) -> None:
    """Fraction of the work done, 0 to 1 (rank 0's counts), shown by shoal run."""
    check(_load().shoal_progress(fraction), "progress")


def finalize() -> None:
    """Collective, before MPI is finalized: waits for the last shard, completes its
    epoch, marks the run finished."""
    check(_load().shoal_finalize(), "finalize")
    _protected.clear()
    _names.clear()


def strerror(code: int) -> str:
    """libshoal's message for an error code."""
    return _load().shoal_strerror(code).decode()


def version_number() -> int:
    """libshoal's version at run time: major*10000 + minor*100 + patch."""
    return int(_load().shoal_version_number())
