/*
 * pieces.c - the restore after a change of the rank count (docs/libshoal.md, "Changing
 * the rank count"), and shoal_read_old. At the first shoal_snapshot or shoal_recover
 * (resize_recover, collective) each rank works out, from its own protected regions and
 * the old shards' tables that resize.c shared, which piece of which old shard each of
 * its regions needs (layout.c): a block's range, a box's intersection with each old
 * box, a replicated region whole, after checking that every old rank saved the same
 * bytes. transfer.c then moves the pieces: from a shard in the rank's own group's
 * directory by reading the file, from any other through a rank of a group that holds
 * it. shoal_read_old moves byte ranges the same way.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* Entry id of old shard o: its index, its bytes' offset in the file, and its layout; -1
 * when it has no such region. */
static int old_entry(const struct resize *z, int o, int id, struct shard_entry *e,
                     uint64_t *file_off, struct region_layout *l)
{
    const struct old_shard *s = &z->old[o];
    uint64_t off = shard_payload_offset(&s->h);
    for (uint32_t i = 0; i < s->h.nregions; i++) {
        shard_get_entry(s->head, i, e);
        if (e->id == id) {
            *file_off = off;
            if (l != NULL)
                shard_get_layout(s->head, &s->h, i, l);
            return (int)i;
        }
        off += e->bytes;
    }
    return -1;
}

/* Who reads piece bytes of old shard o for this rank: -1 (itself, from its directory),
 * or a rank of a group holding it, the groups taken in turn by the ranks asking. */
static int server_for(const struct shoal_ctx *c, const struct resize *z, int o)
{
    if (resize_holds(z, z->group, o))
        return -1;
    if (z->own_only)
        return o;
    int count = 0;
    for (int g = 0; g < z->ngroups; g++)
        count += resize_holds(z, g, o);
    int pick = c->rank % count;
    for (int g = 0; g < z->ngroups; g++)
        if (resize_holds(z, g, o) && pick-- == 0)
            return resize_verifier(z, c->nranks, g, o);
    return -1;
}

/* The pieces being planned. */
struct plan {
    struct xfer_piece *p;
    int n, cap;
};

static struct xfer_piece *plan_add(struct plan *pl)
{
    if (pl->n == pl->cap) {
        int cap = pl->cap ? 2 * pl->cap : 16;
        struct xfer_piece *grown = realloc(pl->p, sizeof *grown * (size_t)cap);
        if (grown == NULL)
            return NULL;
        pl->p = grown;
        pl->cap = cap;
    }
    return &pl->p[pl->n++];
}

/* A byte range [off, off + len) of region id of old shard o into buf. */
static int plan_bytes(const struct shoal_ctx *c, struct plan *pl, int o, uint64_t file_off,
                      uint64_t off, uint64_t len, unsigned char *buf)
{
    struct xfer_piece *p = plan_add(pl);
    if (p == NULL)
        return SHOAL_ERR_NOMEM;
    memset(p, 0, sizeof *p);
    p->old_rank = o;
    p->server = server_for(c, c->resize, o);
    p->bytes = len;
    layout_runs_bytes(file_off + off, len, &p->src);
    p->dst = buf;
    layout_runs_bytes(0, len, &p->dst_runs);
    return SHOAL_SUCCESS;
}

