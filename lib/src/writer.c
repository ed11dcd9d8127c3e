/*
 * writer.c - the background thread of a rank. It hashes and writes the shard staged by
 * shoal_checkpoint, so the caller only pays for the memcpy into the staging buffer,
 * then the rank's traffic file and the epoch bookkeeping (manifest, pruning), off the
 * caller's path too; after a restore from a mapped shard it faults in the new staging
 * buffer.
 *
 * Contract: one writer per rank; the main thread only hands over a shard when the
 * writer is idle (writer_wait_idle) and does not touch the staging buffer until the
 * writer is idle again. The thread never calls MPI, so MPI_THREAD_SINGLE/FUNNELED is
 * enough. Errors are printed when they happen and counted, so that a later call
 * returns SHOAL_ERR_IO: none is lost.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#if defined(__linux__)
#include <sys/prctl.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* How often an idle writer looks for the rank's launcher (orphan.c), in seconds. */
#define ORPHAN_LOOK_S 1

/* Linux's SCHED_BATCH, hidden by <sched.h> without _GNU_SOURCE; the value is ABI. */
#if defined(__linux__) && !defined(SCHED_BATCH)
#define SCHED_BATCH 3
#endif

/* A shard being written: its sealer, where its block sums file goes, and whose it is. */
struct sealing {
    struct shard_sealer sealer;
    const char *sums_path;
    int rank;
    long long epoch;
};

/* The last look before a file of an epoch becomes visible (orphan.c). */
static void launcher_alive(void *arg)
{
    const struct sealing *s = arg;
    orphan_check(s->rank, s->epoch);
}

static void seal_piece(void *arg, size_t off, size_t n)
{
    shard_sealer_feed(&((struct sealing *)arg)->sealer, off, n);
}

/* Writes the block sums file of the sealed shard the file fd holds, keyed by its version
 * as fstat sees it now, before it is renamed into place: the agent then learns the
 * blocks' sums without reading the shard back, and a change to the file after this
 * point gives it another version, which the agent reads and verifies whole. A failure
 * loses nothing but that shortcut, and is not reported. */
static void write_sums(void *arg, int fd)
{
    struct sealing *s = arg;
    struct stat st;
    if (fstat(fd, &st) != 0)
        return;
    struct shard_sums_key key = {.ino = (uint64_t)st.st_ino,
                                 .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 +
                                             st.st_mtim.tv_nsec};
    size_t len = shard_sums_file_size(s->sealer.size, SHARD_BLOCK_SIZE);
    unsigned char *out = malloc(len);
    if (out == NULL)
        return;
    shard_put_sums(out, s->sealer.file, s->sealer.size, SHARD_BLOCK_SIZE, s->sealer.sums, &key);
    (void)store_write_atomic(s->sums_path, out, len, 0);
    free(out);
}

/* Writes the shard image file (size bytes) of epoch; fd >= 0 when file is the start of
 * the rank's stage file's mapping, which is then renamed into place instead (*consumed:
 * the stage file is cut or gone, its mapping no longer a staging buffer). Its block sums
 * file goes beside it first. */
static int write_shard_file(const char *jobdir, int rank, int spare, long long epoch,
                            unsigned char *file, size_t size, int fd, int *consumed,
                            char *failed_path, size_t failed_len)
{
    char dir[PATH_MAX], path[PATH_MAX], sums[PATH_MAX];
    int err = jobdir_path(dir, sizeof dir, jobdir, JOBDIR_EPOCH, epoch, rank);
    if (!err)
        err = jobdir_path(path, sizeof path, jobdir, JOBDIR_SHARD, epoch, rank);
    if (!err)
        err = jobdir_path(sums, sizeof sums, jobdir, JOBDIR_SUMS, epoch, rank);
    if (err) {
        (void)jobdir_path(failed_path, failed_len, jobdir, JOBDIR_EPOCH, epoch, rank);
        return err;
    }
    snprintf(failed_path, failed_len, "%s", dir);
    orphan_check(rank, epoch);
    if (mkdir(dir, 0755) == 0) {
        /* The new directory entry must be durable before the shard in it is. */
        err = store_fsync_dir(jobdir);
    } else if (errno != EEXIST) {
        err = errno;
    }
    if (err)
        return err;
    snprintf(failed_path, failed_len, "%s", path);
    /* Hashed a piece at a time, so each piece is read from memory once for the checksum
     * and the block sums (and, written out, for the write). */
    struct sealing s = {.sums_path = sums, .rank = rank, .epoch = epoch};
    struct store_hooks hooks = {
        .before = seal_piece, .written = write_sums, .renaming = launcher_alive, .arg = &s};
    int sealed = shard_sealer_init(&s.sealer, file, size) == 0;
    if (!sealed) {
        shard_seal(file, size);
        hooks.before = NULL;
        hooks.written = NULL;
    }
    if (fd >= 0) {
        /* The image is the file's own pages already: seal it, and it is the shard. */
        for (size_t off = 0; sealed && off < size; off += SHARD_BLOCK_SIZE)
            seal_piece(&s, off, size - off < SHARD_BLOCK_SIZE ? size - off : SHARD_BLOCK_SIZE);
        *consumed = 1;
        err = store_stage_to_shard(jobdir, rank, fd, size, path, &hooks);
    } else {
        char reuse[PATH_MAX];
        if (!spare || jobdir_path(reuse, sizeof reuse, jobdir, JOBDIR_SPARE, 0, rank) != 0)
            reuse[0] = 0;
        err = store_write_reusing(path, file, size, 1, reuse[0] ? reuse : NULL, &hooks);
    }
    if (sealed)
        shard_sealer_free(&s.sealer);
    return err;
}

