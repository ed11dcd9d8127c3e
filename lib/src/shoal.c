/*
 * shoal.c - the public API: every function of shoal.h is here, and nowhere else. Each
 * one checks its arguments and the library's state, asks the modules below what to do
 * (agree.c: checkpoint now, hold after it; restart.c: which epoch to restart from, and
 * whether it can be recovered) and does it with them (checkpoint.c, writer.c, store.c).
 * None of those calls back up into this file. Also here: the library's lifetime, the
 * cost of checkpoints and the interval it implies, progress and statistics. See shoal.h
 * for the contract and docs/libshoal.md for the behaviour.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* One context per process: static storage, so that shoal_init cannot fail to allocate
 * it on one rank only and leave the others waiting in a collective. active is NULL
 * outside shoal_init ... shoal_finalize. */
static struct shoal_ctx the_ctx;
static struct shoal_ctx *active;

/* Everything shoal_init does before talking to the other ranks. */
static int init_local(struct shoal_ctx *c, char *msg, size_t msglen)
{
    int rc = config_from_env(&c->cfg, msg, msglen);
    if (rc != SHOAL_SUCCESS)
        return rc;
    if (c->nranks - 1 > SHARD_RANK_MAX) {
        snprintf(msg, msglen, "%d ranks: shard names hold at most %d", c->nranks,
                 SHARD_RANK_MAX + 1);
        return SHOAL_ERR_ARG;
    }
    const char *dir = c->cfg.dir;
    /* The files rank 0 looks at often: named once. */
    const struct {
        char *path;
        size_t len;
        enum jobdir_kind kind;
    } files[] = {{c->request_path, sizeof c->request_path, JOBDIR_REQUEST},
                 {c->request_taken_path, sizeof c->request_taken_path, JOBDIR_REQUEST_TAKEN},
                 {c->progress_path, sizeof c->progress_path, JOBDIR_PROGRESS},
                 {c->interval_path, sizeof c->interval_path, JOBDIR_INTERVAL}};
    int err = jobdir_of(c->jobdir, sizeof c->jobdir, dir, c->cfg.job);
    for (size_t i = 0; !err && i < sizeof files / sizeof files[0]; i++)
        err = jobdir_path(files[i].path, files[i].len, c->jobdir, files[i].kind, 0, 0);
    if (err) {
        snprintf(msg, msglen, "checkpoint directory %.200s: path too long", dir);
        return SHOAL_ERR_DIR;
    }
    err = store_mkdirs(c->jobdir);
    if (!err)
        err = store_probe_writable(c->jobdir, c->rank);
    if (err) {
        char text[128];
        snprintf(msg, msglen, "checkpoint directory %.300s is not writable (SHOAL_DIR): %s",
                 c->jobdir, shoal_errno_text(err, text, sizeof text));
        return SHOAL_ERR_DIR;
    }
    alive_open(c);
    return SHOAL_SUCCESS;
}

/* The first epoch this run writes: SHOAL_EPOCH_BASE, or above every epoch any rank can
 * see, so that a shard of an earlier run is never rewritten. Also starts the writer,
 * whose failure is agreed on in the same message. */