/* The pieces of a distributed region r. */
static int plan_distributed(const struct shoal_ctx *c, const struct region *r, struct plan *pl,
                            char *msg, size_t msglen)
{
    const struct resize *z = c->resize;
    struct region_layout *old = malloc(sizeof *old * (size_t)z->nold);
    struct layout_part *parts = malloc(sizeof *parts * (size_t)z->nold);
    struct layout_piece *pieces = malloc(sizeof *pieces * (size_t)z->nold);
    uint64_t *file_off = malloc(sizeof *file_off * (size_t)z->nold);
    int rc = SHOAL_ERR_NOMEM, nparts = 0;
    if (old == NULL || parts == NULL || pieces == NULL || file_off == NULL) {
        snprintf(msg, msglen, "rank %d: out of memory planning region %d", c->rank, r->id);
        goto out;
    }
    char want[160], got[160];
    for (int o = 0; o < z->nold; o++) {
        struct shard_entry e;
        if (old_entry(z, o, r->id, &e, &file_off[nparts], &old[nparts]) < 0)
            continue;
        if (!layout_same_array(&r->layout, &old[nparts]) || e.elem_size != (uint32_t)r->elem_size) {
            layout_describe(want, sizeof want, &r->layout, r->count);
            layout_describe(got, sizeof got, &old[nparts], e.count);
            snprintf(msg, msglen,
                     "rank %d: region %d is protected as %s of %d-byte elements; old rank %d "
                     "holds %s of %u-byte elements: another array",
                     c->rank, r->id, want, r->elem_size, o, got, e.elem_size);
            rc = SHOAL_ERR_SIZE;
            goto out;
        }
        parts[nparts] = (struct layout_part){o, &old[nparts], e.count};
        nparts++;
    }
    if (nparts == 0) {
        snprintf(msg, msglen, "rank %d: region %d is not in the checkpoint of epoch %lld",
                 c->rank, r->id, z->epoch);
        rc = SHOAL_ERR_NOTFOUND;
        goto out;
    }
    /* layout_plan sorts parts: each piece names its part by its index there. */
    struct layout_problem why;
    int n = layout_plan(&r->layout, r->count, parts, nparts, pieces, &why);
    if (n < 0) {
        layout_describe(want, sizeof want, &r->layout, r->count);
        if (why.kind == LAYOUT_OVERLAP)
            snprintf(msg, msglen,
                     "rank %d: region %d: old ranks %d and %d both hold some of its elements "
                     "(a distributed region's parts must not overlap)",
                     c->rank, r->id, why.old_rank[0], why.old_rank[1]);
        else if (r->layout.kind == REGION_BLOCK)
            snprintf(msg, msglen,
                     "rank %d: region %d (%s): no old rank holds element %llu", c->rank, r->id,
                     want, (unsigned long long)why.at);
        else
            snprintf(msg, msglen, "rank %d: region %d (%s): no old rank holds %llu of its elements",
                     c->rank, r->id, want, (unsigned long long)why.at);
        rc = why.kind == LAYOUT_OVERLAP ? SHOAL_ERR_SIZE : SHOAL_ERR_NOTFOUND;
        goto out;
    }
    rc = SHOAL_SUCCESS;
    uint64_t es = (uint64_t)r->elem_size;
    for (int i = 0; i < n && rc == SHOAL_SUCCESS; i++) {
        const struct layout_piece *pc = &pieces[i];
        const struct region_layout *src = parts[pc->part].layout;
        uint64_t foff = file_off[src - old];
        if (r->layout.kind == REGION_BLOCK) {
            uint64_t len = (pc->hi[0] - pc->lo[0]) * es;
            rc = plan_bytes(c, pl, pc->old_rank, foff, (pc->lo[0] - src->offset) * es, len,
                            (unsigned char *)r->ptr + (pc->lo[0] - r->layout.offset) * es);
            continue;
        }
        struct xfer_piece *p = plan_add(pl);
        if (p == NULL) {
            rc = SHOAL_ERR_NOMEM;
            break;
        }
        p->old_rank = pc->old_rank;
        p->server = server_for(c, z, pc->old_rank);
        p->bytes = layout_volume(r->layout.ndims, pc->lo, pc->hi) * es;
        layout_runs(src, es, pc->lo, pc->hi, &p->src);
        p->src.base += foff;
        p->dst = r->ptr;
        layout_runs(&r->layout, es, pc->lo, pc->hi, &p->dst_runs);
    }
    if (rc != SHOAL_SUCCESS)
        snprintf(msg, msglen, "rank %d: out of memory planning region %d", c->rank, r->id);
out:
    free(old);
    free(parts);
    free(pieces);
    free(file_off);
    return rc;
}

/* The piece of a replicated region r: from one old shard, after checking that every
 * old shard holds the same bytes. The shard is one in this rank's own directory where
 * there is one, else the ranks take the old shards in turn. */
