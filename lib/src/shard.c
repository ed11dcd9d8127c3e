/*
 * shard.c - encoding and verification of shard format v3, and verification of v1 and
 * v2 (docs/shard-format.md). Version 1 is version 2 with every region plain, of bytes,
 * and no descriptors, and version 2 is version 3 without the writer's ABI and region
 * flags: each keeps reserved (0) what the next one uses, so one reader serves all three. Pure functions over memory: the file I/O lives in store.c and
 * writer.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "internal.h"

/* Header field offsets. */
enum {
    OFF_MAGIC = 0,
    OFF_VERSION = 8,
    OFF_HEADER_SIZE = 12,
    OFF_EPOCH = 16,
    OFF_RANK = 24,
    OFF_NRANKS = 28,
    OFF_NREGIONS = 32,
    OFF_RESERVED1 = 36, /* version 3: the writer's ABI, bytes 36 and 37; 38 to 39 reserved */
    OFF_ISA = 36,
    OFF_LONG_DOUBLE = 37,
    OFF_RESERVED3 = 38,
    OFF_PAYLOAD = 40,
    OFF_JOB = 48,
    OFF_CREATED = 112,
    OFF_DESC = 120 /* version 2: desc_bytes; version 1: reserved */
};

/* Region table entry field offsets (version 1: 24 to 31 are reserved). */
enum {
    ENT_ID = 0,
    ENT_ELEM = 4,
    ENT_COUNT = 8,
    ENT_BYTES = 16,
    ENT_KIND = 24,  /* versions 1 and 2: 2 bytes; version 3: 1 byte, then the flags */
    ENT_FLAGS = 25, /* version 3 */
    ENT_DTYPE = 26,
    ENT_DESC = 28
};

static void put_u16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static uint16_t get_u16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

uint64_t shard_get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static const char *const verdict_names[SHARD_NVERDICTS] = {
    [SHARD_OK] = "ok",
    [SHARD_TRUNCATED] = "truncated",
    [SHARD_BAD_MAGIC] = "bad magic",
    [SHARD_UNSUPPORTED_VERSION] = "unsupported version",
    [SHARD_CHECKSUM_MISMATCH] = "checksum mismatch",
    [SHARD_BAD_HEADER] = "bad header",
    [SHARD_BAD_REGION_TABLE] = "bad region table",
    [SHARD_WRONG_SHARD] = "wrong shard",
    [SHARD_MISSING] = "missing",
    [SHARD_READ_ERROR] = "read error",
    [SHARD_NOMEM] = "out of memory",
};

const char *shard_verdict_name(int verdict)
{
    if (verdict < 0 || verdict >= SHARD_NVERDICTS)
        return "unknown";
    return verdict_names[verdict];
}

int shard_verdict_code(int verdict)
{
    switch (verdict) {
    case SHARD_OK:
        return SHOAL_SUCCESS;
    case SHARD_UNSUPPORTED_VERSION:
        return SHOAL_ERR_VERSION;
    case SHARD_WRONG_SHARD:
        return SHOAL_ERR_MISMATCH;
    case SHARD_MISSING:
        return SHOAL_ERR_NOCKPT;
    case SHARD_READ_ERROR:
        return SHOAL_ERR_IO;
    case SHARD_NOMEM:
        return SHOAL_ERR_NOMEM;
    default:
        return SHOAL_ERR_CORRUPT;
    }
}

uint64_t shard_image_size(uint64_t nregions, uint64_t desc_bytes, uint64_t payload_bytes)
{
    const uint64_t fixed = SHARD_HEADER_SIZE + SHARD_CHECKSUM_SIZE;
    if (nregions > (UINT64_MAX - fixed) / SHARD_ENTRY_SIZE)
        return 0;
    uint64_t without_payload = fixed + SHARD_ENTRY_SIZE * nregions;
    if (desc_bytes > UINT64_MAX - without_payload)
        return 0;
    without_payload += desc_bytes;
    if (payload_bytes > UINT64_MAX - without_payload)
        return 0;
    return without_payload + payload_bytes;
}

