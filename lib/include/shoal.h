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
 * Environment (set by `shoal run`; all optional for plain mpirun):
 *   SHOAL_DIR            where shards go (default ./shoal-ckpt)
 *   SHOAL_JOB            job id (default: the program's file name)
 *   SHOAL_CKPT_INTERVAL  seconds between checkpoints, or a duration like 500ms, 30s, 2m
 *                        (default 30s; 0 disables interval checkpoints); auto: rank 0
 *                        computes it from the cost of a checkpoint and SHOAL_MTBF
 *   SHOAL_MTBF           with auto, the job's mean time between failures (default 1h)
 *   SHOAL_RESTART_EPOCH  epoch to restore (set by the runner; -1 or 0 means fresh start);
 *                        without it the newest complete epoch in SHOAL_DIR is used
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
    XX(ERR_NOTFOUND, -12, "no protected region with that id")

enum shoal_errno {
#define SHOAL_XX_ENUM(name, value, msg) SHOAL_##name = (value),
    SHOAL_ERRNO_MAP(SHOAL_XX_ENUM)
#undef SHOAL_XX_ENUM
};

/* Collective. After MPI_Init. Reads the environment, and finds the checkpoint to
 * restart from, if any (see shoal_status). */
SHOAL_EXPORT int shoal_init(MPI_Comm comm);

/* Registers (or re-registers, e.g. after an array grew) count elements of type at ptr
 * under id. Local; the pointer must stay valid until unprotected or re-protected.
 * type must have no holes (predefined types, MPI_Type_contiguous of them): SHOAL_ERR_ARG
 * otherwise. */
SHOAL_EXPORT int shoal_protect(int id, void *ptr, size_t count, MPI_Datatype type);
SHOAL_EXPORT int shoal_unprotect(int id);

/* 0: fresh start; 1: restarted, a checkpoint is waiting to be recovered. */
SHOAL_EXPORT int shoal_status(void);

/* Collective. Restores every protected region from the restart checkpoint, or none:
 * SHOAL_ERR_NOTFOUND if a region is not in it, SHOAL_ERR_SIZE if its count differs. */
SHOAL_EXPORT int shoal_recover(void);

/* Element count of region id in the restart checkpoint, so that a program can size an
 * array before protecting and recovering it. */
SHOAL_EXPORT int shoal_stored_count(int id, size_t *count);

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
