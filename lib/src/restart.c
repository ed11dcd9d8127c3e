/*
 * restart.c - finding the checkpoint to restart from, and restoring from it.
 *
 * With a runner, SHOAL_RESTART_EPOCH names the epoch and the ranks only verify it.
 * Standalone, the manifest's complete epochs are tried newest first; each rank fully
 * verifies its own shard and one collective tells whether every rank could. A corrupt
 * or missing shard means the next older epoch, never silently wrong data, and nothing
 * is deleted because a verification failed.
 *
 * An epoch written by another number of ranks (SHOAL_RESTART_NRANKS, or the manifest's
 * count) is opened by resize.c instead: every rank's own shard is not there to verify,
 * the old shards are, and one per-rank region in them makes the epoch unusable.
 *
 * shoal.c calls these at shoal_init (restart_read_manifest, restart_find) and for
 * shoal_recover (restart_recover_local, or resize_recover after a change of count), and
 * hands the restart image over to the staging buffer itself (checkpoint.c).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "internal.h"

void restart_release(struct shoal_ctx *c)
{
    shard_image_free(&c->restart);
    free(c->stored);
    c->stored = NULL;
    c->nstored = 0;
}

/* Loads and verifies this rank's shard of epoch, keeping it on success. A verdict. */
static int load_epoch(struct shoal_ctx *c, long long epoch)
{
    char path[PATH_MAX];
    if (jobdir_path(path, sizeof path, c->jobdir, JOBDIR_SHARD, epoch, c->rank) != 0)
        return SHARD_READ_ERROR;
    struct shard_image img;
    struct shard_header h;
    struct store_file_id id;
    int verdict = store_load_shard_id(path, &img, &h, &id);
    if (verdict != SHARD_OK)
        return verdict;
    verdict = shard_check_identity(&h, c->cfg.job, (uint64_t)epoch, (uint32_t)c->rank,
                                   (uint32_t)c->nranks);
    struct stored_region *stored = NULL;
    if (verdict == SHARD_OK && h.nregions > 0) {
        stored = malloc(sizeof *stored * h.nregions);
        if (stored == NULL)
            verdict = SHARD_NOMEM;
    }
    if (verdict != SHARD_OK) {
        shard_image_free(&img);
        return verdict;
    }
    uint64_t offset = shard_payload_offset(&h);
    for (uint32_t i = 0; i < h.nregions; i++) {
        struct shard_entry e;
        shard_get_entry(img.data, i, &e);
        stored[i].id = e.id;
        stored[i].elem_size = e.elem_size;
        stored[i].count = e.count;
        stored[i].offset = offset;
        shard_get_layout(img.data, &h, i, &stored[i].layout);
        offset += e.bytes;
    }
    restart_release(c);
    c->restart = img;
    c->restart_id = id;
    c->stored = stored;
    c->nstored = (int)h.nregions;
    c->restart_version = h.version;
    c->restart_abi = h.abi;
    return SHARD_OK;
}

static double monotonic_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* load_epoch for a rank whose shard may still be arriving: a runner that copies
 * shards while the job starts (SHOAL_STAGE_WAIT) renames each into place once it is
 * whole and verified, over a missing or damaged file. Until then, or until the wait
 * is over, the file is looked at every 5 ms and read again only when it changed. */
static int load_staged(struct shoal_ctx *c, long long epoch)
{
    int verdict = load_epoch(c, epoch);
    if (verdict == SHARD_OK || verdict == SHARD_NOMEM || c->cfg.stage_wait_s <= 0)
        return verdict;
    char path[PATH_MAX];
    if (jobdir_path(path, sizeof path, c->jobdir, JOBDIR_SHARD, epoch, c->rank) != 0)
        return verdict;
    struct stat seen;
    int have_seen = stat(path, &seen) == 0;
    double deadline = monotonic_s() + c->cfg.stage_wait_s;
    while (verdict != SHARD_OK && monotonic_s() < deadline) {
        nanosleep(&(struct timespec){0, 5000000}, NULL);
        struct stat st;
        if (stat(path, &st) != 0)
            continue;
        if (have_seen && st.st_ino == seen.st_ino && st.st_size == seen.st_size &&
            st.st_mtim.tv_sec == seen.st_mtim.tv_sec && st.st_mtim.tv_nsec == seen.st_mtim.tv_nsec)
            continue;
        seen = st;
        have_seen = 1;
        verdict = load_epoch(c, epoch);
    }
    return verdict;
}

