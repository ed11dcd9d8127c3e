/*
 * checkpoint.c - protected regions, the staging buffer, and taking a checkpoint: a
 * memcpy of every region into the staging buffer, which the writer thread (writer.c)
 * then hashes and writes. Local: no MPI; shoal.c decides when (agree.c) and calls these.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

static int region_index(struct shoal_ctx *c, int id, int *insert_at)
{
    int lo = 0, hi = c->nregions;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (c->regions[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    *insert_at = lo;
    return (lo < c->nregions && c->regions[lo].id == id) ? lo : -1;
}

static uint64_t protected_desc_bytes(const struct shoal_ctx *c)
{
    uint64_t desc = 0;
    for (int i = 0; i < c->nregions; i++)
        desc += shard_desc_size(&c->regions[i].layout);
    return desc;
}

static uint64_t protected_file_size(struct shoal_ctx *c)
{
    uint64_t payload = 0;
    for (int i = 0; i < c->nregions; i++)
        payload += (uint64_t)c->regions[i].count * (uint64_t)c->regions[i].elem_size;
    return shard_image_size((uint64_t)c->nregions, protected_desc_bytes(c), payload);
}

int checkpoint_protect(struct shoal_ctx *c, int id, void *ptr, size_t count, int elem_size,
                       const struct region_layout *layout)
{
    int at, i = region_index(c, id, &at);
    if (i < 0) {
        if (c->nregions == c->cap_regions) {
            int cap = c->cap_regions ? 2 * c->cap_regions : 8;
            struct region *grown = realloc(c->regions, sizeof *grown * (size_t)cap);
            if (grown == NULL)
                return SHOAL_ERR_NOMEM;
            c->regions = grown;
            c->cap_regions = cap;
        }
        memmove(&c->regions[at + 1], &c->regions[at],
                sizeof c->regions[0] * (size_t)(c->nregions - at));
        c->nregions++;
        i = at;
    }
    c->regions[i].id = id;
    c->regions[i].ptr = ptr;
    c->regions[i].count = count;
    c->regions[i].elem_size = elem_size;
    c->regions[i].layout = *layout;

    /* Grow the staging buffer now if the writer lets us, so that the next checkpoint
     * only copies, with room to shift the image (stage_shift); otherwise the
     * checkpoint grows it, to the size alone. Failure here is not an error yet. */
    uint64_t need = protected_file_size(c);
    if (need != 0 && need <= SIZE_MAX - STAGE_SLACK)
        stage_reserve(c, (size_t)need + STAGE_SLACK, 0);
    return SHOAL_SUCCESS;
}

int checkpoint_unprotect(struct shoal_ctx *c, int id)
{
    int at, i = region_index(c, id, &at);
    if (i < 0)
        return SHOAL_ERR_NOTFOUND;
    memmove(&c->regions[i], &c->regions[i + 1],
            sizeof c->regions[0] * (size_t)(c->nregions - i - 1));
    c->nregions--;
    return SHOAL_SUCCESS;
}

void stage_free(struct shoal_ctx *c)
{
    if (c->stage_fd >= 0) {
        munmap(c->stage, c->stage_cap);
        close(c->stage_fd);
    } else {
        free(c->stage);
    }
    c->stage = NULL;
    c->stage_cap = 0;
    c->stage_fd = -1;
}

static void stage_install(struct shoal_ctx *c, unsigned char *p, size_t cap, int fd)
{
    c->stage = p;
    c->stage_cap = cap;
    c->stage_fd = fd;
}

void stage_wait(struct shoal_ctx *c)
{
    writer_wait_idle(&c->writer);
    struct writer_stage ws;
    writer_take_stage(&c->writer, &ws);
    if (ws.touch_failed) {
        /* Its file had no room: it stays unmapped, and staging goes back to memory. */
        stage_free(c);
        c->stage_in_file = 0;
    }
    if (ws.consumed)
        stage_install(c, NULL, 0, -1); /* unmapped by the writer: it is the shard now */
    if (ws.next != NULL) {
        if (c->stage == NULL) {
            stage_install(c, ws.next, ws.next_cap, ws.next_fd);
        } else {
            munmap(ws.next, ws.next_cap);
            close(ws.next_fd);
        }
    }
}

/* Replaces the staging buffer with one for images of size bytes: with headroom, so that
 * an array growing a little at a time does not reallocate at every checkpoint, or
 * without it if that much is not to be had. Its pages are touched here, or by the
 * writer while the program goes on (in_writer): first-touch page faults would otherwise
 * make the checkpoint's copy several times slower than a memcpy. On a tmpfs it maps the
 * rank's stage file, which its checkpoint then makes the shard without a copy. The
 * writer is idle. */