/* The traffic file only informs placement: a failure is reported once and is not a
 * checkpoint error. */
static void write_traffic(struct writer *w, long long epoch)
{
    if (w->traffic == NULL || !w->traffic->on || w->traffic->epoch != epoch)
        return;
    char path[PATH_MAX], text[128];
    int err = traffic_write(w->jobdir, w->traffic, path, sizeof path);
    if (err && !w->traffic_failed) {
        w->traffic_failed = 1;
        shoal_log("rank %d: writing %s failed: %s (traffic files are not reported again)",
                  w->rank, path, shoal_errno_text(err, text, sizeof text));
    }
}

static void do_commit(struct writer *w, const struct manifest_entry *m, int n,
                      long long prune_below)
{
    /* The manifest first: it must never name an epoch that pruning removed. */
    if (w->rank == 0 && n > 0) {
        struct sealing newest = {.rank = w->rank, .epoch = m[n - 1].epoch};
        struct store_hooks hooks = {.renaming = launcher_alive, .arg = &newest};
        int err = manifest_write(w->jobdir, m, n, w->binding, &hooks);
        if (err) {
            char text[128];
            shoal_log("writing %s/manifest failed: %s", w->jobdir,
                      shoal_errno_text(err, text, sizeof text));
            pthread_mutex_lock(&w->mu);
            w->new_errors++;
            pthread_mutex_unlock(&w->mu);
            return; /* keep the older epochs: the manifest may still name them */
        }
    }
    if (prune_below > 0)
        store_prune(w->jobdir, prune_below, w->rank, w->nranks, w->rank == 0, w->spare);
}

static void *writer_main(void *arg)
{
    struct writer *w = arg;
#if defined(__linux__)
    /* A batch thread does not preempt the rank when it is woken: the rank, often bound
     * to the same core, finishes its call and goes on computing, and the writer takes
     * its fair share from then on instead of stretching the checkpoint call. */
    struct sched_param param = {0};
    pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
    /* Named, so that top -H, perf and bench/writer-cost tell it from the rank. */
    prctl(PR_SET_NAME, "shoal-writer", 0, 0, 0);
#endif
    pthread_mutex_lock(&w->mu);
    for (;;) {
        /* Bookkeeping first: it is quick, makes the previous epoch durable in the
         * manifest sooner, and pruning frees space before the next shard needs it. */
        if (w->commit_pending) {
            struct manifest_entry m[2];
            int n = w->manifest_n;
            long long below = w->prune_below;
            memcpy(m, w->manifest, sizeof m);
            w->commit_pending = 0;
            pthread_mutex_unlock(&w->mu);
            do_commit(w, m, n, below);
            pthread_mutex_lock(&w->mu);
            pthread_cond_broadcast(&w->cv);
            continue;
        }
        if (w->busy && w->file != NULL) {
            unsigned char *file = w->file;
            size_t size = w->size, map_len = w->map_len, next_cap = w->next_cap;
            long long epoch = w->epoch;
            int fd = w->fd, consumed = 0;
            pthread_mutex_unlock(&w->mu);

            char path[PATH_MAX], text[128];
            int err = write_shard_file(w->jobdir, w->rank, w->spare, epoch, file, size, fd,
                                       &consumed, path, sizeof path);
            if (err)
                shoal_log("rank %d: writing %s failed: %s", w->rank, path,
                          shoal_errno_text(err, text, sizeof text));
            unsigned char *next = NULL;
            int next_fd = -1;
            if (consumed) {
                munmap(file, map_len);
                close(fd);
                /* The next checkpoint's staging buffer; without one it makes its own. */
                if (next_cap > 0)
                    next = store_stage_map(w->jobdir, w->rank, w->spare, next_cap, 1, &next_fd);
            }
            write_traffic(w, epoch);

            pthread_mutex_lock(&w->mu);
            if (err) {
                w->failed = epoch;
                w->new_errors++;
            } else {
                w->written = epoch;
            }
            w->consumed |= consumed;
            if (next != NULL) {
                w->next = next;
                w->next_fd = next_fd;
            }
            w->file = NULL;
            w->busy = w->touch != NULL; /* a buffer to touch waits behind the shard */
            pthread_cond_broadcast(&w->cv);
            continue;
        }
        if (w->busy && w->touch != NULL) {
            unsigned char *buf = w->touch;
            size_t size = w->touch_size;
            int fd = w->touch_fd, failed = 0;
            pthread_mutex_unlock(&w->mu);
            if (fd >= 0)
                failed = store_stage_fault_in(buf, size, fd) != 0;
            else
                mem_touch(buf, size);
            pthread_mutex_lock(&w->mu);
            w->touch_failed |= failed;
            w->busy = 0;
            w->touch = NULL;
            pthread_cond_broadcast(&w->cv);
            continue;
        }
        if (w->stop)
            break;
        /* Idle, the thread still looks for its launcher now and then: an orphan that
         * never reaches another checkpoint (blocked in a collective with a rank that
         * left) must not run on forever. */
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += ORPHAN_LOOK_S;
        if (pthread_cond_timedwait(&w->cv, &w->mu, &until) == ETIMEDOUT) {
            pthread_mutex_unlock(&w->mu);
            orphan_check(w->rank, 0);
            pthread_mutex_lock(&w->mu);
        }
    }
    pthread_mutex_unlock(&w->mu);
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0)
        w->cpu_s = (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
    return NULL;
}