static int plan_replicated(const struct shoal_ctx *c, const struct region *r, struct plan *pl,
                           char *msg, size_t msglen)
{
    const struct resize *z = c->resize;
    int first = -1, local = -1, found = 0;
    uint64_t hash = 0;
    for (int o = 0; o < z->nold; o++) {
        struct shard_entry e;
        uint64_t off;
        int i = old_entry(z, o, r->id, &e, &off, NULL);
        if (i < 0)
            continue;
        if (e.kind != REGION_REPLICATED || e.elem_size != (uint32_t)r->elem_size ||
            e.count != r->count) {
            snprintf(msg, msglen,
                     "rank %d: region %d is protected as %zu replicated elements of %d bytes; "
                     "old rank %d holds %llu elements of %u bytes (%s)",
                     c->rank, r->id, r->count, r->elem_size, o, (unsigned long long)e.count,
                     e.elem_size, layout_kind_name(e.kind));
            return SHOAL_ERR_SIZE;
        }
        if (first < 0) {
            first = o;
            hash = z->old[o].hashes[i];
        } else if (z->old[o].hashes[i] != hash) {
            snprintf(msg, msglen,
                     "region %d is replicated, but old ranks %d and %d saved different values "
                     "of it",
                     r->id, first, o);
            return SHOAL_ERR_MISMATCH;
        }
        if (local < 0 && resize_holds(z, z->group, o))
            local = o;
        found++;
    }
    if (first < 0) {
        snprintf(msg, msglen, "rank %d: region %d is not in the checkpoint of epoch %lld",
                 c->rank, r->id, z->epoch);
        return SHOAL_ERR_NOTFOUND;
    }
    int source = local, pick = c->rank % found;
    for (int o = 0; source < 0 && o < z->nold; o++) {
        struct shard_entry e;
        uint64_t off;
        if (old_entry(z, o, r->id, &e, &off, NULL) >= 0 && pick-- == 0)
            source = o;
    }
    struct shard_entry e;
    uint64_t off = 0;
    (void)old_entry(z, source, r->id, &e, &off, NULL);
    int rc = plan_bytes(c, pl, source, off, 0, e.bytes, r->ptr);
    if (rc != SHOAL_SUCCESS)
        snprintf(msg, msglen, "rank %d: out of memory planning region %d", c->rank, r->id);
    return rc;
}

/* Runs the pieces (collective) and agrees on the outcome. */
static int run_plan(struct shoal_ctx *c, struct plan *pl)
{
    struct resize *z = c->resize;
    struct store_file_id *ids = malloc(sizeof *ids * (size_t)z->nold);
    int ok = ids != NULL;
    for (int o = 0; ok && o < z->nold; o++)
        ids[o] = z->old[o].id;
    struct xfer_job j = {c->comm, c->rank, c->nranks, z->nold, c->jobdir, z->epoch, ids,
                         c->cfg.restore_chunk, 0, 0, 0, ""};
    int rc = agree_error(c, ok ? SHOAL_SUCCESS : SHOAL_ERR_NOMEM, "out of memory");
    if (rc == SHOAL_SUCCESS) {
        rc = transfer_run(&j, pl->p, pl->n);
        rc = agree_error(c, rc, j.msg[0] ? j.msg : NULL);
    }
    c->restore_local_bytes += j.local_bytes;
    c->restore_recv_bytes += j.recv_bytes;
    free(ids);
    return rc;
}

/* Whether every protected region restores bit for bit from the old shards, written on
 * another machine perhaps (portable.c): SHOAL_SUCCESS, or SHOAL_ERR_PORTABLE with one line
 * naming the regions that do not in msg. Each region is judged by the first old shard
 * that holds it: an epoch's shards come from one program on one kind of machine. */
static int old_portable(const struct shoal_ctx *c, char *msg, size_t len)
{
    const struct resize *z = c->resize;
    struct shard_abi here = portable_this_abi();
    struct portable_refusals refused = {0};
    for (int i = 0; i < c->nregions; i++) {
        for (int o = 0; o < z->nold; o++) {
            struct shard_entry e;
            uint64_t off;
            char why[256];
            if (old_entry(z, o, c->regions[i].id, &e, &off, NULL) < 0)
                continue;
            if (!portable_region(z->old[o].h.version, z->old[o].h.abi, here, e.id, e.dtype,
                                 e.flags, why, sizeof why))
                portable_note(&refused, e.id, why);
            break;
        }
    }
    return portable_verdict(&refused, msg, len);
}