uint64_t shard_file_size(uint64_t nregions, uint64_t payload_bytes)
{
    return shard_image_size(nregions, 0, payload_bytes);
}

uint64_t shard_desc_offset(const struct shard_header *h)
{
    return SHARD_HEADER_SIZE + (uint64_t)SHARD_ENTRY_SIZE * h->nregions;
}

uint64_t shard_payload_offset(const struct shard_header *h)
{
    return shard_desc_offset(h) + h->desc_bytes;
}

void shard_put_header(unsigned char *file, const struct shard_header *h)
{
    memset(file, 0, SHARD_HEADER_SIZE);
    memcpy(file + OFF_MAGIC, SHARD_MAGIC, 8);
    put_u32(file + OFF_VERSION, h->version);
    put_u32(file + OFF_HEADER_SIZE, SHARD_HEADER_SIZE);
    put_u64(file + OFF_EPOCH, h->epoch);
    put_u32(file + OFF_RANK, h->rank);
    put_u32(file + OFF_NRANKS, h->nranks);
    put_u32(file + OFF_NREGIONS, h->nregions);
    if (h->version >= 3) {
        file[OFF_ISA] = h->abi.isa;
        file[OFF_LONG_DOUBLE] = h->abi.long_double;
    }
    put_u64(file + OFF_PAYLOAD, h->payload_bytes);
    /* The job field keeps at least one NUL: the format needs it to find the end. */
    size_t len = strnlen(h->job, SHARD_JOB_MAX);
    memcpy(file + OFF_JOB, h->job, len);
    put_u64(file + OFF_CREATED, h->created_ns);
    put_u64(file + OFF_DESC, h->desc_bytes);
}

void shard_put_entry(unsigned char *file, uint32_t index, const struct shard_entry *e)
{
    unsigned char *p = file + SHARD_HEADER_SIZE + (size_t)SHARD_ENTRY_SIZE * index;
    put_u32(p + ENT_ID, (uint32_t)e->id);
    put_u32(p + ENT_ELEM, e->elem_size);
    put_u64(p + ENT_COUNT, e->count);
    put_u64(p + ENT_BYTES, e->bytes);
    put_u16(p + ENT_KIND, e->kind); /* below 256: the flags' byte is 0 */
    p[ENT_FLAGS] = e->flags;
    put_u16(p + ENT_DTYPE, e->dtype);
    put_u32(p + ENT_DESC, e->desc_bytes);
}

uint32_t shard_desc_size(const struct region_layout *l)
{
    switch (l->kind) {
    case REGION_BLOCK:
        return SHARD_BLOCK_DESC_SIZE;
    case REGION_SUBARRAY:
        return (uint32_t)SHARD_SUBARRAY_DESC_SIZE(l->ndims);
    default:
        return 0;
    }
}

void shard_put_desc(unsigned char *p, const struct region_layout *l)
{
    if (l->kind == REGION_BLOCK) {
        put_u64(p, l->global);
        put_u64(p + 8, l->offset);
    } else if (l->kind == REGION_SUBARRAY) {
        put_u32(p, l->ndims);
        put_u32(p + 4, l->order);
        for (uint32_t d = 0; d < l->ndims; d++) {
            put_u64(p + 8 + 8 * d, l->sizes[d]);
            put_u64(p + 8 + 8 * (l->ndims + d), l->subsizes[d]);
            put_u64(p + 8 + 8 * (2 * l->ndims + d), l->starts[d]);
        }
    }
}

/* a * b into *out, 0 if it overflows. */
static int mul_ok(uint64_t a, uint64_t b, uint64_t *out)
{
    if (a != 0 && b > UINT64_MAX / a)
        return 0;
    *out = a * b;
    return 1;
}

