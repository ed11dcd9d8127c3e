/*
 * shoal.h - application-level checkpointing for MPI programs that survive node loss.
 *
 * Call order: MPI_Init, shoal_init, shoal_protect (any number), then in the main loop
 * shoal_snapshot once per iteration at a point with no MPI message in flight, and
 * shoal_finalize before MPI_Finalize.
 *
 * Every function returns SHOAL_SUCCESS (0) or a negative SHOAL_ERR_* code;
 * shoal_strerror turns a code into a message. Calls marked "collective" must be made by
 * every rank of the communicator given to shoal_init, in the same order.
 *
 * A region is per-rank (shoal_protect: restored onto the same rank only), distributed
 * (shoal_protect_block, shoal_protect_subarray: the rank's part of a global array) or
 * replicated (shoal_protect_replicated: the same on every rank). A program whose regions
 * are all distributed or replicated is elastic: a checkpoint of N ranks restores onto M
 * (shoal_status then says SHOAL_RESIZED), each rank's part filled from the old ranks'
 * shards that hold it. See docs/libshoal.md, "Changing the rank count".
 *
 * Environment (set by `shoal run`; all optional for plain mpirun):
 *   SHOAL_DIR            where shards go (default ./shoal-ckpt)
 *   SHOAL_JOB            job id (default: the program's file name)
 *   SHOAL_CKPT_INTERVAL  seconds between checkpoints, or a duration like 500ms, 30s, 2m
 *                        (default 30s; 0 disables interval checkpoints); auto: rank 0
 *                        computes it from the cost of a checkpoint and SHOAL_MTBF
 *   SHOAL_MTBF           with auto, the job's mean time between failures (default 1h)
 *   SHOAL_RESTART_EPOCH  epoch to restore (set by the runner; -1 or 0 means fresh start);
 *                        without it the newest complete epoch in SHOAL_DIR is used
 *   SHOAL_RESTART_NRANKS the rank count that wrote SHOAL_RESTART_EPOCH (set by the
 *                        runner; default: this run's)
 *   SHOAL_ELASTIC        1: the job's rank count may change, and shoal_protect (a
 *                        per-rank region) is refused with SHOAL_ERR_PERRANK
 *   SHOAL_EPOCH_BASE     first epoch number this run may write (set by the runner)
 *   SHOAL_HOLD_TIMEOUT   after a checkpoint the runner asked with `hold`, the ranks wait
 *                        in shoal_snapshot/shoal_checkpoint to be killed for a relaunch,
 *                        at most this long (default 120 s; 0: never hold)
 *   SHOAL_TRAFFIC        0: do not count the program's traffic (default 1, below)
 *
 * Traffic: libshoal also defines MPI_Send and the other point-to-point calls, each
 * forwarding to its PMPI_ name, and from shoal_init to shoal_finalize counts the bytes
 * and messages sent to each rank; every checkpoint writes the counts beside the shards
 * ($SHOAL_DIR/$SHOAL_JOB/traffic/RANK), so that ranks that talk a lot can be placed
 * together. Link -lshoal before the MPI library (mpicc and pkg-config do). See
 * docs/traffic.md.
 */
#ifndef SHOAL_H
#define SHOAL_H

#include <stddef.h>
#include <stdint.h>
#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHOAL_VERSION_MAJOR 0
#define SHOAL_VERSION_MINOR 1
#define SHOAL_VERSION_PATCH 0
#define SHOAL_VERSION_NUMBER \
    (SHOAL_VERSION_MAJOR * 10000 + SHOAL_VERSION_MINOR * 100 + SHOAL_VERSION_PATCH)

#if defined(_WIN32)
#define SHOAL_EXPORT
#else
#define SHOAL_EXPORT __attribute__((visibility("default")))
#endif

/* Error codes: stable numbers, never reused. */
#define SHOAL_ERRNO_MAP(XX)                                                        \
    XX(SUCCESS, 0, "success")                                                      \
    XX(ERR_ARG, -1, "invalid argument")                                            \
    XX(ERR_STATE, -2, "call out of order (shoal_init missing or repeated)")        \
    XX(ERR_NOMEM, -3, "out of memory")                                             \
    XX(ERR_IO, -4, "checkpoint I/O failed")                                        \
    XX(ERR_MPI, -5, "MPI call failed")                                             \
    XX(ERR_CORRUPT, -6, "corrupt shard (bad magic, truncated or checksum mismatch)") \
    XX(ERR_NOCKPT, -7, "no complete checkpoint to recover from")                   \
    XX(ERR_MISMATCH, -8, "shard belongs to another job, rank or epoch")            \
    XX(ERR_SIZE, -9, "protected region size differs from the checkpointed one")    \
    XX(ERR_VERSION, -10, "unsupported shard version")                              \
    XX(ERR_DIR, -11, "checkpoint directory is not writable")                       \
    XX(ERR_NOTFOUND, -12, "no protected region with that id")                      \
    XX(ERR_PERRANK, -13, "a per-rank region cannot follow a change of the rank count")   \
    XX(ERR_PORTABLE, -14, "a region is not portable from the machine that wrote it")

