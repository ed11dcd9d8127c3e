"""libshoal's error codes (lib/include/shoal.h) as exceptions: ShoalError and one
subclass per code, each with the code in .code."""

from __future__ import annotations

from typing import Dict, Type

SUCCESS = 0


class ShoalError(Exception):
    """A libshoal call failed; code is its SHOAL_ERR_* number (negative)."""

    code = 0

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        if code:
            self.code = code

    @staticmethod
    def from_code(code: int, context: str) -> "ShoalError":
        cls = _BY_CODE.get(code, ShoalError)
        from . import _api

        try:
            text = _api.strerror(code)
        except ImportError:
            text = f"error {code}"
        return cls(f"shoal: {context}: {text}", code)


class InvalidArgument(ShoalError, ValueError):
    code = -1


class StateError(ShoalError):
    code = -2


class OutOfMemory(ShoalError, MemoryError):
    code = -3


class CheckpointIOError(ShoalError, OSError):
    code = -4


class MPIError(ShoalError):
    code = -5


class CorruptShard(ShoalError):
    code = -6


class NoCheckpoint(ShoalError):
    code = -7


class ShardMismatch(ShoalError):
    code = -8


class SizeMismatch(ShoalError):
    code = -9


class UnsupportedVersion(ShoalError):
    code = -10


class DirectoryError(ShoalError, OSError):
    code = -11


class RegionNotFound(ShoalError, KeyError):
    code = -12

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class PerRankRegion(ShoalError):
    """A per-rank region (shoal.protect) where the rank count changes or may change:
    protect it with protect_block, protect_subarray or protect_replicated."""

    code = -13


class NotPortable(ShoalError):
    """A region whose bytes do not mean the same on this machine as on the one that
    wrote the checkpoint (long double between amd64 and arm64, a type with holes)."""

    code = -14


_BY_CODE: Dict[int, Type[ShoalError]] = {
    c.code: c
    for c in (InvalidArgument, StateError, OutOfMemory, CheckpointIOError, MPIError,
              CorruptShard, NoCheckpoint, ShardMismatch, SizeMismatch, UnsupportedVersion,
              DirectoryError, RegionNotFound, PerRankRegion, NotPortable)
}

# The C names, for code that compares codes: shoal.ERR_NOTFOUND == -12.
ERR_ARG, ERR_STATE, ERR_NOMEM, ERR_IO, ERR_MPI, ERR_CORRUPT, ERR_NOCKPT = range(-1, -8, -1)
ERR_MISMATCH, ERR_SIZE, ERR_VERSION, ERR_DIR, ERR_NOTFOUND, ERR_PERRANK = range(-8, -14, -1)
ERR_PORTABLE = -14


def check(code: int, context: str) -> None:
    if code != SUCCESS:
        raise ShoalError.from_code(code, context)