int shard_get_desc(const unsigned char *p, uint64_t len, uint16_t kind, uint16_t dtype,
                   uint64_t count, struct region_layout *l)
{
    memset(l, 0, offsetof(struct region_layout, sizes));
    l->flags = 0;
    l->kind = kind;
    l->dtype = dtype;
    switch (kind) {
    case REGION_PLAIN:
    case REGION_REPLICATED:
        return len == 0 ? 0 : -1;
    case REGION_BLOCK:
        if (len != SHARD_BLOCK_DESC_SIZE)
            return -1;
        l->global = shard_get_u64(p);
        l->offset = shard_get_u64(p + 8);
        return l->offset <= l->global && count <= l->global - l->offset ? 0 : -1;
    case REGION_SUBARRAY:
        if (len < 8)
            return -1;
        l->ndims = get_u32(p);
        l->order = get_u32(p + 4);
        if (l->ndims < 1 || l->ndims > SHARD_MAX_DIMS || len != SHARD_SUBARRAY_DESC_SIZE(l->ndims) ||
            (l->order != LAYOUT_ORDER_C && l->order != LAYOUT_ORDER_FORTRAN))
            return -1;
        uint64_t global = 1, local = 1;
        for (uint32_t d = 0; d < l->ndims; d++) {
            l->sizes[d] = shard_get_u64(p + 8 + 8 * d);
            l->subsizes[d] = shard_get_u64(p + 8 + 8 * (l->ndims + d));
            l->starts[d] = shard_get_u64(p + 8 + 8 * (2 * l->ndims + d));
            if (l->sizes[d] == 0 || l->starts[d] > l->sizes[d] ||
                l->subsizes[d] > l->sizes[d] - l->starts[d] ||
                !mul_ok(global, l->sizes[d], &global) || !mul_ok(local, l->subsizes[d], &local))
                return -1;
        }
        return local == count ? 0 : -1;
    default:
        return -1;
    }
}

void shard_seal(unsigned char *file, size_t size)
{
    size_t body = size - SHARD_CHECKSUM_SIZE;
    put_u64(file + body, (uint64_t)XXH3_64bits(file, body));
}

int shard_sealer_init(struct shard_sealer *s, unsigned char *file, size_t size)
{
    *s = (struct shard_sealer){.file = file, .size = size};
    s->state = XXH3_createState();
    s->block = XXH3_createState();
    s->sums = malloc(shard_blocks(size, SHARD_BLOCK_SIZE) * sizeof *s->sums);
    if (s->state == NULL || s->block == NULL || s->sums == NULL) {
        shard_sealer_free(s);
        return ENOMEM;
    }
    XXH3_64bits_reset(s->state);
    return 0;
}

void shard_sealer_feed(struct shard_sealer *s, size_t off, size_t n)
{
    size_t body = s->size - SHARD_CHECKSUM_SIZE;
    if (off < body)
        XXH3_64bits_update(s->state, s->file + off, (off + n < body ? off + n : body) - off);
    if (off + n > body)
        put_u64(s->file + body, (uint64_t)XXH3_64bits_digest(s->state));
    /* The blocks of the piece, the trailer's bytes written by now. */
    for (size_t end = off + n; off < end;) {
        size_t in = off % SHARD_BLOCK_SIZE, i = off / SHARD_BLOCK_SIZE;
        size_t block_end = off - in + SHARD_BLOCK_SIZE < s->size ? off - in + SHARD_BLOCK_SIZE
                                                                 : s->size;
        size_t k = (end < block_end ? end : block_end) - off;
        if (in == 0 && off + k == block_end) {
            s->sums[i] = (uint64_t)XXH3_64bits(s->file + off, k); /* whole in one piece */
        } else {
            if (in == 0)
                XXH3_64bits_reset(s->block);
            XXH3_64bits_update(s->block, s->file + off, k);
            if (off + k == block_end)
                s->sums[i] = (uint64_t)XXH3_64bits_digest(s->block);
        }
        off += k;
    }
}

void shard_sealer_free(struct shard_sealer *s)
{
    XXH3_freeState(s->state);
    XXH3_freeState(s->block);
    free(s->sums);
    s->state = s->block = NULL;
    s->sums = NULL;
}