int resize_recover(struct shoal_ctx *c)
{
    char msg[512] = "";
    struct plan pl = {NULL, 0, 0};
    uint64_t needed = 0;
    int rc = old_portable(c, msg, sizeof msg);
    for (int i = 0; i < c->nregions && rc == SHOAL_SUCCESS; i++) {
        const struct region *r = &c->regions[i];
        needed += (uint64_t)r->count * (uint64_t)r->elem_size;
        if (r->layout.kind == REGION_PLAIN) {
            snprintf(msg, sizeof msg,
                     "region %d is per-rank (shoal_protect): it cannot be restored on %d ranks "
                     "from a checkpoint of %d; protect it with shoal_protect_block, "
                     "shoal_protect_subarray or shoal_protect_replicated",
                     r->id, c->nranks, c->resize->nold);
            rc = SHOAL_ERR_PERRANK;
        } else if (r->layout.kind == REGION_REPLICATED) {
            rc = plan_replicated(c, r, &pl, msg, sizeof msg);
        } else {
            rc = plan_distributed(c, r, &pl, msg, sizeof msg);
        }
    }
    /* A plain region is the same on every rank: its message once, from rank 0. */
    rc = agree_error(c, rc, msg);
    if (rc == SHOAL_SUCCESS) {
        for (int i = 0; i < c->nregions; i++)
            mem_prefault(c->regions[i].ptr, c->regions[i].count * (size_t)c->regions[i].elem_size);
        rc = run_plan(c, &pl);
        c->restore_needed_bytes += needed;
    }
    free(pl.p);
    return rc;
}

int resize_read_old(struct shoal_ctx *c, int old_rank, int id, size_t offset, void *buf, size_t len)
{
    char msg[256] = "";
    struct plan pl = {NULL, 0, 0};
    int rc = SHOAL_SUCCESS;
    const struct resize *z = c->resize;
    if (len > 0) {
        struct shard_entry e;
        uint64_t off;
        if (old_rank < 0 || old_rank >= z->nold) {
            snprintf(msg, sizeof msg, "rank %d: shoal_read_old: old rank %d of %d", c->rank,
                     old_rank, z->nold);
            rc = SHOAL_ERR_ARG;
        } else if (old_entry(z, old_rank, id, &e, &off, NULL) < 0) {
            snprintf(msg, sizeof msg, "rank %d: shoal_read_old: old rank %d has no region %d",
                     c->rank, old_rank, id);
            rc = SHOAL_ERR_NOTFOUND;
        } else if (offset > e.bytes || len > e.bytes - offset) {
            snprintf(msg, sizeof msg,
                     "rank %d: shoal_read_old: bytes %zu to %zu of region %d of old rank %d, "
                     "which has %llu",
                     c->rank, offset, offset + len, id, old_rank, (unsigned long long)e.bytes);
            rc = SHOAL_ERR_SIZE;
        } else {
            rc = plan_bytes(c, &pl, old_rank, off, offset, len, buf);
        }
    }
    rc = agree_error(c, rc, msg);
    if (rc == SHOAL_SUCCESS)
        rc = run_plan(c, &pl);
    free(pl.p);
    return rc;
}

int resize_old_bytes(const struct shoal_ctx *c, int old_rank, int id, size_t *bytes)
{
    const struct resize *z = c->resize;
    if (old_rank < 0 || old_rank >= z->nold)
        return SHOAL_ERR_ARG;
    struct shard_entry e;
    uint64_t off;
    if (old_entry(z, old_rank, id, &e, &off, NULL) < 0)
        return SHOAL_ERR_NOTFOUND;
    if (e.bytes > SIZE_MAX)
        return SHOAL_ERR_SIZE;
    *bytes = (size_t)e.bytes;
    return SHOAL_SUCCESS;
}

int resize_stored_count(const struct shoal_ctx *c, int id, uint64_t *count)
{
    const struct resize *z = c->resize;
    for (int o = 0; o < z->nold; o++) {
        struct shard_entry e;
        struct region_layout l;
        uint64_t off;
        if (old_entry(z, o, id, &e, &off, &l) < 0)
            continue;
        switch (e.kind) {
        case REGION_BLOCK:
            *count = l.global;
            return SHOAL_SUCCESS;
        case REGION_SUBARRAY:
            *count = layout_volume(l.ndims, (uint64_t[SHARD_MAX_DIMS]){0}, l.sizes);
            return SHOAL_SUCCESS;
        case REGION_REPLICATED:
            *count = e.count;
            return SHOAL_SUCCESS;
        default:
            return SHOAL_ERR_PERRANK;
        }
    }
    return SHOAL_ERR_NOTFOUND;
}
