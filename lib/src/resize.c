/*
 * resize.c - a restart from an epoch that another number of ranks wrote
 * (docs/libshoal.md, "Changing the rank count").
 *
 * At shoal_init (resize_open, collective) the ranks find the old shards: the ranks that
 * share a node and a checkpoint directory form a group, one of them lists the old
 * shards there, and each shard a group holds is verified (checksum, identity) by one of
 * its ranks, the one whose new rank number is nearest the old one's share of the run.
 * Their region tables (the header, table and descriptors, a few hundred bytes) and, for
 * replicated regions, a digest of their bytes then go to every rank. A shard no group
 * holds, one that fails verification, or a per-rank region in one, makes the epoch
 * unusable, which the caller reports.
 *
 * The restore itself, and shoal_read_old, are pieces.c's.
 *
 * After a restart on the same count (resize_adopt) the tables of the ranks' own shards
 * are shared the same way, without reading them again, so that shoal_read_old and
 * shoal_old_bytes work there too: each rank then reads for the others its own shard.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <xxhash.h>

#include "internal.h"

/* Blob header words: old rank, group, head bytes, checksum, dev, ino, size, mtime. */
#define BLOB_WORDS 8

void resize_release(struct shoal_ctx *c)
{
    struct resize *z = c->resize;
    if (z == NULL)
        return;
    for (int o = 0; z->old != NULL && o < z->nold; o++) {
        free(z->old[o].head);
        free(z->old[o].hashes);
    }
    free(z->old);
    free(z->group_of);
    free(z->first);
    free(z->members);
    free(z->seen);
    free(z);
    c->resize = NULL;
}

int resize_holds(const struct resize *z, int g, int o)
{
    return z->own_only ? g == o : z->seen[(size_t)g * (size_t)z->nold + (size_t)o];
}

/* The rank of group g that verifies and serves old shard o: the one nearest the new
 * rank that takes o's share of a run spread evenly, (o + 1/2) x M / N. */
int resize_verifier(const struct resize *z, int nranks, int g, int o)
{
    if (z->own_only)
        return o;
    long long p = ((2LL * o + 1) * nranks) / (2LL * z->nold);
    const int *m = z->members + z->first[g];
    int n = z->first[g + 1] - z->first[g], lo = 0, hi = n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (m[mid] < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == n)
        return m[n - 1];
    if (lo > 0 && p - m[lo - 1] <= m[lo] - p)
        return m[lo - 1];
    return m[lo];
}

/* The groups: the ranks on one node (MPI_COMM_TYPE_SHARED) whose checkpoint
 * directories are one directory. */