static int choose_epoch_base(struct shoal_ctx *c, const struct manifest_entry *m, int n)
{
    long long highest = c->restart_epoch;
    if (n > 0 && m[n - 1].epoch > highest)
        highest = m[n - 1].epoch;
    long long *epochs;
    int count;
    if (store_list_epochs(c->jobdir, &epochs, &count) == 0) {
        if (count > 0 && epochs[count - 1] > highest)
            highest = epochs[count - 1];
        free(epochs);
    }
    int started = writer_start(&c->writer, c->jobdir, c->rank, c->nranks, c->cfg.spare,
                               &c->binding, &c->traffic);
    long long in[2] = {highest, -(long long)started}, out[2];
    if (MPI_Allreduce(in, out, 2, MPI_LONG_LONG, MPI_MAX, c->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    if (out[1] != 0)
        return SHOAL_ERR_NOMEM;
    c->next_epoch = c->cfg.epoch_base > 0 ? c->cfg.epoch_base : out[0] + 1;
    if (c->next_epoch > SHARD_EPOCH_MAX) {
        if (c->rank == 0)
            shoal_log("epoch numbers exhausted in %s (highest %lld)", c->jobdir, out[0]);
        return SHOAL_ERR_ARG;
    }
    return SHOAL_SUCCESS;
}

/* Rank 0 tells readers (shoal run) the interval in use. Not durable: a lost file only
 * hides the interval until the next one. */
static void write_interval(struct shoal_ctx *c)
{
    char line[128];
    int len = interval_line(line, sizeof line, &c->cfg, c->ckpt_cost);
    if (len < 0 || len >= (int)sizeof line)
        return;
    c->interval_written = c->cfg.interval_s;
    int err = store_write_atomic(c->interval_path, line, (size_t)len, 0);
    if (err && !c->interval_failed) {
        char text[128];
        shoal_log("writing %s failed: %s", c->interval_path,
                  shoal_errno_text(err, text, sizeof text));
        c->interval_failed = 1;
    }
}

/* Rank 0: a checkpoint cost the run cost_s seconds. */
static void cost_measured(struct shoal_ctx *c, double cost_s)
{
    int measured = c->ckpt_cost > 0;
    c->ckpt_cost = interval_cost_mean(c->ckpt_cost, cost_s);
    if (c->cfg.interval_auto) {
        /* Only rank 0 decides when a checkpoint is due: the others' interval_s is
         * never read. The file is on the checkpoint's path: it is written again
         * for the first measured cost and when the interval moved by a twentieth. */
        c->cfg.interval_s = interval_auto(c->ckpt_cost, c->cfg.mtbf_s);
        if (!measured || fabs(c->cfg.interval_s - c->interval_written) >= 0.05 * c->interval_written)
            write_interval(c);
    }
}

/* Local: after a checkpoint that blocked the caller blocked_s seconds, until now. Rank 0
 * also follows the cost and, with the automatic interval, the interval it implies: at
 * once when the program checkpoints by itself (measure 0), else by the run's slowdown
 * once the checkpoint's settling window closes (agreement_seen). */
static void checkpoint_taken(struct shoal_ctx *c, double blocked_s, double now, int measure)
{
    c->checkpoint_gap = now - c->t_checkpoint; /* the caller sets t_checkpoint next */
    c->block_sum += blocked_s;
    if (blocked_s > c->block_max)
        c->block_max = blocked_s;
    if (c->rank != 0)
        return;
    if (!measure) {
        cost_measured(c, blocked_s);
        return;
    }
    double open = slowdown_checkpoint(&c->slow, now, blocked_s,
                                      slowdown_settle(c->cfg.interval_s));
    if (open >= 0)
        cost_measured(c, open);
}

/* Rank 0, at an agreement: k calls took took_s since the previous one. */
static void agreement_seen(struct shoal_ctx *c, double now, int k, double took_s)
{
    double cost = slowdown_agreement(&c->slow, now, k, took_s);
    if (cost >= 0)
        cost_measured(c, cost);
}

static void ctx_release(struct shoal_ctx *c)
{
    if (c->writer.running)
        stage_wait(c);
    writer_stop(&c->writer);
    traffic_stop(&c->traffic);
    restart_release(c);
    resize_release(c);
    alive_close(c);
    free(c->regions);
    stage_free(c);
    MPI_Comm_free(&c->comm);
    memset(c, 0, sizeof *c);
}

SHOAL_EXPORT int shoal_init(MPI_Comm comm)
{
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized || active != NULL)
        return SHOAL_ERR_STATE;
    /* Before comm is used: a handle of the other MPI means nothing to this build. */
    char mismatch[512];
    if (mpiname_check(mismatch, sizeof mismatch)) {
        /* Said once, by the launcher's rank 0 (either MPI's variable), not by each rank. */
        const char *r = getenv("OMPI_COMM_WORLD_RANK");
        if (r == NULL)
            r = getenv("PMI_RANK");
        if (r == NULL || strcmp(r, "0") == 0)
            shoal_log("%s", mismatch);
        return SHOAL_ERR_MPI;
    }
    if (comm == MPI_COMM_NULL)
        return SHOAL_ERR_ARG;

    struct shoal_ctx *c = &the_ctx;
    memset(c, 0, sizeof *c);
    c->stage_fd = -1;
    c->alive_fd = -1;
    if (MPI_Comm_dup(comm, &c->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    /* Errors on the library's own communicator come back as codes, not aborts. */
    MPI_Comm_set_errhandler(c->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->nranks);
    if (c->rank == 0)
        binding_current(&c->binding);
    /* Before the writer starts: it reads what this records. */
    orphan_watch();

    char msg[512] = "";
    struct manifest_entry *m = NULL;
    int n = 0;
    int rc = init_local(c, msg, sizeof msg);
    rc = agree_error(c, rc, msg);
    if (rc == SHOAL_SUCCESS)
        rc = restart_read_manifest(c, &m, &n);
    if (rc == SHOAL_SUCCESS)
        rc = restart_find(c, m, n);
    /* On the same count too, every rank learns the old shards' tables, for
     * shoal_read_old and shoal_old_bytes; without them those calls fail, not the run. */
    if (rc == SHOAL_SUCCESS && c->status == SHOAL_RESTARTED)
        (void)resize_adopt(c);
    if (rc == SHOAL_SUCCESS)
        rc = choose_epoch_base(c, m, n);
    if (rc == SHOAL_SUCCESS)
        rc = agree_calibrate(c);
    if (rc != SHOAL_SUCCESS) {
        free(m);
        ctx_release(c);
        return rc;
    }

    /* The complete epochs so far are those up to the one restarted from: newer ones
     * were unusable (or not chosen by the runner) and must not count among the two
     * that pruning keeps. A fresh start keeps none. */
    for (int i = 0; i < n && m[i].epoch <= c->restart_epoch; i++)
        agree_note_complete(c, &m[i]);
    free(m);
    /* Leftovers of killed runs; epochs from next_epoch on are this run's to write. */
    store_remove_stale_tmp(c->jobdir, c->next_epoch, c->rank, c->rank == 0);

    /* Counting starts here, not at MPI_Init: calls made before are not counted. */
    traffic_start(&c->traffic, c->next_epoch, c->cfg.traffic);
    c->k = 1;
    c->countdown = 1;
    c->t_agreed = c->t_checkpoint = shoal_now();
    /* Not where the runner removes epochs (a cluster): a rank moved to another node
     * would leave its stage file behind on the old one. */
    c->stage_in_file = !c->cfg.keep_epochs && store_is_tmpfs(c->jobdir);
    if (c->rank == 0)
        write_interval(c);
    active = c;
    return SHOAL_SUCCESS;
}

/* The checks every protect call makes of its datatype: the bytes of one element in
 * *size, its code in l->dtype and its flags in l->flags, or SHOAL_ERR_ARG for a type
 * that does not start at its lower bound 0. A type with holes (a struct's padding, a
 * stride) is copied whole, extent bytes an element, and bound to this machine's ABI. */
static int check_type(int id, MPI_Datatype type, int *size, struct region_layout *l)
{
    if (type == MPI_DATATYPE_NULL)
        return SHOAL_ERR_ARG;
    MPI_Aint lb, extent, true_lb, true_extent;
    if (MPI_Type_size(type, size) != MPI_SUCCESS ||
        MPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS ||
        MPI_Type_get_true_extent(type, &true_lb, &true_extent) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    /* The region is copied with memcpy: its elements must lie in [0, extent) each. */
    if (*size <= 0 || lb != 0 || true_lb < 0 || extent > INT_MAX || true_extent > extent - true_lb) {
        shoal_log("shoal_protect(%d): the datatype must lie within [0, extent) (size %d, lower "
                  "bound %ld, extent %ld)",
                  id, *size, (long)lb, (long)extent);
        return SHOAL_ERR_ARG;
    }
    l->dtype = layout_datatype_code(type);
    l->flags = l->dtype == 0 ? portable_type_flags(type) : 0;
    if (extent != *size) {
        l->flags |= SHARD_FLAG_ABI_BOUND;
        *size = (int)extent;
    }
    return SHOAL_SUCCESS;
}

/* The checks and the registration every protect call shares. */
static int protect(int id, void *ptr, size_t count, MPI_Datatype type, struct region_layout *l)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    if (ptr == NULL && count > 0)
        return SHOAL_ERR_ARG;
    int size;
    int rc = check_type(id, type, &size, l);
    if (rc != SHOAL_SUCCESS)
        return rc;
    if (count > SIZE_MAX / (size_t)size)
        return SHOAL_ERR_ARG;
    return checkpoint_protect(c, id, ptr, count, size, l);
}

SHOAL_EXPORT int shoal_protect(int id, void *ptr, size_t count, MPI_Datatype type)
{
    struct shoal_ctx *c = active;
    if (c != NULL && c->cfg.elastic) {
        /* Refused at once, not at the first change of the count, which it would fail. */
        shoal_log("shoal_protect(%d): the job is elastic (SHOAL_ELASTIC=1) and a per-rank "
                  "region cannot follow a change of its rank count; protect it with "
                  "shoal_protect_block, shoal_protect_subarray or shoal_protect_replicated",
                  id);
        return SHOAL_ERR_PERRANK;
    }
    struct region_layout l;
    memset(&l, 0, sizeof l);
    l.kind = REGION_PLAIN;
    return protect(id, ptr, count, type, &l);
}

SHOAL_EXPORT int shoal_protect_block(int id, void *ptr, size_t count, MPI_Datatype type,
                                     uint64_t global, uint64_t offset)
{
    if (offset > global || count > global - offset) {
        if (active != NULL)
            shoal_log("shoal_protect_block(%d): elements %llu to %llu are not within the %llu "
                      "of the array",
                      id, (unsigned long long)offset, (unsigned long long)(offset + count),
                      (unsigned long long)global);
        return active == NULL ? SHOAL_ERR_STATE : SHOAL_ERR_ARG;
    }
    struct region_layout l;
    memset(&l, 0, sizeof l);
    l.kind = REGION_BLOCK;
    l.global = global;
    l.offset = offset;
    return protect(id, ptr, count, type, &l);
}

SHOAL_EXPORT int shoal_protect_subarray(int id, void *ptr, int ndims, const int sizes[],
                                        const int subsizes[], const int starts[], int order,
                                        MPI_Datatype type)
{
    if (active == NULL)
        return SHOAL_ERR_STATE;
    struct region_layout l;
    memset(&l, 0, sizeof l);
    char msg[200];
    uint64_t count;
    int code = order == MPI_ORDER_C ? LAYOUT_ORDER_C
               : order == MPI_ORDER_FORTRAN ? LAYOUT_ORDER_FORTRAN : -1;
    if (code < 0) {
        shoal_log("shoal_protect_subarray(%d): order %d is neither MPI_ORDER_C nor "
                  "MPI_ORDER_FORTRAN",
                  id, order);
        return SHOAL_ERR_ARG;
    }
    if (layout_subarray(&l, ndims, sizes, subsizes, starts, code, &count, msg, sizeof msg) != 0 ||
        count > SIZE_MAX) {
        shoal_log("shoal_protect_subarray(%d): %s", id, msg);
        return SHOAL_ERR_ARG;
    }
    return protect(id, ptr, (size_t)count, type, &l);
}

SHOAL_EXPORT int shoal_protect_replicated(int id, void *ptr, size_t count, MPI_Datatype type)
{
    struct region_layout l;
    memset(&l, 0, sizeof l);
    l.kind = REGION_REPLICATED;
    return protect(id, ptr, count, type, &l);
}

SHOAL_EXPORT int shoal_unprotect(int id)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    return checkpoint_unprotect(c, id);
}

SHOAL_EXPORT int shoal_status(void)
{
    struct shoal_ctx *c = active;
    return c == NULL ? SHOAL_ERR_STATE : c->status;
}

/* shoal_recover, also run by the first shoal_snapshot after a restart. */
static int recover(struct shoal_ctx *c)
{
    double t0 = shoal_now();
    if (c->status == SHOAL_RESIZED) {
        int rc = resize_recover(c);
        if (rc != SHOAL_SUCCESS)
            return rc;
        c->recovered = 1;
        c->restore_s = shoal_now() - t0;
        stage_prefault(c); /* no image to take over: the writer faults in a new buffer */
        return SHOAL_SUCCESS;
    }
    char msg[512] = "";
    int rc = restart_recover_local(c, msg, sizeof msg);
    int agreed = agree_error(c, rc, msg);
    if (rc != SHOAL_SUCCESS)
        return rc;
    if (agreed != SHOAL_SUCCESS)
        return agreed;
    c->recovered = 1;
    c->restore_s = shoal_now() - t0;
    stage_after_restore(c);
    return SHOAL_SUCCESS;
}

SHOAL_EXPORT int shoal_recover(void)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    return recover(c);
}

SHOAL_EXPORT int shoal_stored_count(int id, size_t *count)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    if (count == NULL)
        return SHOAL_ERR_ARG;
    if (c->status == SHOAL_FRESH)
        return SHOAL_ERR_NOCKPT;
    uint64_t n;
    if (c->status == SHOAL_RESIZED) {
        int rc = resize_stored_count(c, id, &n);
        if (rc != SHOAL_SUCCESS)
            return rc;
    } else {
        const struct stored_region *s = restart_stored(c, id);
        if (s == NULL)
            return SHOAL_ERR_NOTFOUND;
        n = s->count;
        if (s->layout.kind == REGION_BLOCK)
            n = s->layout.global;
        else if (s->layout.kind == REGION_SUBARRAY)
            n = layout_volume(s->layout.ndims, (uint64_t[SHARD_MAX_DIMS]){0}, s->layout.sizes);
    }
    if (n > SIZE_MAX)
        return SHOAL_ERR_SIZE;
    *count = (size_t)n;
    return SHOAL_SUCCESS;
}