static int stage_replace(struct shoal_ctx *c, size_t size, int in_writer)
{
    size_t cap = size + size / 8;
    if (cap < size)
        cap = size;
    if (c->stage_in_file) {
        /* The stage file is reused: grown, its pages kept. No headroom: each checkpoint
         * makes a new staging buffer from the last shard's size anyway, and pages beyond
         * the shard would be fresh ones at every checkpoint. */
        cap = size;
        stage_free(c);
        int fd;
        unsigned char *p =
            store_stage_map(c->jobdir, c->rank, c->cfg.spare, cap, !in_writer, &fd);
        if (p != NULL) {
            stage_install(c, p, cap, fd);
            if (in_writer)
                writer_touch(&c->writer, p, cap, fd);
            return SHOAL_SUCCESS;
        }
        c->stage_in_file = 0; /* no room, or no file: memory from now on */
    }
    unsigned char *p = buf_alloc(cap);
    if (p == NULL) {
        cap = size;
        p = buf_alloc(cap);
    }
    if (p == NULL)
        return SHOAL_ERR_NOMEM;
    if (!in_writer)
        mem_touch(p, cap);
    stage_free(c);
    stage_install(c, p, cap, -1);
    if (in_writer)
        writer_touch(&c->writer, p, cap, -1);
    return SHOAL_SUCCESS;
}

int stage_reserve(struct shoal_ctx *c, size_t size, int may_wait)
{
    if (size <= c->stage_cap)
        return SHOAL_SUCCESS;
    /* Not while a restore is pending: a shard read for it is this large and becomes
     * the staging buffer once recovered, and a mapped one leaves the buffer to be
     * faulted in by the writer after the restore (shoal_recover, stage_prefault).
     * Touching a buffer of its size now would add to what a restart faults in before
     * the program can go on. */
    if (!may_wait && c->restart.data != NULL &&
        (c->restart.mapped || size <= c->restart.size + STAGE_SLACK))
        return SHOAL_SUCCESS;
    /* Nor before a restore from other ranks' shards: the writer faults it in after. */
    if (!may_wait && c->status == SHOAL_RESIZED && !c->recovered)
        return SHOAL_SUCCESS;
    if (!may_wait && writer_is_busy(&c->writer))
        return SHOAL_SUCCESS;
    stage_wait(c);
    if (size <= c->stage_cap)
        return SHOAL_SUCCESS; /* the writer prepared one */
    return stage_replace(c, size, 0);
}

int stage_ready(struct shoal_ctx *c)
{
    if (!c->stage_in_file)
        return 1;
    if (writer_is_busy(&c->writer))
        return 0;
    stage_wait(c); /* idle: only takes the results */
    return c->stage != NULL || !c->stage_in_file;
}

void stage_refill(struct shoal_ctx *c, double now)
{
    if (!c->stage_in_file || c->staged_epoch != 0 || writer_is_busy(&c->writer))
        return;
    stage_wait(c); /* idle: only takes the results (the last shard's buffer is gone) */
    if (c->stage != NULL || now - c->t_checkpoint < c->checkpoint_gap / 2)
        return;
    uint64_t need = protected_file_size(c);
    if (need != 0 && need <= SIZE_MAX - STAGE_SLACK)
        (void)stage_replace(c, (size_t)need + STAGE_SLACK, 1);
}

void stage_prefault(struct shoal_ctx *c)
{
    uint64_t need = protected_file_size(c);
    if (need == 0 || need > SIZE_MAX - STAGE_SLACK)
        return;
    size_t size = (size_t)need + STAGE_SLACK;
    if (size <= c->stage_cap || c->staged_epoch != 0 || writer_is_busy(&c->writer))
        return; /* the next checkpoint grows it */
    (void)stage_replace(c, size, 1); /* without memory, the next checkpoint says so */
}

/* stage_shift is where in the staging buffer the shard image of size bytes starts:
 * so that the largest region's copy lands at the same offset within a page as its
 * source. glibc copies large blocks (beyond its non-temporal threshold, tens of MB)
 * about 3.7 times slower when the destination is a little ahead of the source within
 * a page (a region after the 160-byte header and table: 77 ms instead of 20 ms for
 * 256 MB here; bench/ckpt-cost), and as fast as a plain memcpy when the two agree.
 * 0 when the buffer has no room to shift. */
static size_t stage_shift(const struct shoal_ctx *c, size_t size)
{
    size_t off = SHARD_HEADER_SIZE + (size_t)SHARD_ENTRY_SIZE * (size_t)c->nregions +
                 (size_t)protected_desc_bytes(c);
    size_t best = 0, at = 0;
    const void *src = NULL;
    for (int i = 0; i < c->nregions; i++) {
        size_t bytes = (size_t)(c->regions[i].count * (uint64_t)c->regions[i].elem_size);
        if (bytes > best) {
            best = bytes;
            at = off;
            src = c->regions[i].ptr;
        }
        off += bytes;
    }
    if (src == NULL)
        return 0;
    if (c->stage_fd >= 0)
        return 0; /* a file's image starts at its first byte */
    size_t shift = ((uintptr_t)src - ((uintptr_t)c->stage + at)) & (STAGE_SLACK - 1);
    return size <= c->stage_cap && shift <= c->stage_cap - size ? shift : 0;
}