int writer_start(struct writer *w, const char *jobdir, int rank, int nranks, int spare,
                 const struct run_binding *binding, const struct traffic_snapshot *traffic)
{
    memset(w, 0, sizeof *w);
    w->jobdir = jobdir;
    w->binding = binding;
    w->traffic = traffic;
    w->rank = rank;
    w->nranks = nranks;
    w->spare = spare;
    if (pthread_mutex_init(&w->mu, NULL) != 0)
        return SHOAL_ERR_NOMEM;
    /* Timed waits on the monotonic clock: a change of the wall clock must not make the
     * idle writer spin or sleep for hours. */
    pthread_condattr_t attr;
    int cv_err = pthread_condattr_init(&attr);
    if (!cv_err) {
        cv_err = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        if (!cv_err)
            cv_err = pthread_cond_init(&w->cv, &attr);
        pthread_condattr_destroy(&attr);
    }
    if (cv_err) {
        pthread_mutex_destroy(&w->mu);
        return SHOAL_ERR_NOMEM;
    }
    if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
        pthread_cond_destroy(&w->cv);
        pthread_mutex_destroy(&w->mu);
        return SHOAL_ERR_NOMEM;
    }
    w->running = 1;
    return SHOAL_SUCCESS;
}

int writer_stop(struct writer *w)
{
    if (!w->running)
        return 0;
    pthread_mutex_lock(&w->mu);
    w->stop = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
    w->running = 0;
    return w->new_errors; /* the thread is gone: no lock needed */
}

void writer_wait_idle(struct writer *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->busy)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

int writer_is_busy(struct writer *w)
{
    pthread_mutex_lock(&w->mu);
    int busy = w->busy;
    pthread_mutex_unlock(&w->mu);
    return busy;
}

void writer_submit(struct writer *w, unsigned char *file, size_t size, long long epoch, int fd,
                   size_t map_len, size_t next_cap)
{
    pthread_mutex_lock(&w->mu);
    w->busy = 1;
    w->file = file;
    w->size = size;
    w->epoch = epoch;
    w->fd = fd;
    w->map_len = map_len;
    w->next_cap = next_cap;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void writer_touch(struct writer *w, unsigned char *buf, size_t size, int fd)
{
    pthread_mutex_lock(&w->mu);
    w->busy = 1;
    w->touch = buf;
    w->touch_size = size;
    w->touch_fd = fd;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void writer_take_stage(struct writer *w, struct writer_stage *out)
{
    pthread_mutex_lock(&w->mu);
    out->consumed = w->consumed;
    out->touch_failed = w->touch_failed;
    out->next = w->next;
    out->next_cap = w->next != NULL ? w->next_cap : 0;
    out->next_fd = w->next != NULL ? w->next_fd : -1;
    w->consumed = 0;
    w->touch_failed = 0;
    w->next = NULL;
    pthread_mutex_unlock(&w->mu);
}

void writer_record_failure(struct writer *w, long long epoch)
{
    pthread_mutex_lock(&w->mu);
    w->failed = epoch;
    w->new_errors++;
    pthread_mutex_unlock(&w->mu);
}

void writer_poll(struct writer *w, long long *written, long long *failed, int *new_errors)
{
    pthread_mutex_lock(&w->mu);
    *written = w->written;
    *failed = w->failed;
    *new_errors = w->new_errors;
    w->new_errors = 0;
    pthread_mutex_unlock(&w->mu);
}

void writer_commit(struct writer *w, const struct manifest_entry *m, int n,
                   long long prune_below)
{
    pthread_mutex_lock(&w->mu);
    /* Only the newest bookkeeping matters: the manifest is rewritten whole. */
    memcpy(w->manifest, m, sizeof w->manifest[0] * (size_t)n);
    w->manifest_n = n;
    w->prune_below = prune_below;
    w->commit_pending = 1;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}