SHOAL_EXPORT int shoal_restart_nranks(int *nranks)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    if (nranks == NULL)
        return SHOAL_ERR_ARG;
    if (c->status == SHOAL_FRESH)
        return SHOAL_ERR_NOCKPT;
    *nranks = c->old_nranks;
    return SHOAL_SUCCESS;
}

SHOAL_EXPORT int shoal_old_bytes(int old_rank, int id, size_t *bytes)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    if (bytes == NULL)
        return SHOAL_ERR_ARG;
    if (c->status == SHOAL_FRESH || c->resize == NULL)
        return SHOAL_ERR_NOCKPT;
    return resize_old_bytes(c, old_rank, id, bytes);
}

SHOAL_EXPORT int shoal_read_old(int old_rank, int id, size_t offset, void *buf, size_t len)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    /* Every rank agrees before any moves a byte: a rank's bad arguments fail them all. */
    int rc = buf == NULL && len > 0 ? SHOAL_ERR_ARG : SHOAL_SUCCESS;
    if (rc == SHOAL_SUCCESS && (c->status == SHOAL_FRESH || c->resize == NULL))
        rc = SHOAL_ERR_NOCKPT;
    rc = agree_error(c, rc, "shoal_read_old: no restart checkpoint's shards to read, or no buffer");
    if (rc != SHOAL_SUCCESS)
        return rc;
    return resize_read_old(c, old_rank, id, offset, buf, len);
}

