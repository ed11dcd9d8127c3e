/*
 * testutil.h - helpers of the MPI tests: a scratch directory shared by the ranks of one
 * machine, the SHOAL_* environment of a scenario, and file surgery on shards.
 */
#ifndef SHOAL_TEST_UTIL_H
#define SHOAL_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

extern int t_rank, t_nranks;
extern char t_base[256]; /* scratch directory, the same on every rank */

void t_setup(int *argc, char ***argv);
/* Sums the checks of all ranks, prints "N passed, M failed" on rank 0, removes the
 * scratch directory, finalizes MPI. Returns the exit status. */
int t_finish(void);

/* Clears every SHOAL_* variable, then sets SHOAL_DIR=t_base and SHOAL_JOB=job. */
void t_env(const char *job);
void t_barrier(void);
/* Removes the job's `finished` mark, as if its last run had died instead of calling
 * shoal_finalize: running again must then resume. Collective. */
void t_unfinish(const char *job);

/* Paths in the scratch directory. */
void t_job_path(char *out, size_t len, const char *job, const char *name);
void t_shard_path(char *out, size_t len, const char *job, long long epoch, int rank);

int t_exists(const char *path);
long long t_file_size(const char *path);
/* Reads a small text file; "" if missing. */
void t_read_text(const char *path, char *buf, size_t len);
/* Sleeps ms milliseconds. */
void t_sleep_ms(int ms);
/* Writes job's request-checkpoint as the runner does: whole, then renamed into place. */
int t_write_request(const char *job, const char *content);
int t_write_text(const char *path, const char *text);
int t_copy(const char *src, const char *dst);
/* Shard surgery; each returns 0 on success. off < 0 counts from the end. */
int t_flip_byte(const char *path, long long off);
int t_truncate(const char *path, long long size);
/* Overwrites a little-endian u32 at off, then writes a matching checksum, so that the
 * shard fails a later check than the checksum one. */
int t_patch_u32_resealed(const char *path, long long off, uint32_t value);

#endif