size_t shard_blocks(size_t size, size_t block)
{
    return size / block + (size % block != 0);
}

size_t shard_sums_file_size(size_t size, size_t block)
{
    return SHARD_SUMS_FIXED_SIZE + 8 * shard_blocks(size, block) + SHARD_CHECKSUM_SIZE;
}

void shard_put_sums(unsigned char *out, const unsigned char *file, size_t size, size_t block,
                    const uint64_t *sums, const struct shard_sums_key *key)
{
    size_t n = shard_blocks(size, block), len = shard_sums_file_size(size, block);
    memcpy(out, SHARD_SUMS_MAGIC, 8);
    put_u32(out + 8, SHARD_SUMS_VERSION);
    put_u32(out + 12, (uint32_t)block);
    put_u64(out + 16, size);
    put_u64(out + 24, shard_get_u64(file + size - SHARD_CHECKSUM_SIZE));
    put_u64(out + 32, key->ino);
    put_u64(out + 40, (uint64_t)key->mtime_ns);
    for (size_t i = 0; i < n; i++)
        put_u64(out + SHARD_SUMS_FIXED_SIZE + 8 * i, sums[i]);
    shard_seal(out, len);
}

void shard_get_entry(const unsigned char *file, uint32_t index, struct shard_entry *e)
{
    const unsigned char *p = file + SHARD_HEADER_SIZE + (size_t)SHARD_ENTRY_SIZE * index;
    e->id = (int32_t)get_u32(p + ENT_ID);
    e->elem_size = get_u32(p + ENT_ELEM);
    e->count = shard_get_u64(p + ENT_COUNT);
    e->bytes = shard_get_u64(p + ENT_BYTES);
    e->kind = get_u16(p + ENT_KIND);
    e->flags = 0;
    if (get_u32(file + OFF_VERSION) >= 3) {
        e->kind = p[ENT_KIND];
        e->flags = p[ENT_FLAGS];
    }
    e->dtype = get_u16(p + ENT_DTYPE);
    e->desc_bytes = get_u32(p + ENT_DESC);
}

void shard_get_layout(const unsigned char *file, const struct shard_header *h, uint32_t index,
                      struct region_layout *l)
{
    uint64_t off = shard_desc_offset(h);
    struct shard_entry e;
    for (uint32_t i = 0; i < index; i++) {
        shard_get_entry(file, i, &e);
        off += e.desc_bytes;
    }
    shard_get_entry(file, index, &e);
    (void)shard_get_desc(file + off, e.desc_bytes, e.kind, e.dtype, e.count, l);
    l->flags = e.flags;
}

/* Whether the n bytes at s are well-formed UTF-8 (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF). */
static int utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) {
            len = 2, cp = c & 0x1f;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3, cp = c & 0x0f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4, cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i < len)
            return 0;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + k] & 0x3f);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
            return 0;
        i += len;
    }
    return 1;
}

/* The job field: UTF-8, 1 to 63 bytes, then NUL bytes only (docs/shard-format.md). */
static int job_ok(const unsigned char *field)
{
    const unsigned char *nul = memchr(field, 0, SHARD_JOB_FIELD);
    if (nul == NULL || nul == field || !utf8_valid(field, (size_t)(nul - field)))
        return 0;
    for (const unsigned char *p = nul; p < field + SHARD_JOB_FIELD; p++)
        if (*p != 0)
            return 0;
    return 1;
}

void shard_get_header(const unsigned char *file, struct shard_header *h)
{
    h->version = get_u32(file + OFF_VERSION);
    h->epoch = shard_get_u64(file + OFF_EPOCH);
    h->rank = get_u32(file + OFF_RANK);
    h->nranks = get_u32(file + OFF_NRANKS);
    h->nregions = get_u32(file + OFF_NREGIONS);
    h->payload_bytes = shard_get_u64(file + OFF_PAYLOAD);
    h->created_ns = shard_get_u64(file + OFF_CREATED);
    memcpy(h->job, file + OFF_JOB, SHARD_JOB_FIELD);
    h->desc_bytes = shard_get_u64(file + OFF_DESC);
    h->abi = (struct shard_abi){0, 0};
    if (h->version >= 3)
        h->abi = (struct shard_abi){file[OFF_ISA], file[OFF_LONG_DOUBLE]};
}