/* Every K calls of shoal_snapshot: the ranks agree whether to checkpoint, and do. */
static int snapshot_agree(struct shoal_ctx *c)
{
    double t0 = shoal_now();
    c->calls += c->k;
    alive_note(c, t0, ALIVE_RUN, 0);
    if (c->rank == 0 && c->agreements > 0) /* the first call follows the program's setup */
        agreement_seen(c, t0, c->k, t0 - c->t_agreed);
    struct exchange ex;
    int rc = agree_snapshot(c, t0, !stage_ready(c), &ex);
    if (rc != SHOAL_SUCCESS)
        return rc;
    if (ex.checkpoint) {
        long long epoch = c->next_epoch;
        rc = checkpoint_copy(c);
        checkpoint_submit(c, 0);
        double t1 = shoal_now();
        checkpoint_taken(c, t1 - t0, t1, 1);
        c->t_checkpoint = t1;
        /* A long copy is not a pause of the rank's calls. */
        alive_note(c, t1, ALIVE_RUN, 1);
        if (ex.hold) {
            alive_note(c, shoal_now(), ALIVE_HOLD, 1);
            agree_hold(c, epoch);
            /* Nothing was computed while holding: the interval starts again now. */
            c->t_checkpoint = shoal_now();
            alive_note(c, c->t_checkpoint, ALIVE_RUN, 1);
        }
    }
    c->t_agreed = shoal_now();
    if (!ex.checkpoint) {
        c->agree_sum += c->t_agreed - t0;
        stage_refill(c, c->t_agreed);
    }
    if (rc != SHOAL_SUCCESS)
        return rc;
    return ex.io_error ? SHOAL_ERR_IO : SHOAL_SUCCESS;
}