/* The verdict of the lowest failing rank (in *bad_rank), the same on every rank. */
static int agree_verdict(struct shoal_ctx *c, int verdict, int *bad_rank)
{
    int in[2] = {verdict != SHARD_OK ? c->rank : c->nranks, verdict}, out[2];
    if (MPI_Allreduce(in, out, 1, MPI_2INT, MPI_MINLOC, c->comm) != MPI_SUCCESS)
        return -1;
    *bad_rank = out[0];
    return out[0] < c->nranks ? out[1] : SHARD_OK;
}

/* Collective. SHARD_OK when every rank holds a good shard of epoch; -1 on MPI error. */
static int try_epoch(struct shoal_ctx *c, long long epoch, int *bad_rank)
{
    int verdict = agree_verdict(c, load_staged(c, epoch), bad_rank);
    if (verdict != SHARD_OK)
        restart_release(c);
    return verdict;
}

/* Why an epoch another rank count wrote cannot be restored, for messages. */
static void resize_reason(char *out, size_t len, const struct shoal_ctx *c, long long epoch,
                          int nold, const struct resize_verdict *v)
{
    (void)epoch;
    if (v->verdict == RESIZE_PER_RANK)
        snprintf(out, len, "checkpoint written by %d ranks; this run has %d; region %d is per-rank",
                 nold, c->nranks, v->region);
    else
        snprintf(out, len, "old shard e%08lld/r%06d.shard of %d ranks: %s", epoch, v->old_rank,
                 nold, shard_verdict_name(v->verdict));
}

/* Rank 0 says where the run restarts from when its rank count changed. */
static void say_resized(const struct shoal_ctx *c, long long epoch, int nold)
{
    if (c->rank == 0)
        shoal_log("restarting from epoch %lld, written by %d ranks, on %d ranks", epoch, nold,
                  c->nranks);
}

static int restart_from_env(struct shoal_ctx *c)
{
    long long epoch = c->cfg.restart_epoch;
    if (epoch == 0)
        return SHOAL_SUCCESS;
    int nold = c->cfg.restart_nranks > 0 ? c->cfg.restart_nranks : c->nranks;
    if (nold != c->nranks) {
        struct resize_verdict v;
        int rc = resize_open(c, epoch, nold, &v);
        if (rc != SHOAL_SUCCESS)
            return rc;
        if (v.verdict != SHARD_OK) {
            char reason[256];
            resize_reason(reason, sizeof reason, c, epoch, nold, &v);
            if (c->rank == 0)
                shoal_log("epoch %lld from SHOAL_RESTART_EPOCH unusable (%s)", epoch, reason);
            return v.verdict == RESIZE_PER_RANK ? SHOAL_ERR_PERRANK : shard_verdict_code(v.verdict);
        }
        say_resized(c, epoch, nold);
        c->status = SHOAL_RESIZED;
        c->restart_epoch = epoch;
        c->old_nranks = nold;
        return SHOAL_SUCCESS;
    }
    int bad_rank, verdict = try_epoch(c, epoch, &bad_rank);
    if (verdict < 0)
        return SHOAL_ERR_MPI;
    if (verdict != SHARD_OK) {
        if (c->rank == 0)
            shoal_log("epoch %lld from SHOAL_RESTART_EPOCH unusable (rank %d: %s)", epoch,
                      bad_rank, shard_verdict_name(verdict));
        return shard_verdict_code(verdict);
    }
    c->status = SHOAL_RESTARTED;
    c->restart_epoch = epoch;
    c->old_nranks = c->nranks;
    return SHOAL_SUCCESS;
}