static int make_groups(struct shoal_ctx *c, struct resize *z, MPI_Comm *group_comm)
{
    struct stat st;
    uint64_t mine[3] = {0, 0, (uint64_t)c->rank};
    if (stat(c->jobdir, &st) == 0) {
        mine[0] = (uint64_t)st.st_dev;
        mine[1] = (uint64_t)st.st_ino;
    }
    MPI_Comm node;
    if (MPI_Comm_split_type(c->comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    int nn;
    MPI_Comm_size(node, &nn);
    uint64_t *ids = malloc(sizeof *ids * 3 * (size_t)nn);
    int ok = ids != NULL, all = 1;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS || !all) {
        free(ids);
        MPI_Comm_free(&node);
        return all ? SHOAL_ERR_MPI : SHOAL_ERR_NOMEM;
    }
    int rc = MPI_Allgather(mine, 3, MPI_UINT64_T, ids, 3, MPI_UINT64_T, node);
    MPI_Comm_free(&node);
    int leader = c->rank;
    for (int i = 0; rc == MPI_SUCCESS && i < nn; i++)
        if (ids[3 * i] == mine[0] && ids[3 * i + 1] == mine[1] && (int)ids[3 * i + 2] < leader)
            leader = (int)ids[3 * i + 2];
    free(ids);
    if (rc != MPI_SUCCESS ||
        MPI_Allgather(&leader, 1, MPI_INT, z->group_of, 1, MPI_INT, c->comm) != MPI_SUCCESS ||
        MPI_Comm_split(c->comm, leader, c->rank, group_comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    /* Leaders to group numbers, in rank order (a leader is its group's lowest rank). */
    int *index = z->members; /* as scratch: nranks ints */
    for (int r = 0; r < c->nranks; r++)
        index[r] = -1;
    z->ngroups = 0;
    for (int r = 0; r < c->nranks; r++) {
        if (index[z->group_of[r]] < 0)
            index[z->group_of[r]] = z->ngroups++;
        z->group_of[r] = index[z->group_of[r]];
    }
    z->first = calloc((size_t)z->ngroups + 1, sizeof(int));
    int *at = calloc((size_t)z->ngroups, sizeof(int));
    ok = z->first != NULL && at != NULL;
    if (MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS || !all) {
        free(at);
        return all ? SHOAL_ERR_MPI : SHOAL_ERR_NOMEM;
    }
    for (int r = 0; r < c->nranks; r++)
        z->first[z->group_of[r] + 1]++;
    for (int g = 0; g < z->ngroups; g++)
        z->first[g + 1] += z->first[g];
    for (int r = 0; r < c->nranks; r++) {
        int g = z->group_of[r];
        z->members[z->first[g] + at[g]++] = r;
    }
    free(at);
    z->group = z->group_of[c->rank];
    return SHOAL_SUCCESS;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Which group holds which old shard. A shard no group holds is waited for as a rank
 * waits for its own (SHOAL_STAGE_WAIT): the runner may still be putting it in place.
 * *missing: the lowest old rank whose shard no group holds, or nold. */
static int find_shards(struct shoal_ctx *c, struct resize *z, MPI_Comm group_comm, int *missing)
{
    int gsize, grank;
    MPI_Comm_size(group_comm, &gsize);
    MPI_Comm_rank(group_comm, &grank);
    unsigned char *mine = calloc((size_t)z->nold, 1), *any = calloc((size_t)z->nold, 1);
    z->seen = malloc((size_t)z->ngroups * (size_t)z->nold);
    unsigned char *all = malloc((size_t)c->nranks * (size_t)z->nold);
    int ok = mine != NULL && any != NULL && z->seen != NULL && all != NULL &&
             (size_t)c->nranks * (size_t)z->nold <= INT_MAX,
        agreed;
    int rc = SHOAL_ERR_MPI;
    if (MPI_Allreduce(&ok, &agreed, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS)
        goto out;
    rc = SHOAL_ERR_NOMEM;
    if (!agreed)
        goto out;
    rc = SHOAL_ERR_MPI;
    double deadline = shoal_now() + c->cfg.stage_wait_s;
    for (;;) {
        if (grank == 0)
            for (int o = 0; o < z->nold; o++) {
                char path[PATH_MAX];
                struct stat st;
                mine[o] = jobdir_path(path, sizeof path, c->jobdir, JOBDIR_SHARD, z->epoch, o) == 0 &&
                          stat(path, &st) == 0 && S_ISREG(st.st_mode);
            }
        if (MPI_Bcast(mine, z->nold, MPI_UNSIGNED_CHAR, 0, group_comm) != MPI_SUCCESS ||
            MPI_Allreduce(mine, any, z->nold, MPI_UNSIGNED_CHAR, MPI_BOR, c->comm) != MPI_SUCCESS)
            goto out;
        *missing = z->nold;
        for (int o = z->nold - 1; o >= 0; o--)
            if (!any[o])
                *missing = o;
        int wait = *missing < z->nold && shoal_now() < deadline;
        if (MPI_Bcast(&wait, 1, MPI_INT, 0, c->comm) != MPI_SUCCESS)
            goto out;
        if (!wait)
            break;
        sleep_s(0.02);
    }
    if (MPI_Allgather(mine, z->nold, MPI_UNSIGNED_CHAR, all, z->nold, MPI_UNSIGNED_CHAR,
                      c->comm) != MPI_SUCCESS)
        goto out;
    for (int g = 0; g < z->ngroups; g++)
        memcpy(z->seen + (size_t)g * (size_t)z->nold,
               all + (size_t)z->members[z->first[g]] * (size_t)z->nold, (size_t)z->nold);
    rc = SHOAL_SUCCESS;
out:
    free(mine);
    free(any);
    free(all);
    return rc;
}

struct hash_call {
    const struct shard_image *img;
    const struct shard_header *h;
    uint64_t *hashes;
};

/* The digests of a verified image's replicated regions. */
static int hash_replicated(void *arg)
{
    struct hash_call *a = arg;
    uint64_t off = shard_payload_offset(a->h);
    for (uint32_t i = 0; i < a->h->nregions; i++) {
        struct shard_entry e;
        shard_get_entry(a->img->data, i, &e);
        a->hashes[i] = e.kind == REGION_REPLICATED ? (uint64_t)XXH3_64bits(a->img->data + off, e.bytes)
                                                   : 0;
        off += e.bytes;
    }
    return 0;
}

/* MPI_Allreduce that waits without spinning: a rank with fewer shards to verify than
 * another (every rank, when the run is larger than the one that wrote the epoch, some
 * verify nothing) gives its core to the ranks still hashing, which on an oversubscribed
 * node would otherwise share it with an MPI library polling for them. */
static int allreduce_yielding(const void *in, void *out, int count, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm)
{
    MPI_Request req;
    int rc = MPI_Iallreduce(in, out, count, type, op, comm, &req);
    for (int done = 0; rc == MPI_SUCCESS && !done;) {
        rc = MPI_Test(&req, &done, MPI_STATUS_IGNORE);
        if (rc == MPI_SUCCESS && !done)
            sleep_s(0.0002);
    }
    return rc;
}

/* Appends the blob of a verified shard (its table, digests and file) to *buf. */
static int append_blob(unsigned char **buf, size_t *len, int o, int group,
                       const unsigned char *head, const struct shard_header *h,
                       const uint64_t *hashes, uint64_t checksum, const struct store_file_id *id)
{
    size_t head_len = (size_t)shard_payload_offset(h), padded = (head_len + 7) & ~(size_t)7;
    size_t add = 8 * BLOB_WORDS + padded + 8 * (size_t)h->nregions;
    unsigned char *grown = realloc(*buf, *len + add);
    if (grown == NULL)
        return -1;
    uint64_t w[BLOB_WORDS] = {(uint64_t)o,  (uint64_t)group, head_len, checksum,
                              id->dev,      id->ino,         id->size, (uint64_t)id->mtime_ns};
    unsigned char *p = grown + *len;
    memcpy(p, w, sizeof w);
    memcpy(p + sizeof w, head, head_len);
    memset(p + sizeof w + head_len, 0, padded - head_len);
    memcpy(p + sizeof w + padded, hashes, 8 * (size_t)h->nregions);
    *buf = grown;
    *len += add;
    return 0;
}

/* Verifies old shard o (this rank is its verifier in its group) and appends its blob:
 * a verdict. */
static int verify_old(struct shoal_ctx *c, struct resize *z, int o, unsigned char **blob,
                      size_t *len)
{
    char path[PATH_MAX];
    if (jobdir_path(path, sizeof path, c->jobdir, JOBDIR_SHARD, z->epoch, o) != 0)
        return SHARD_READ_ERROR;
    struct shard_image img;
    struct shard_header h;
    struct store_file_id id;
    int verdict = store_load_shard_id(path, &img, &h, &id);
    if (verdict != SHARD_OK)
        return verdict;
    verdict = shard_check_identity(&h, c->cfg.job, (uint64_t)z->epoch, (uint32_t)o,
                                   (uint32_t)z->nold);
    uint64_t *hashes = calloc(h.nregions > 0 ? h.nregions : 1, sizeof *hashes);
    if (verdict == SHARD_OK && hashes == NULL)
        verdict = SHARD_NOMEM;
    if (verdict == SHARD_OK) {
        struct hash_call call = {&img, &h, hashes};
        int ignored;
        if (mem_guarded(hash_replicated, &call, img.data, img.size, &ignored) != 0)
            verdict = SHARD_READ_ERROR;
    }
    if (verdict == SHARD_OK &&
        append_blob(blob, len, o, z->group, img.data, &h, hashes,
                    shard_get_u64(img.data + img.size - SHARD_CHECKSUM_SIZE), &id) != 0)
        verdict = SHARD_NOMEM;
    free(hashes);
    shard_image_free(&img);
    return verdict;
}

/* Every rank's blobs to every rank, decoded into z->old. A copy of a shard that differs
 * from another group's is *differs (its old rank), else -1. */
static int share_tables(struct shoal_ctx *c, struct resize *z, const unsigned char *blob,
                        size_t len, int *differs)
{
    *differs = -1;
    int n = c->nranks, mine = len <= INT_MAX ? (int)len : -1;
    int *counts = malloc(sizeof(int) * (size_t)n), *displs = malloc(sizeof(int) * (size_t)n);
    unsigned char *all = NULL;
    int rc = SHOAL_ERR_NOMEM, ok = counts != NULL && displs != NULL && mine >= 0, agreed;
    if (MPI_Allreduce(&ok, &agreed, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS) {
        rc = SHOAL_ERR_MPI;
        goto out;
    }
    if (!agreed)
        goto out;
    if (MPI_Allgather(&mine, 1, MPI_INT, counts, 1, MPI_INT, c->comm) != MPI_SUCCESS) {
        rc = SHOAL_ERR_MPI;
        goto out;
    }
    long long total = 0;
    for (int r = 0; r < n; r++) {
        displs[r] = (int)total;
        total += counts[r];
    }
    ok = total <= INT_MAX && (all = malloc(total > 0 ? (size_t)total : 1)) != NULL;
    if (MPI_Allreduce(&ok, &agreed, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS) {
        rc = SHOAL_ERR_MPI;
        goto out;
    }
    if (!agreed)
        goto out;
    if (MPI_Allgatherv(blob, mine, MPI_BYTE, all, counts, displs, MPI_BYTE, c->comm) !=
        MPI_SUCCESS) {
        rc = SHOAL_ERR_MPI;
        goto out;
    }
    rc = SHOAL_SUCCESS;
    for (size_t at = 0; at + 8 * BLOB_WORDS <= (size_t)total && rc == SHOAL_SUCCESS;) {
        uint64_t w[BLOB_WORDS];
        memcpy(w, all + at, sizeof w);
        int o = (int)w[0], g = (int)w[1];
        size_t head_len = (size_t)w[2], padded = (head_len + 7) & ~(size_t)7;
        const unsigned char *head = all + at + sizeof w;
        struct shard_header h;
        shard_get_header(head, &h);
        size_t blob_len = sizeof w + padded + 8 * (size_t)h.nregions;
        struct old_shard *s = &z->old[o];
        if (s->head == NULL) {
            s->head = malloc(head_len);
            s->hashes = malloc(8 * (size_t)(h.nregions > 0 ? h.nregions : 1));
            if (s->head == NULL || s->hashes == NULL) {
                rc = SHOAL_ERR_NOMEM;
                break;
            }
            memcpy(s->head, head, head_len);
            memcpy(s->hashes, head + padded, 8 * (size_t)h.nregions);
            s->h = h;
            s->checksum = w[3];
        } else if (s->checksum != w[3] && *differs < 0) {
            *differs = o;
        }
        if (g == z->group)
            s->id = (struct store_file_id){w[4], w[5], w[6], (int64_t)w[7]};
        at += blob_len;
    }
out:
    free(counts);
    free(displs);
    free(all);
    return rc;
}

/* The first per-rank region of the old shards: 0 and its old rank and id, or -1. */
static int find_per_rank(const struct resize *z, int *old_rank, int *id)
{
    for (int o = 0; o < z->nold; o++)
        for (uint32_t i = 0; i < z->old[o].h.nregions; i++) {
            struct shard_entry e;
            shard_get_entry(z->old[o].head, i, &e);
            if (e.kind == REGION_PLAIN) {
                *old_rank = o;
                *id = e.id;
                return 0;
            }
        }
    return -1;
}

static struct resize *resize_new(struct shoal_ctx *c, long long epoch, int nold)
{
    struct resize *z = calloc(1, sizeof *z);
    if (z == NULL)
        return NULL;
    z->epoch = epoch;
    z->nold = nold;
    z->group_of = malloc(sizeof(int) * (size_t)c->nranks);
    z->members = malloc(sizeof(int) * (size_t)c->nranks);
    z->old = calloc((size_t)nold, sizeof *z->old);
    if (z->group_of == NULL || z->members == NULL || z->old == NULL) {
        c->resize = z;
        resize_release(c);
        return NULL;
    }
    return z;
}

int resize_open(struct shoal_ctx *c, long long epoch, int nold, struct resize_verdict *v)
{
    *v = (struct resize_verdict){SHARD_OK, -1, 0};
    resize_release(c);
    struct resize *z = resize_new(c, epoch, nold);
    int ok = z != NULL, agreed = 1;
    if (MPI_Allreduce(&ok, &agreed, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS || !agreed) {
        if (z != NULL) {
            c->resize = z;
            resize_release(c);
        }
        return agreed ? SHOAL_ERR_MPI : SHOAL_ERR_NOMEM;
    }
    c->resize = z;
    MPI_Comm group_comm = MPI_COMM_NULL;
    int missing = nold;
    int rc = make_groups(c, z, &group_comm);
    if (rc == SHOAL_SUCCESS)
        rc = find_shards(c, z, group_comm, &missing);
    if (group_comm != MPI_COMM_NULL)
        MPI_Comm_free(&group_comm);
    if (rc != SHOAL_SUCCESS) {
        resize_release(c);
        return rc;
    }
    if (missing < nold) {
        *v = (struct resize_verdict){SHARD_MISSING, missing, 0};
        resize_release(c);
        return SHOAL_SUCCESS;
    }
    /* Each shard this rank's group holds and this rank verifies. */
    unsigned char *blob = NULL;
    size_t len = 0;
    int in[2] = {nold, SHARD_OK}, out[2];
    for (int o = 0; o < nold; o++) {
        if (!resize_holds(z, z->group, o) || resize_verifier(z, c->nranks, z->group, o) != c->rank)
            continue;
        int verdict = verify_old(c, z, o, &blob, &len);
        if (verdict != SHARD_OK) {
            in[0] = o;
            in[1] = verdict;
            break;
        }
    }
    if (allreduce_yielding(in, out, 1, MPI_2INT, MPI_MINLOC, c->comm) != MPI_SUCCESS) {
        free(blob);
        resize_release(c);
        return SHOAL_ERR_MPI;
    }
    if (out[0] < nold) {
        free(blob);
        *v = (struct resize_verdict){out[1], out[0], 0};
        resize_release(c);
        return SHOAL_SUCCESS;
    }
    int differs;
    rc = share_tables(c, z, blob, len, &differs);
    free(blob);
    if (rc != SHOAL_SUCCESS) {
        resize_release(c);
        return rc;
    }
    int old_rank, id;
    if (differs >= 0)
        *v = (struct resize_verdict){SHARD_CHECKSUM_MISMATCH, differs, 0};
    else if (find_per_rank(z, &old_rank, &id) == 0)
        *v = (struct resize_verdict){RESIZE_PER_RANK, old_rank, id};
    if (v->verdict != SHARD_OK)
        resize_release(c);
    return SHOAL_SUCCESS;
}

int resize_adopt(struct shoal_ctx *c)
{
    resize_release(c);
    struct resize *z = resize_new(c, c->restart_epoch, c->nranks);
    int ok = z != NULL, agreed = 1;
    if (MPI_Allreduce(&ok, &agreed, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS || !agreed) {
        if (z != NULL) {
            c->resize = z;
            resize_release(c);
        }
        return agreed ? SHOAL_ERR_MPI : SHOAL_ERR_NOMEM;
    }
    c->resize = z;
    z->own_only = 1;
    z->group = c->rank;
    z->ngroups = c->nranks;
    unsigned char *blob = NULL;
    size_t len = 0;
    struct shard_header h;
    shard_get_header(c->restart.data, &h);
    uint64_t *hashes = calloc(h.nregions > 0 ? h.nregions : 1, sizeof *hashes);
    int rc = SHOAL_SUCCESS;
    if (hashes == NULL) {
        rc = SHOAL_ERR_NOMEM;
    } else {
        struct hash_call call = {&c->restart, &h, hashes};
        int ignored;
        if (mem_guarded(hash_replicated, &call, c->restart.data, c->restart.size, &ignored) != 0)
            rc = SHOAL_ERR_IO;
        else if (append_blob(&blob, &len, c->rank, c->rank, c->restart.data, &h, hashes,
                             shard_get_u64(c->restart.data + c->restart.size - SHARD_CHECKSUM_SIZE),
                             &c->restart_id) != 0)
            rc = SHOAL_ERR_NOMEM;
    }
    free(hashes);
    /* A rank that failed shares nothing; every rank learns it from the next call. */
    int differs;
    int src = share_tables(c, z, rc == SHOAL_SUCCESS ? blob : NULL, rc == SHOAL_SUCCESS ? len : 0,
                           &differs);
    free(blob);
    ok = rc == SHOAL_SUCCESS && src == SHOAL_SUCCESS;
    for (int o = 0; ok && o < z->nold; o++)
        ok = z->old[o].head != NULL;
    if (MPI_Allreduce(&ok, &agreed, 1, MPI_INT, MPI_MIN, c->comm) != MPI_SUCCESS)
        agreed = 0;
    if (!agreed) {
        resize_release(c);
        return rc != SHOAL_SUCCESS ? rc : src != SHOAL_SUCCESS ? src : SHOAL_ERR_IO;
    }
    return SHOAL_SUCCESS;
}