SHOAL_EXPORT int shoal_snapshot(void)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    if (c->status != SHOAL_FRESH && !c->recovered)
        return recover(c);
    /* The common case: a counter, no clock, no message. */
    if (--c->countdown > 0)
        return SHOAL_SUCCESS;
    return snapshot_agree(c);
}

SHOAL_EXPORT int shoal_checkpoint(void)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    double t0 = shoal_now();
    alive_note(c, t0, ALIVE_RUN, 0);
    /* This checkpoint answers a pending request of the runner too; a `hold` is agreed
     * in the message below. */
    int request = c->rank == 0 ? agree_take_request(c) : REQUEST_NONE;
    long long epoch = c->next_epoch;
    int rc = checkpoint_copy(c);
    /* Completes the previous epoch, which every rank finished writing before copying
     * this one, and reports write errors on every rank alike. Done before the writer
     * starts: on a rank bound to one core, the writer thread would compete with this
     * allreduce for that core. */
    struct exchange ex = {0, 0, 0, 0, 0};
    int mrc = agree_exchange(c, 0, request == REQUEST_HOLD, 0, !stage_ready(c), &ex);
    checkpoint_submit(c, 1);
    double t1 = shoal_now();
    /* No agreements follow a program's own checkpoints to measure a slowdown by. */
    checkpoint_taken(c, t1 - t0, t1, 0);
    c->t_checkpoint = t1;
    alive_note(c, t1, ALIVE_RUN, 1);
    if (mrc == SHOAL_SUCCESS && ex.hold) {
        alive_note(c, shoal_now(), ALIVE_HOLD, 1);
        agree_hold(c, epoch);
        c->t_checkpoint = shoal_now();
        alive_note(c, c->t_checkpoint, ALIVE_RUN, 1);
    }
    if (rc != SHOAL_SUCCESS)
        return rc;
    if (mrc != SHOAL_SUCCESS)
        return mrc;
    return ex.io_error ? SHOAL_ERR_IO : SHOAL_SUCCESS;
}