enum shoal_errno {
#define SHOAL_XX_ENUM(name, value, msg) SHOAL_##name = (value),
    SHOAL_ERRNO_MAP(SHOAL_XX_ENUM)
#undef SHOAL_XX_ENUM
};

/* What shoal_status says. */
enum shoal_status_value {
    SHOAL_FRESH = 0,     /* a fresh start */
    SHOAL_RESTARTED = 1, /* restarted from a checkpoint of as many ranks */
    SHOAL_RESIZED = 2    /* restarted from a checkpoint of another number of ranks */
};

/* Collective. After MPI_Init. Reads the environment, and finds the checkpoint to
 * restart from, if any (see shoal_status). */
SHOAL_EXPORT int shoal_init(MPI_Comm comm);

/* Registers (or re-registers, e.g. after an array grew) count elements of type at ptr
 * under id. Local; the pointer must stay valid until unprotected or re-protected.
 * type must lie within [0, extent) (its lower bound 0): SHOAL_ERR_ARG otherwise. A type
 * with holes (a struct's padding) is saved whole, extent bytes an element, and restores
 * only on a machine of the same ABI. */
SHOAL_EXPORT int shoal_protect(int id, void *ptr, size_t count, MPI_Datatype type);

/* Local. This rank's part of a 1-D array of global elements of type, distributed in
 * blocks: its count elements at ptr are global elements offset to offset + count - 1.
 * The parts of the ranks must not overlap. */
SHOAL_EXPORT int shoal_protect_block(int id, void *ptr, size_t count, MPI_Datatype type,
                                     uint64_t global, uint64_t offset);

/* Local. This rank's part of an ndims-dimensional array, in the shape
 * MPI_Type_create_subarray takes: the array has sizes[d] elements of type along
 * dimension d, this rank's box subsizes[d] of them from starts[d], and ptr holds exactly
 * the box, contiguous, in order (MPI_ORDER_C or MPI_ORDER_FORTRAN). Boxes must not
 * overlap. */
SHOAL_EXPORT int shoal_protect_subarray(int id, void *ptr, int ndims, const int sizes[],
                                        const int subsizes[], const int starts[], int order,
                                        MPI_Datatype type);

/* Local. count elements of type that are the same on every rank (a step counter, a
 * parameter): restored from any one old rank, and checked equal across the old ranks
 * after a change of the rank count. */
SHOAL_EXPORT int shoal_protect_replicated(int id, void *ptr, size_t count, MPI_Datatype type);

SHOAL_EXPORT int shoal_unprotect(int id);

/* SHOAL_FRESH, SHOAL_RESTARTED or SHOAL_RESIZED (a checkpoint waits to be recovered,
 * and stays "restarted" after it is). */
SHOAL_EXPORT int shoal_status(void);

/* Collective. Restores every protected region from the restart checkpoint, or none:
 * SHOAL_ERR_NOTFOUND if a region is not in it, SHOAL_ERR_SIZE if its count differs.
 * After a change of the rank count each rank's distributed parts come from the old
 * shards that hold them; a per-rank region is SHOAL_ERR_PERRANK. A region that does not
 * mean the same on this machine as on the one that wrote it (long double between amd64
 * and arm64, a type with holes: docs/libshoal.md, "Moving between machines") is
 * SHOAL_ERR_PORTABLE. */
SHOAL_EXPORT int shoal_recover(void);

/* Element count of region id in the restart checkpoint, so that a program can size an
 * array before protecting and recovering it: a per-rank region's count on this rank, a
 * replicated one's, a distributed one's global count (the product of the sizes of a
 * subarray). */
SHOAL_EXPORT int shoal_stored_count(int id, size_t *count);

/* Local. The number of ranks that wrote the restart checkpoint (SHOAL_ERR_NOCKPT on a
 * fresh start). */
SHOAL_EXPORT int shoal_restart_nranks(int *nranks);

/* Local. The size in bytes of region id in the restart checkpoint's shard of old rank
 * old_rank. */
SHOAL_EXPORT int shoal_old_bytes(int old_rank, int id, size_t *bytes);

/* Collective, after a restart, before the run's own checkpoints replace the restart
 * epoch: each rank reads len bytes at offset of region id of the shard old rank
 * old_rank wrote into buf, wherever that shard is (len 0: nothing, for this rank). For
 * state a program redistributes itself. */
SHOAL_EXPORT int shoal_read_old(int old_rank, int id, size_t offset, void *buf, size_t len);

/* Collective. Checkpoints when one is due (interval elapsed, runner request), is cheap
 * otherwise; on the first call after a restart it recovers instead. */
SHOAL_EXPORT int shoal_snapshot(void);

/* Collective. Checkpoints now. */
SHOAL_EXPORT int shoal_checkpoint(void);

/* Optional: fraction of the work done, 0 to 1, shown by `shoal run`. Rank 0's counts. */
SHOAL_EXPORT int shoal_progress(double fraction);

/* Collective. Waits for the last checkpoint to be written, releases everything. */
SHOAL_EXPORT int shoal_finalize(void);

SHOAL_EXPORT const char *shoal_strerror(int code);
SHOAL_EXPORT int shoal_version_number(void);

#ifdef __cplusplus
}
#endif

#endif /* SHOAL_H */