static int header_ok(const unsigned char *file, size_t size, struct shard_header *h)
{
    shard_get_header(file, h);
    if (h->nranks == 0 || h->rank >= h->nranks || h->epoch == 0)
        return 0;
    if (!job_ok(file + OFF_JOB))
        return 0;
    /* Any ABI codes are well-formed: what a reader makes of them is portable.c's. */
    if (h->version >= 3 ? get_u16(file + OFF_RESERVED3) != 0 : get_u32(file + OFF_RESERVED1) != 0)
        return 0;
    if (h->version == 1 && h->desc_bytes != 0)
        return 0;
    uint64_t want = shard_image_size(h->nregions, h->desc_bytes, h->payload_bytes);
    return want != 0 && want == (uint64_t)size;
}

/* The table's checks; the file holds the header, the table and the descriptor area
 * (the header's checks passed). */
static int table_ok(const unsigned char *file, const struct shard_header *h)
{
    uint64_t total = 0, desc = 0;
    for (uint32_t i = 0; i < h->nregions; i++) {
        struct shard_entry e;
        shard_get_entry(file, i, &e);
        const unsigned char *p = file + SHARD_HEADER_SIZE + (size_t)SHARD_ENTRY_SIZE * i;
        if (e.elem_size == 0 || (h->version == 1 && shard_get_u64(p + ENT_KIND) != 0) ||
            (e.flags & ~SHARD_FLAGS_KNOWN) != 0)
            return 0;
        /* The descriptor lies within the area, and says what the count says. */
        struct region_layout l;
        if (e.desc_bytes > h->desc_bytes - desc ||
            shard_get_desc(file + shard_desc_offset(h) + desc, e.desc_bytes, e.kind, e.dtype,
                           e.count, &l) != 0)
            return 0;
        desc += e.desc_bytes;
        if (e.count > UINT64_MAX / e.elem_size || e.count * e.elem_size != e.bytes)
            return 0;
        if (i > 0) {
            struct shard_entry prev;
            shard_get_entry(file, i - 1, &prev);
            if (prev.id >= e.id)
                return 0;
        }
        if (e.bytes > UINT64_MAX - total)
            return 0;
        total += e.bytes;
    }
    return total == h->payload_bytes && desc == h->desc_bytes;
}

int shard_verify(const unsigned char *file, size_t size, struct shard_header *h)
{
    if (size < SHARD_MIN_SIZE)
        return SHARD_TRUNCATED;
    if (memcmp(file + OFF_MAGIC, SHARD_MAGIC, 8) != 0)
        return SHARD_BAD_MAGIC;
    uint32_t version = get_u32(file + OFF_VERSION);
    if (version < SHARD_VERSION_MIN || version > SHARD_VERSION ||
        get_u32(file + OFF_HEADER_SIZE) != SHARD_HEADER_SIZE)
        return SHARD_UNSUPPORTED_VERSION;
    size_t body = size - SHARD_CHECKSUM_SIZE;
    if ((uint64_t)XXH3_64bits(file, body) != shard_get_u64(file + body))
        return SHARD_CHECKSUM_MISMATCH;
    if (!header_ok(file, size, h))
        return SHARD_BAD_HEADER;
    if (!table_ok(file, h))
        return SHARD_BAD_REGION_TABLE;
    return SHARD_OK;
}

int shard_check_identity(const struct shard_header *h, const char *job, uint64_t epoch,
                         uint32_t rank, uint32_t nranks)
{
    if (strcmp(h->job, job) != 0 || h->epoch != epoch || h->rank != rank || h->nranks != nranks)
        return SHARD_WRONG_SHARD;
    return SHARD_OK;
}