static int write_progress(struct shoal_ctx *c)
{
    char line[32];
    int len = snprintf(line, sizeof line, "%.6g\n", c->progress_pending);
    int err = store_write_atomic(c->progress_path, line, (size_t)len, 0);
    c->progress_written_at = shoal_now();
    c->progress_dirty = 0;
    if (err) {
        char text[128];
        shoal_log("writing %s failed: %s", c->progress_path,
                  shoal_errno_text(err, text, sizeof text));
        return SHOAL_ERR_IO;
    }
    return SHOAL_SUCCESS;
}

SHOAL_EXPORT int shoal_progress(double fraction)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    if (!(fraction >= 0 && fraction <= 1)) /* also rejects NaN */
        return SHOAL_ERR_ARG;
    if (c->rank != 0)
        return SHOAL_SUCCESS;
    c->progress_pending = fraction;
    c->progress_dirty = 1;
    /* At most once a second; the last value is written at shoal_finalize. */
    if (c->progress_written_at > 0 && shoal_now() - c->progress_written_at < 1.0)
        return SHOAL_SUCCESS;
    return write_progress(c);
}

/* Rank 0 appends one JSON line to SHOAL_STATS; blocking times are the worst rank's, the
 * background threads' CPU time the sum over the ranks (their writers have stopped). */
