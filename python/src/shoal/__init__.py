"""Shoal for Python: checkpoints of mpi4py programs through libshoal, and a reader of
the shards any Shoal program writes.

    from mpi4py import MPI
    import numpy as np
    import shoal

    shoal.init(MPI.COMM_WORLD)
    grid = np.zeros((rows, cols))               # this rank's rows of a global grid
    step = shoal.protect_scalar("step", 0, replicated=True)
    shoal.protect_block("grid", grid, global_count, offset)   # zero-copy; restored in place
    while step.value < steps:
        shoal.snapshot()                        # checkpoints when due; recovers after a restart
        ...
        step.value += 1
    shoal.finalize()

A program whose regions are all distributed (protect_block, protect_subarray) or
replicated restarts on any number of ranks. Errors are shoal.ShoalError subclasses
carrying libshoal's code (docs/libshoal.md).
The checkpoint API needs numpy and mpi4py (built against the MPI libshoal was built
with); the shard reader (shoal.read_shard_file, python -m shoal FILE...) needs only
xxhash.
"""

from ._api import (FRESH, RESIZED, RESTARTED, Scalar, checkpoint, finalize, init,
                   library_path, old_bytes, progress, protect, protect_block,
                   protect_replicated, protect_scalar, protect_subarray, read_old, recover,
                   region_id, restart_nranks, snapshot, status, stored_count, strerror,
                   unprotect, version_number)
from ._errors import (ERR_ARG, ERR_CORRUPT, ERR_DIR, ERR_IO, ERR_MISMATCH, ERR_MPI,
                      ERR_NOCKPT, ERR_NOMEM, ERR_NOTFOUND, ERR_PERRANK, ERR_PORTABLE, ERR_SIZE,
                      ERR_STATE,
                      ERR_VERSION, SUCCESS, CheckpointIOError, CorruptShard, DirectoryError,
                      InvalidArgument, MPIError, NoCheckpoint, NotPortable, OutOfMemory,
                      PerRankRegion, RegionNotFound, ShardMismatch, ShoalError, SizeMismatch, StateError,
                      UnsupportedVersion)
from .shard import Region, Shard, ShardError, read_shard, read_shard_file

__all__ = [
    "init", "protect", "protect_block", "protect_subarray", "protect_replicated",
    "protect_scalar", "unprotect", "status", "recover", "stored_count", "restart_nranks",
    "old_bytes", "read_old", "snapshot", "checkpoint", "progress", "finalize", "strerror",
    "version_number", "region_id", "library_path", "Scalar", "FRESH", "RESTARTED", "RESIZED",
    "ShoalError", "InvalidArgument", "StateError", "OutOfMemory", "CheckpointIOError",
    "MPIError", "CorruptShard", "NoCheckpoint", "ShardMismatch", "SizeMismatch",
    "UnsupportedVersion", "DirectoryError", "RegionNotFound", "PerRankRegion", "NotPortable",
    "SUCCESS", "ERR_ARG", "ERR_STATE", "ERR_NOMEM", "ERR_IO", "ERR_MPI", "ERR_CORRUPT",
    "ERR_NOCKPT", "ERR_MISMATCH", "ERR_SIZE", "ERR_VERSION", "ERR_DIR", "ERR_NOTFOUND",
    "ERR_PERRANK", "ERR_PORTABLE",
    "Region", "Shard", "ShardError", "read_shard", "read_shard_file",
]