/* Rank 0, standalone: 1 (and one line saying why) when the manifest's epochs were
 * written by another program or other arguments than this run's, else 0. */
static int other_run(struct shoal_ctx *c, const struct run_binding *bound,
                     const struct manifest_entry *m, int n, long long finished_epoch)
{
    const struct run_binding *now = &c->binding;
    if (c->cfg.restart_epoch >= 0 || bound->program == 0 || now->program == 0)
        return 0; /* the runner chose the epoch, or a binding is unknown */
    if (bound->program == now->program && bound->args == now->args)
        return 0;
    int unfinished = 0;
    for (int i = 0; i < n; i++)
        unfinished += m[i].epoch > finished_epoch;
    if (unfinished == 0)
        return 1; /* nothing to resume anyway: no need to say why */
    if (bound->program != now->program)
        shoal_log("checkpoint in %s was written by another program (or another build of "
                  "it); starting afresh",
                  c->jobdir);
    else
        shoal_log("checkpoint in %s was written by other arguments (%s); starting afresh",
                  c->jobdir, bound->shown[0] ? bound->shown : "none");
    return 1;
}

int restart_read_manifest(struct shoal_ctx *c, struct manifest_entry **m, int *n)
{
    char msg[512] = "";
    int rc = SHOAL_SUCCESS;
    *m = NULL;
    *n = 0;
    long long shared[3] = {0, 0, 0}; /* entries, finished epoch, other run */
    if (c->rank == 0) {
        struct run_binding bound;
        int err = manifest_read(c->jobdir, m, n, &bound);
        shared[0] = *n;
        shared[1] = manifest_read_finished(c->jobdir);
        shared[2] = other_run(c, &bound, *m, *n, shared[1]);
        if (err) {
            char text[128];
            snprintf(msg, sizeof msg, "reading %.300s/manifest failed: %s", c->jobdir,
                     shoal_errno_text(err, text, sizeof text));
            rc = err == ENOMEM ? SHOAL_ERR_NOMEM : SHOAL_ERR_IO;
        }
    }
    rc = agree_error(c, rc, msg);
    if (rc != SHOAL_SUCCESS)
        return rc;
    if (MPI_Bcast(shared, 3, MPI_LONG_LONG, 0, c->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    *n = (int)shared[0];
    c->finished_epoch = shared[1];
    c->other_run = (int)shared[2];
    if (*n == 0)
        return SHOAL_SUCCESS;
    if (c->rank != 0)
        *m = malloc(sizeof **m * (size_t)*n);
    rc = agree_error(c, *m == NULL ? SHOAL_ERR_NOMEM : SHOAL_SUCCESS, "out of memory");
    if (rc != SHOAL_SUCCESS)
        return rc;
    if (MPI_Bcast(*m, 3 * *n, MPI_LONG_LONG, 0, c->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    return SHOAL_SUCCESS;
}

/* Index of the newest entry before `before` that this run may restart from (newer than
 * a finished run, its program and arguments; written by any number of ranks), or -1. */
static int older_candidate(struct shoal_ctx *c, const struct manifest_entry *m, int before)
{
    if (c->other_run)
        return -1;
    for (int i = before - 1; i >= 0; i--)
        if (m[i].epoch > c->finished_epoch && m[i].nranks >= 1 &&
            m[i].nranks <= SHARD_RANK_MAX + 1)
            return i;
    return -1;
}

/* Collective, standalone: tries entry e; SHARD_OK and the status set, or why not in
 * reason (the same on every rank), *per_rank set when a per-rank region is why; -1 on
 * an MPI error. */
static int try_entry(struct shoal_ctx *c, const struct manifest_entry *e, char *reason,
                     size_t len, int *per_rank)
{
    *per_rank = 0;
    int nold = (int)e->nranks;
    if (nold == c->nranks) {
        int bad_rank, verdict = try_epoch(c, e->epoch, &bad_rank);
        if (verdict == SHARD_OK) {
            c->status = SHOAL_RESTARTED;
            c->old_nranks = nold;
        } else if (verdict > 0) {
            snprintf(reason, len, "rank %d: %s", bad_rank, shard_verdict_name(verdict));
        }
        return verdict;
    }
    struct resize_verdict v;
    int rc = resize_open(c, e->epoch, nold, &v);
    if (rc == SHOAL_ERR_MPI)
        return -1;
    if (rc != SHOAL_SUCCESS)
        v = (struct resize_verdict){SHARD_NOMEM, 0, 0};
    if (v.verdict == SHARD_OK) {
        say_resized(c, e->epoch, nold);
        c->status = SHOAL_RESIZED;
        c->old_nranks = nold;
        return SHARD_OK;
    }
    resize_reason(reason, len, c, e->epoch, nold, &v);
    *per_rank = v.verdict == RESIZE_PER_RANK;
    return v.verdict == RESIZE_PER_RANK ? SHARD_BAD_REGION_TABLE : v.verdict;
}

int restart_find(struct shoal_ctx *c, const struct manifest_entry *m, int n)
{
    if (c->cfg.restart_epoch >= 0)
        return restart_from_env(c);
    int refused = 0; /* the last epoch tried has a per-rank region, and another count */
    for (int i = older_candidate(c, m, n); i >= 0;) {
        char reason[256] = "";
        int per_rank, verdict = try_entry(c, &m[i], reason, sizeof reason, &per_rank);
        if (verdict < 0)
            return SHOAL_ERR_MPI;
        if (verdict == SHARD_OK) {
            c->restart_epoch = m[i].epoch;
            return SHOAL_SUCCESS;
        }
        int next = older_candidate(c, m, i);
        refused = per_rank && next < 0;
        if (c->rank == 0 && refused)
            shoal_log("%s; starting afresh", reason);
        else if (c->rank == 0) {
            char fallback[64] = "no older complete epoch";
            if (next >= 0)
                snprintf(fallback, sizeof fallback, "falling back to epoch %lld",
                         m[next].epoch);
            shoal_log("epoch %lld unusable (%s); %s", m[i].epoch, reason, fallback);
        }
        i = next;
    }
    int unfinished = 0;
    for (int i = 0; i < n; i++)
        unfinished += m[i].epoch > c->finished_epoch;
    if (c->other_run || refused)
        return SHOAL_SUCCESS; /* rank 0 said why */
    if (c->rank == 0 && unfinished > 0)
        shoal_log("WARNING: no usable checkpoint for %d ranks among the %d complete epochs "
                  "of %s/manifest: STARTING FROM SCRATCH",
                  c->nranks, unfinished, c->jobdir);
    else if (c->rank == 0 && n > 0)
        shoal_log("the last run of %s finished (epoch %lld): starting from the beginning; "
                  "remove %s/finished to resume from its last checkpoint instead",
                  c->cfg.job, c->finished_epoch, c->jobdir);
    return SHOAL_SUCCESS;
}

const struct stored_region *restart_stored(const struct shoal_ctx *c, int id)
{
    for (int i = 0; i < c->nstored; i++)
        if (c->stored[i].id == id)
            return &c->stored[i];
    return NULL;
}

int restart_portable(const struct shoal_ctx *c, char *msg, size_t msglen)
{
    struct shard_abi here = portable_this_abi();
    struct portable_refusals refused = {0};
    for (int i = 0; i < c->nregions; i++) {
        const struct stored_region *s = restart_stored(c, c->regions[i].id);
        char why[256];
        if (s != NULL && !portable_region(c->restart_version, c->restart_abi, here, s->id,
                                          s->layout.dtype, s->layout.flags, why, sizeof why))
            portable_note(&refused, s->id, why);
    }
    return portable_verdict(&refused, msg, msglen) == SHOAL_SUCCESS;
}

/* Copies each protected region out of the shard image, faulting the region in first
 * in one go (memory.c: most of a large restore is first-touch faults). */
static int restore_regions(void *arg)
{
    struct shoal_ctx *c = arg;
    for (int i = 0; i < c->nregions; i++) {
        const struct region *r = &c->regions[i];
        const struct stored_region *s = restart_stored(c, r->id);
        size_t bytes = r->count * (size_t)r->elem_size;
        if (bytes > 0) {
            mem_prefault(r->ptr, bytes);
            memcpy(r->ptr, c->restart.data + s->offset, bytes);
        }
    }
    return SHOAL_SUCCESS;
}

int restart_recover_local(struct shoal_ctx *c, char *msg, size_t msglen)
{
    if (c->status != SHOAL_RESTARTED) {
        snprintf(msg, msglen, "shoal_recover: no checkpoint to recover from");
        return SHOAL_ERR_NOCKPT;
    }
    if (c->restart.data == NULL) {
        /* Released or handed to the staging buffer by an earlier recover: again. */
        int verdict = load_epoch(c, c->restart_epoch);
        if (verdict != SHARD_OK) {
            snprintf(msg, msglen, "rank %d: shard of epoch %lld unusable: %s", c->rank,
                     c->restart_epoch, shard_verdict_name(verdict));
            return shard_verdict_code(verdict);
        }
    }
    for (int i = 0; i < c->nregions; i++) {
        const struct region *r = &c->regions[i];
        const struct stored_region *s = restart_stored(c, r->id);
        if (s == NULL) {
            snprintf(msg, msglen, "rank %d: region %d is not in the checkpoint of epoch %lld",
                     c->rank, r->id, c->restart_epoch);
            return SHOAL_ERR_NOTFOUND;
        }
        /* A distributed region restored from this rank's own shard must be the same part
         * of the same array (a region of another kind, a version 1 shard's plain one
         * among them, takes its bytes as they are). */
        char want[160], got[160];
        if ((r->layout.kind == REGION_BLOCK || r->layout.kind == REGION_SUBARRAY) &&
            s->layout.kind == r->layout.kind && s->count == r->count &&
            s->elem_size == (uint32_t)r->elem_size && !layout_same_place(&s->layout, &r->layout)) {
            layout_describe(want, sizeof want, &r->layout, r->count);
            layout_describe(got, sizeof got, &s->layout, s->count);
            snprintf(msg, msglen,
                     "rank %d: region %d is protected as %s; the checkpoint of epoch %lld holds "
                     "%s",
                     c->rank, r->id, want, c->restart_epoch, got);
            return SHOAL_ERR_SIZE;
        }
        if (s->count != r->count || s->elem_size != (uint32_t)r->elem_size) {
            snprintf(msg, msglen,
                     "rank %d: region %d has %llu elements of %u bytes in epoch %lld, "
                     "protected with %zu of %d (see shoal_stored_count)",
                     c->rank, r->id, (unsigned long long)s->count, s->elem_size,
                     c->restart_epoch, r->count, r->elem_size);
            return SHOAL_ERR_SIZE;
        }
    }
    if (!restart_portable(c, msg, msglen))
        return SHOAL_ERR_PORTABLE;
    int rc;
    if (mem_guarded(restore_regions, c, c->restart.data, c->restart.size, &rc) != 0) {
        snprintf(msg, msglen,
                 "rank %d: the shard of epoch %lld was cut short while it was restored "
                 "from (its file changed under the rank)",
                 c->rank, c->restart_epoch);
        return SHOAL_ERR_IO;
    }
    return SHOAL_SUCCESS;
}