int checkpoint_copy(struct shoal_ctx *c)
{
    /* Every rank numbers the epoch the same way, even when its own copy fails. */
    long long epoch = c->next_epoch++;
    /* An orphan copies nothing: its epoch would be exited from half made. */
    orphan_check(c->rank, epoch);
    stage_wait(c);
    uint64_t size = protected_file_size(c);
    int rc = SHOAL_SUCCESS;
    if (epoch > SHARD_EPOCH_MAX || size == 0 || size > SIZE_MAX)
        rc = SHOAL_ERR_ARG;
    else
        rc = stage_reserve(c, (size_t)size, 1);
    if (rc != SHOAL_SUCCESS) {
        shoal_log("rank %d: checkpoint of epoch %lld failed: %s", c->rank, epoch,
                  error_text(rc));
        writer_record_failure(&c->writer, epoch);
        return rc;
    }

    /* Header and table are built here rather than in the writer: the regions may be
     * re-protected as soon as this returns, and the table is a few bytes. */
    struct shard_header h;
    memset(&h, 0, sizeof h);
    h.version = SHARD_VERSION;
    h.abi = portable_this_abi();
    h.epoch = (uint64_t)epoch;
    h.rank = (uint32_t)c->rank;
    h.nranks = (uint32_t)c->nranks;
    h.nregions = (uint32_t)c->nregions;
    h.desc_bytes = protected_desc_bytes(c);
    h.payload_bytes = size - shard_image_size((uint64_t)c->nregions, h.desc_bytes, 0);
    h.created_ns = shoal_wall_ns();
    memcpy(h.job, c->cfg.job, sizeof c->cfg.job);
    size_t shift = stage_shift(c, (size_t)size);
    unsigned char *image = c->stage + shift;
    shard_put_header(image, &h);
    size_t desc = (size_t)shard_desc_offset(&h), off = (size_t)shard_payload_offset(&h);
    for (int i = 0; i < c->nregions; i++) {
        const struct region *r = &c->regions[i];
        struct shard_entry e = {r->id,
                                (uint32_t)r->elem_size,
                                r->count,
                                (uint64_t)r->count * (uint64_t)r->elem_size,
                                r->layout.kind,
                                r->layout.dtype,
                                r->layout.flags,
                                shard_desc_size(&r->layout)};
        shard_put_entry(image, (uint32_t)i, &e);
        shard_put_desc(image + desc, &r->layout);
        desc += e.desc_bytes;
        if (e.bytes > 0)
            memcpy(image + off, r->ptr, (size_t)e.bytes);
        off += (size_t)e.bytes;
    }
    c->staged_epoch = epoch;
    c->staged_size = (size_t)size;
    c->staged_shift = shift;
    /* The writer writes these counts after the shard: counts up to this call. */
    traffic_take(&c->traffic, epoch);

    int slot = (int)(epoch % CREATED_RING);
    c->created[slot].epoch = epoch;
    c->created[slot].created_ns = h.created_ns;
    c->checkpoints++;
    if (h.payload_bytes > c->bytes_max)
        c->bytes_max = h.payload_bytes;
    return SHOAL_SUCCESS;
}

void checkpoint_submit(struct shoal_ctx *c, int prepare_next)
{
    if (c->staged_epoch == 0)
        return;
    size_t next = c->stage_fd >= 0 && prepare_next ? c->stage_cap : 0;
    writer_submit(&c->writer, c->stage + c->staged_shift, c->staged_size, c->staged_epoch,
                  c->stage_fd, c->stage_cap, next);
    c->staged_epoch = 0;
}

void stage_after_restore(struct shoal_ctx *c)
{
    if (c->restart.mapped) {
        /* The image was the file's own pages: the staging buffer is yet to be faulted
         * in, which the writer does while the program goes on (stage_prefault). */
        shard_image_free(&c->restart);
        stage_prefault(c);
        return;
    }
    /* The image read into a buffer is already faulted in: reuse it as the staging
     * buffer when it is the larger one, instead of freeing one buffer and faulting in
     * another (the staging buffer was not grown for it: stage_reserve). */
    if (c->restart.size + STAGE_SLACK > c->stage_cap && !writer_is_busy(&c->writer)) {
        stage_wait(c); /* idle: only takes what it did */
        stage_free(c);
        c->stage = c->restart.data;
        c->stage_cap = c->restart.size + STAGE_SLACK;
        c->restart = (struct shard_image){NULL, 0, 0};
    } else {
        shard_image_free(&c->restart);
    }
}