static int write_stats(struct shoal_ctx *c)
{
    double mean = c->checkpoints > 0 ? c->block_sum / (double)c->checkpoints : 0;
    double in[6] = {mean, c->block_max, (double)c->bytes_max, c->agree_sum, c->agree_cost,
                    c->restore_s};
    double out[6], writer_cpu = 0;
    /* The restore's bytes summed over the ranks (exact as integers). */
    unsigned long long bytes[3] = {c->restore_needed_bytes, c->restore_local_bytes,
                                   c->restore_recv_bytes},
                       sum[3];
    if (MPI_Allreduce(in, out, 6, MPI_DOUBLE, MPI_MAX, c->comm) != MPI_SUCCESS ||
        MPI_Allreduce(&c->writer.cpu_s, &writer_cpu, 1, MPI_DOUBLE, MPI_SUM, c->comm) != MPI_SUCCESS ||
        MPI_Allreduce(bytes, sum, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, c->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    if (c->rank != 0 || c->cfg.stats[0] == 0)
        return SHOAL_SUCCESS;
    FILE *f = fopen(c->cfg.stats, "a");
    int ok = f != NULL;
    if (ok) {
        fprintf(f,
                "{\"checkpoints\":%lld,\"bytes_per_rank\":%.0f,\"blocking_mean_s\":%.9f,"
                "\"blocking_max_s\":%.9f,\"agreements\":%lld,\"agreeing_s\":%.9f,"
                "\"agreement_cost_s\":%.9f,\"writer_cpu_s\":%.6f,\"restored_from_nranks\":%d,"
                "\"restore_s\":%.6f,\"restore_needed_bytes\":%llu,\"restore_local_bytes\":%llu,"
                "\"restore_received_bytes\":%llu}\n",
                c->checkpoints, out[2], out[0], out[1], c->agreements, out[3], out[4], writer_cpu,
                c->status == SHOAL_FRESH ? 0 : c->old_nranks, out[5], sum[0], sum[1], sum[2]);
        ok = fclose(f) == 0;
    }
    if (!ok) {
        char text[128];
        shoal_log("writing SHOAL_STATS file %s failed: %s", c->cfg.stats,
                  shoal_errno_text(errno, text, sizeof text));
        return SHOAL_ERR_IO;
    }
    return SHOAL_SUCCESS;
}

/* Rank 0 marks the run as finished, so that running the program again in standalone
 * mode starts from the beginning instead of resuming at the last checkpoint. */
static int write_finished(struct shoal_ctx *c)
{
    long long epoch = c->restart_epoch;
    if (c->ncomplete > 0 && c->complete[c->ncomplete - 1].epoch > epoch)
        epoch = c->complete[c->ncomplete - 1].epoch;
    if (c->rank != 0 || epoch <= 0)
        return SHOAL_SUCCESS;
    /* An orphan's output went nowhere: running the program again must resume, not
     * start afresh. */
    orphan_check(c->rank, 0);
    int err = manifest_write_finished(c->jobdir, epoch);
    if (err) {
        char text[128];
        shoal_log("writing %s/finished failed: %s", c->jobdir,
                  shoal_errno_text(err, text, sizeof text));
        return SHOAL_ERR_IO;
    }
    return SHOAL_SUCCESS;
}

SHOAL_EXPORT int shoal_finalize(void)
{
    struct shoal_ctx *c = active;
    if (c == NULL)
        return SHOAL_ERR_STATE;
    /* No calls follow, on purpose: the rank is not to be judged hung while it waits
     * for the others here and in MPI_Finalize. */
    alive_note(c, shoal_now(), ALIVE_DONE, 1);
    /* Wait for the last shard, then one last agreement completes its epoch. */
    stage_wait(c);
    struct exchange ex = {0, 0, 0, 0, 0};
    int rc = agree_exchange(c, 0, 0, 0, !stage_ready(c), &ex);
    /* Runs the manifest update and pruning just queued. */
    int errors = writer_stop(&c->writer);
    /* No shard follows to write over a pruned one's pages, or to stage in a file. */
    char spare[PATH_MAX];
    if (jobdir_path(spare, sizeof spare, c->jobdir, JOBDIR_SPARE, 0, c->rank) == 0)
        unlink(spare);
    if (c->stage_fd >= 0 &&
        jobdir_path(spare, sizeof spare, c->jobdir, JOBDIR_STAGE, 0, c->rank) == 0)
        unlink(spare);
    int src = write_stats(c);
    int frc = write_finished(c);
    int prc = (c->rank == 0 && c->progress_dirty) ? write_progress(c) : SHOAL_SUCCESS;
    active = NULL;
    ctx_release(c);
    if (rc != SHOAL_SUCCESS)
        return rc;
    if (ex.io_error || errors > 0)
        return SHOAL_ERR_IO;
    if (src != SHOAL_SUCCESS)
        return src;
    return prc != SHOAL_SUCCESS ? prc : frc;
}

SHOAL_EXPORT const char *shoal_strerror(int code)
{
    return error_text(code);
}

SHOAL_EXPORT int shoal_version_number(void)
{
    return SHOAL_VERSION_NUMBER;
}
