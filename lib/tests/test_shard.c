/*
 * test_shard.c - shard format v2 (and v1) without MPI: encoding, every verification failure in
 * the documented order, and the shared test vectors (testdata/shards/vectors.json).
 *
 * Usage: test_shard [testdata/shards]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "check.h"
#include "internal.h"
#include "json.h"

struct spec {
    int32_t id;
    uint32_t elem_size;
    uint64_t count;
};

static void set_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void set_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* A valid shard with a recognisable payload: byte i of region r is (r.id + i) & 0xff. */
static unsigned char *build(const struct spec *regions, int n, size_t *size)
{
    uint64_t payload = 0;
    for (int i = 0; i < n; i++)
        payload += regions[i].elem_size * regions[i].count;
    *size = (size_t)shard_file_size((uint64_t)n, payload);
    unsigned char *file = calloc(1, *size);
    struct shard_header h;
    memset(&h, 0, sizeof h);
    h.version = 1; /* these shards have only plain regions of bytes: version 1's */
    h.epoch = 7;
    h.rank = 1;
    h.nranks = 3;
    h.nregions = (uint32_t)n;
    h.payload_bytes = payload;
    h.created_ns = 1795427000000000000ull;
    strcpy(h.job, "heat");
    shard_put_header(file, &h);
    size_t off = SHARD_HEADER_SIZE + SHARD_ENTRY_SIZE * (size_t)n;
    for (int i = 0; i < n; i++) {
        struct shard_entry e = {regions[i].id, regions[i].elem_size, regions[i].count,
                                regions[i].elem_size * regions[i].count, REGION_PLAIN, 0, 0, 0};
        shard_put_entry(file, (uint32_t)i, &e);
        for (uint64_t b = 0; b < e.bytes; b++)
            file[off++] = (unsigned char)(regions[i].id + (int)b);
    }
    shard_seal(file, *size);
    return file;
}

static const struct spec three[] = {{-5, 1, 3}, {0, 8, 4}, {42, 4, 0}};

static void test_round_trip(void)
{
    size_t size;
    unsigned char *file = build(three, 3, &size);
    CHECK_EQ(size, 128 + 3 * 32 + 3 + 32 + 0 + 8);
    CHECK(memcmp(file, "SHOALSHD", 8) == 0);
    CHECK_EQ(file[8], 1);    /* version, little-endian */
    CHECK_EQ(file[12], 128); /* header_size */
    CHECK_EQ(file[16], 7);   /* epoch */
    CHECK(memcmp(file + 48, "heat\0", 5) == 0);
    struct shard_header h;
    CHECK_EQ(shard_verify(file, size, &h), SHARD_OK);
    CHECK_EQ(h.epoch, 7);
    CHECK_EQ(h.rank, 1);
    CHECK_EQ(h.nranks, 3);
    CHECK_EQ(h.nregions, 3);
    CHECK_EQ(h.payload_bytes, 35);
    CHECK_EQ(h.created_ns, 1795427000000000000ll);
    CHECK_STR(h.job, "heat");
    struct shard_entry e;
    shard_get_entry(file, 0, &e);
    CHECK_EQ(e.id, -5);
    CHECK_EQ(e.bytes, 3);
    shard_get_entry(file, 2, &e);
    CHECK_EQ(e.id, 42);
    CHECK_EQ(e.count, 0);
    CHECK_EQ(shard_get_u64(file + size - 8), XXH3_64bits(file, size - 8));
    CHECK_EQ(shard_check_identity(&h, "heat", 7, 1, 3), SHARD_OK);
    CHECK_EQ(shard_check_identity(&h, "cold", 7, 1, 3), SHARD_WRONG_SHARD);
    CHECK_EQ(shard_check_identity(&h, "heat", 6, 1, 3), SHARD_WRONG_SHARD);
    CHECK_EQ(shard_check_identity(&h, "heat", 7, 0, 3), SHARD_WRONG_SHARD);
    CHECK_EQ(shard_check_identity(&h, "heat", 7, 1, 4), SHARD_WRONG_SHARD);
    free(file);

    /* No regions at all is a valid shard of 136 bytes. */
    file = build(NULL, 0, &size);
    CHECK_EQ(size, 136);
    CHECK_EQ(shard_verify(file, size, &h), SHARD_OK);
    free(file);
}

/* A shard of the version written (3), made with shard_put_desc, reads back with its
 * layouts, and the descriptor checks catch a box that does not hold its count. */
static void test_round_trip_v2(void)
{
    struct region_layout block = {REGION_BLOCK, 14, 100, 40, 0, 0, {0}, {0}, {0}, 0};
    struct region_layout box = {REGION_SUBARRAY, 7, 0, 0, 2, LAYOUT_ORDER_FORTRAN,
                                {4, 6}, {2, 3}, {1, 2}, 0};
    struct region_layout rep = {REGION_REPLICATED, 7, 0, 0, 0, 0, {0}, {0}, {0}, 0};
    const struct region_layout *layouts[] = {&block, &box, &rep};
    const uint64_t counts[] = {5, 6, 1};
    const uint32_t elem[] = {8, 4, 4};
    struct shard_header h;
    memset(&h, 0, sizeof h);
    h.version = SHARD_VERSION;
    h.epoch = 2;
    h.nranks = 1;
    h.nregions = 3;
    strcpy(h.job, "v2");
    for (int i = 0; i < 3; i++) {
        h.desc_bytes += shard_desc_size(layouts[i]);
        h.payload_bytes += counts[i] * elem[i];
    }
    CHECK_EQ(h.desc_bytes, 16 + 8 + 24 * 2);
    size_t size = (size_t)shard_image_size(3, h.desc_bytes, h.payload_bytes);
    unsigned char *file = calloc(1, size);
    shard_put_header(file, &h);
    size_t desc = (size_t)shard_desc_offset(&h);
    for (int i = 0; i < 3; i++) {
        struct shard_entry e = {i + 1, elem[i], counts[i], counts[i] * elem[i],
                                layouts[i]->kind, layouts[i]->dtype, 0, shard_desc_size(layouts[i])};
        shard_put_entry(file, (uint32_t)i, &e);
        shard_put_desc(file + desc, layouts[i]);
        desc += e.desc_bytes;
    }
    CHECK_EQ(desc, shard_payload_offset(&h));
    shard_seal(file, size);
    struct shard_header got;
    CHECK_EQ(shard_verify(file, size, &got), SHARD_OK);
    CHECK_EQ(got.version, SHARD_VERSION);
    CHECK_EQ(got.desc_bytes, h.desc_bytes);
    struct region_layout l;
    shard_get_layout(file, &got, 0, &l);
    CHECK(l.kind == REGION_BLOCK && l.dtype == 14 && l.global == 100 && l.offset == 40);
    shard_get_layout(file, &got, 1, &l);
    CHECK(l.kind == REGION_SUBARRAY && l.ndims == 2 && l.order == LAYOUT_ORDER_FORTRAN &&
          l.sizes[1] == 6 && l.subsizes[0] == 2 && l.starts[1] == 2);
    shard_get_layout(file, &got, 2, &l);
    CHECK(l.kind == REGION_REPLICATED && l.dtype == 7);
    /* The box's count is 6: 5 is a bad region table. */
    struct region_layout bad;
    unsigned char d[64];
    shard_put_desc(d, &box);
    CHECK_EQ(shard_get_desc(d, shard_desc_size(&box), REGION_SUBARRAY, 7, 5, &bad), -1);
    CHECK_EQ(shard_get_desc(d, shard_desc_size(&box), REGION_SUBARRAY, 7, 6, &bad), 0);
    CHECK_EQ(shard_get_desc(d, 16, REGION_REPLICATED, 7, 1, &bad), -1);
    free(file);
}

/* One write into a shard at off (from the end if negative): width bytes (4 or 8) of
 * value, little-endian; width 1 sets one byte, 64 sets 64 bytes to value, 0 flips a
 * bit. */
struct patch {
    long off;
    int width;
    uint64_t value;
};

#define T0 128 /* start of the region table */
#define E1 (T0 + 32)
#define E2 (T0 + 64)

/* A valid shard of `three`, edited, resealed if asked, then verified. */
static const struct verify_case {
    const char *what;
    long size_delta; /* negative: cut the file */
    int reseal;      /* checksum recomputed after the edit */
    struct patch patch[2];
    int want;
} verify_cases[] = {
    {"cut below 136 bytes", -(long)(128 + 96 + 35 + 8 - 135), 0, {{0}}, SHARD_TRUNCATED},
    {"cut by one byte: the checksum sees it", -1, 0, {{0}}, SHARD_CHECKSUM_MISMATCH},
    {"magic", 0, 1, {{0, 1, 'X'}}, SHARD_BAD_MAGIC},
    {"version 4", 0, 1, {{8, 4, 4}}, SHARD_UNSUPPORTED_VERSION},
    {"version 4, checked before the checksum", 0, 0, {{8, 4, 4}}, SHARD_UNSUPPORTED_VERSION},
    {"version 0", 0, 1, {{8, 4, 0}}, SHARD_UNSUPPORTED_VERSION},
    {"header_size 64", 0, 1, {{12, 4, 64}}, SHARD_UNSUPPORTED_VERSION},
    {"payload bit", 0, 0, {{-9, 0, 0}}, SHARD_CHECKSUM_MISMATCH},
    {"checksum bit", 0, 0, {{-1, 0, 0}}, SHARD_CHECKSUM_MISMATCH},
    {"header bit: a checksum mismatch, not a bad header",
     0,
     0,
     {{28, 4, 0}},
     SHARD_CHECKSUM_MISMATCH},
    {"nranks 0", 0, 1, {{28, 4, 0}}, SHARD_BAD_HEADER},
    {"rank = nranks", 0, 1, {{24, 4, 3}}, SHARD_BAD_HEADER},
    {"epoch 0", 0, 1, {{16, 8, 0}}, SHARD_BAD_HEADER},
    {"job empty", 0, 1, {{48, 4, 0}}, SHARD_BAD_HEADER},
    {"job without NUL", 0, 1, {{48, 64, 'a'}}, SHARD_BAD_HEADER},
    {"reserved at 36", 0, 1, {{36, 1, 1}}, SHARD_BAD_HEADER},
    {"reserved at 120", 0, 1, {{127, 1, 1}}, SHARD_BAD_HEADER},
    {"payload_bytes too big for the file", 0, 1, {{40, 8, 36}}, SHARD_BAD_HEADER},
    {"payload_bytes overflows", 0, 1, {{40, 8, UINT64_MAX}}, SHARD_BAD_HEADER},
    {"nregions too big for the file", 0, 1, {{32, 4, 4}}, SHARD_BAD_HEADER},
    {"elem_size 0", 0, 1, {{E1 + 4, 4, 0}}, SHARD_BAD_REGION_TABLE},
    {"bytes != elem_size * count, totals right",
     0,
     1,
     {{T0 + 16, 8, 4}, {E1 + 16, 8, 31}},
     SHARD_BAD_REGION_TABLE},
    {"count * elem_size wraps around to bytes",
     0,
     1,
     {{E1 + 8, 8, UINT64_MAX / 8 + 5}},
     SHARD_BAD_REGION_TABLE},
    {"entry reserved", 0, 1, {{E1 + 24, 1, 1}}, SHARD_BAD_REGION_TABLE},
    {"ids equal", 0, 1, {{E1, 4, (uint32_t)-5}}, SHARD_BAD_REGION_TABLE},
    {"ids decreasing", 0, 1, {{E2, 4, (uint32_t)-9}}, SHARD_BAD_REGION_TABLE},
    {"bytes do not add up to payload_bytes",
     0,
     1,
     {{E2 + 8, 8, 1}, {E2 + 16, 8, 4}},
     SHARD_BAD_REGION_TABLE},
};

static void apply(unsigned char *file, size_t size, const struct patch *p)
{
    unsigned char *at = file + (p->off < 0 ? (long)size + p->off : p->off);
    if (p->width == 0)
        *at ^= 0x10;
    else if (p->width == 1)
        *at = (unsigned char)p->value;
    else if (p->width == 64)
        memset(at, (int)p->value, 64);
    else if (p->width == 4)
        set_u32(at, (uint32_t)p->value);
    else
        set_u64(at, p->value);
}

static void test_verify_failures(void)
{
    for (size_t i = 0; i < sizeof verify_cases / sizeof verify_cases[0]; i++) {
        const struct verify_case *c = &verify_cases[i];
        size_t size;
        unsigned char *file = build(three, 3, &size);
        size = (size_t)((long)size + c->size_delta);
        for (int j = 0; j < 2; j++)
            if (c->patch[j].width != 0 || c->patch[j].off != 0)
                apply(file, size, &c->patch[j]);
        if (c->reseal)
            shard_seal(file, size);
        struct shard_header h;
        int got = shard_verify(file, size, &h);
        if (!CHECK_STR(shard_verdict_name(got), shard_verdict_name(c->want)))
            fprintf(stderr, "  case: %s\n", c->what);
        free(file);
    }
    CHECK_EQ(shard_verify((const unsigned char *)"", 0, &(struct shard_header){0}),
             SHARD_TRUNCATED);

    CHECK_STR(shard_verdict_name(SHARD_CHECKSUM_MISMATCH), "checksum mismatch");
    CHECK_EQ(shard_verdict_code(SHARD_BAD_MAGIC), SHOAL_ERR_CORRUPT);
    CHECK_EQ(shard_verdict_code(SHARD_TRUNCATED), SHOAL_ERR_CORRUPT);
    CHECK_EQ(shard_verdict_code(SHARD_UNSUPPORTED_VERSION), SHOAL_ERR_VERSION);
    CHECK_EQ(shard_verdict_code(SHARD_WRONG_SHARD), SHOAL_ERR_MISMATCH);
}

static int hex_value(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* Does the payload of a region equal the hex string? */
static int payload_equals(const unsigned char *bytes, uint64_t len, const char *hex)
{
    if (hex == NULL || strlen(hex) != 2 * len)
        return 0;
    for (uint64_t i = 0; i < len; i++) {
        int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);
        if (hi < 0 || lo < 0 || bytes[i] != (unsigned char)(hi * 16 + lo))
            return 0;
    }
    return 1;
}

/* The u64 array member key of a vector region equals n values. */
static int u64s_equal(const struct json *r, const char *key, const uint64_t *values, uint32_t n)
{
    const struct json *a = json_get(r, key);
    if (a == NULL || a->type != JSON_ARRAY || a->n != (int)n)
        return 0;
    for (uint32_t d = 0; d < n; d++)
        if (a->items[d]->type != JSON_NUMBER || strtoull(a->items[d]->text, NULL, 10) != values[d])
            return 0;
    return 1;
}

/* A region's kind, datatype and descriptor against its vector. */
static void check_vector_layout(const struct json *r, const unsigned char *file,
                                const struct shard_header *h, uint32_t i, const char *name)
{
    static const char *const kinds[REGION_NKINDS] = {"plain", "block", "subarray", "replicated"};
    struct region_layout l;
    int64_t dtype, flags = 0;
    shard_get_layout(file, h, i, &l);
    const char *kind = json_get_str(r, "kind");
    (void)json_get_i64(r, "flags", &flags); /* absent: 0 */
    if (!CHECK(kind != NULL && l.kind < REGION_NKINDS && strcmp(kinds[l.kind], kind) == 0) ||
        !CHECK(json_get_i64(r, "datatype", &dtype) == 0 && dtype == l.dtype) ||
        !CHECK(flags == l.flags)) {
        fprintf(stderr, "  vector %s: region %u is %s of datatype %u, flags %u\n", name, i,
                l.kind < REGION_NKINDS ? kinds[l.kind] : "?", l.dtype, l.flags);
        return;
    }
    uint64_t global, offset;
    if (l.kind == REGION_BLOCK && !CHECK(json_get_u64(r, "global", &global) == 0 &&
                                         json_get_u64(r, "offset", &offset) == 0 &&
                                         global == l.global && offset == l.offset))
        fprintf(stderr, "  vector %s: region %u is elements %llu+ of %llu\n", name, i,
                (unsigned long long)l.offset, (unsigned long long)l.global);
    if (l.kind == REGION_SUBARRAY) {
        const char *order = json_get_str(r, "order");
        if (!CHECK(order != NULL && strcmp(order, l.order ? "Fortran" : "C") == 0 &&
                   u64s_equal(r, "sizes", l.sizes, l.ndims) &&
                   u64s_equal(r, "subsizes", l.subsizes, l.ndims) &&
                   u64s_equal(r, "starts", l.starts, l.ndims)))
            fprintf(stderr, "  vector %s: region %u's subarray differs\n", name, i);
    }
}

static void check_valid_vector(const struct json *v, const unsigned char *file, size_t size,
                               const struct shard_header *h, const char *name)
{
    int64_t epoch, rank, nranks;
    uint64_t created;
    if (!CHECK(json_get_i64(v, "epoch", &epoch) == 0 && json_get_i64(v, "rank", &rank) == 0 &&
               json_get_i64(v, "nranks", &nranks) == 0 &&
               json_get_u64(v, "created_ns", &created) == 0)) {
        fprintf(stderr, "  vector %s lacks epoch, rank, nranks or created_ns\n", name);
        return;
    }
    int64_t version;
    if (CHECK(json_get_i64(v, "version", &version) == 0))
        CHECK_EQ(h->version, version);
    int64_t isa = 0, ld = 0; /* absent: 0, not recorded */
    (void)json_get_i64(v, "isa", &isa);
    (void)json_get_i64(v, "long_double", &ld);
    CHECK_EQ(h->abi.isa, isa);
    CHECK_EQ(h->abi.long_double, ld);
    CHECK_STR(h->job, json_get_str(v, "job"));
    CHECK_EQ(h->epoch, epoch);
    CHECK_EQ(h->rank, rank);
    CHECK_EQ(h->nranks, nranks);
    CHECK_EQ(h->created_ns, created);
    const char *checksum = json_get_str(v, "checksum");
    if (CHECK(checksum != NULL))
        CHECK_EQ(shard_get_u64(file + size - 8), strtoull(checksum, NULL, 16));
    const struct json *regions = json_get(v, "regions");
    if (!CHECK(regions != NULL && regions->type == JSON_ARRAY))
        return;
    if (!CHECK_EQ(h->nregions, regions->n))
        return;
    uint64_t off = shard_payload_offset(h);
    for (int i = 0; i < regions->n; i++) {
        const struct json *r = regions->items[i];
        struct shard_entry e;
        int64_t id, elem, count;
        shard_get_entry(file, (uint32_t)i, &e);
        if (!CHECK(json_get_i64(r, "id", &id) == 0 &&
                   json_get_i64(r, "elem_size", &elem) == 0 &&
                   json_get_i64(r, "count", &count) == 0))
            continue;
        CHECK_EQ(e.id, id);
        CHECK_EQ(e.elem_size, elem);
        CHECK_EQ(e.count, count);
        check_vector_layout(r, file, h, (uint32_t)i, name);
        if (!CHECK(payload_equals(file + off, e.bytes, json_get_str(r, "payload_hex"))))
            fprintf(stderr, "  vector %s: payload of region %lld differs\n", name,
                    (long long)id);
        off += e.bytes;
    }
}

/* The reader's expectations of a "wrong shard" vector, if the vector gives them. */
static int expected_identity(const struct json *v, struct shard_header *want)
{
    const struct json *src = json_get(v, "expect");
    if (src == NULL)
        src = v;
    int64_t epoch, rank, nranks;
    const char *job = json_get_str(src, "job");
    if (job == NULL || json_get_i64(src, "epoch", &epoch) != 0 ||
        json_get_i64(src, "rank", &rank) != 0 || json_get_i64(src, "nranks", &nranks) != 0)
        return -1;
    snprintf(want->job, sizeof want->job, "%s", job);
    want->epoch = (uint64_t)epoch;
    want->rank = (uint32_t)rank;
    want->nranks = (uint32_t)nranks;
    return 0;
}

static void check_vector(const struct json *v, const char *dir)
{
    const char *name = json_get_str(v, "file");
    const struct json *ok = json_get(v, "ok");
    if (!CHECK(name != NULL && ok != NULL && ok->type == JSON_BOOL))
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    size_t size;
    unsigned char *file = (unsigned char *)json_read_file(path, &size);
    if (!CHECK(file != NULL)) {
        fprintf(stderr, "  cannot read %s\n", path);
        return;
    }
    struct shard_header h;
    int verdict = shard_verify(file, size, &h);
    const char *error = json_get_str(v, "error");
    if (verdict == SHARD_OK && error != NULL && strcmp(error, "wrong shard") == 0) {
        struct shard_header want;
        if (CHECK(expected_identity(v, &want) == 0))
            verdict = shard_check_identity(&h, want.job, want.epoch, want.rank, want.nranks);
    }
    if (ok->boolean) {
        if (CHECK_STR(shard_verdict_name(verdict), "ok"))
            check_valid_vector(v, file, size, &h, name);
        else
            fprintf(stderr, "  vector %s\n", name);
    } else if (!CHECK_STR(shard_verdict_name(verdict), error)) {
        fprintf(stderr, "  vector %s\n", name);
    }
    free(file);
}

/* The text of the shared test vectors file dir/name (its path in path), or NULL, a
 * failed check, when it is missing. */
static char *read_vectors(const char *dir, const char *name, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", dir, name);
    char *text = json_read_file(path, NULL);
    if (!CHECK(text != NULL))
        fprintf(stderr, "  %s is missing: the shared test vectors are required\n", path);
    return text;
}

/* vectors.json: one object per line, or an array of them, or {"vectors": [...]}. */
static void test_vectors(const char *dir)
{
    char path[4096];
    char *text = read_vectors(dir, "vectors.json", path, sizeof path);
    if (text == NULL)
        return;
    const char *p = text;
    int checked = 0;
    char err[128];
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
            p++;
        if (*p == 0)
            break;
        struct json *v = json_parse(&p, err, sizeof err);
        if (!CHECK(v != NULL)) {
            fprintf(stderr, "  %s: %s\n", path, err);
            break;
        }
        const struct json *list = v->type == JSON_ARRAY ? v : json_get(v, "vectors");
        if (list != NULL && list->type == JSON_ARRAY) {
            for (int i = 0; i < list->n; i++, checked++)
                check_vector(list->items[i], dir);
        } else {
            check_vector(v, dir);
            checked++;
        }
        json_free(v);
    }
    free(text);
    CHECK(checked > 0);
    printf("checked %d test vectors from %s\n", checked, path);
}

/* Sealing a piece at a time, as the writer does while it writes, gives shard_seal's
 * bytes for any piece size, a piece ending inside the trailer among them, and the
 * XXH3-64 of each block of the sealed file. */
static void test_sealer(void)
{
    static const struct spec big[] = {{1, 8, 100000}, {2, 1, 333}}; /* 4 blocks */
    size_t size;
    unsigned char *want = build(big, 2, &size);
    size_t nblocks = shard_blocks(size, SHARD_BLOCK_SIZE);
    CHECK_EQ(nblocks, 4);
    unsigned char *file = malloc(size);
    size_t pieces[] = {1, 7, 64, 1000, SHARD_BLOCK_SIZE - 1, SHARD_BLOCK_SIZE, 1 << 20,
                       size - 4, size - 8, size - 9, size, size + 5};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++) {
        memcpy(file, want, size);
        memset(file + size - SHARD_CHECKSUM_SIZE, 0xee, SHARD_CHECKSUM_SIZE);
        struct shard_sealer sealer;
        if (!CHECK_EQ(shard_sealer_init(&sealer, file, size), 0))
            continue;
        for (size_t off = 0; off < size; off += pieces[i])
            shard_sealer_feed(&sealer, off, size - off < pieces[i] ? size - off : pieces[i]);
        if (!CHECK(memcmp(file, want, size) == 0))
            fprintf(stderr, "  pieces of %zu bytes\n", pieces[i]);
        for (size_t b = 0; b < nblocks; b++) {
            size_t off = b * SHARD_BLOCK_SIZE, n = size - off < SHARD_BLOCK_SIZE ? size - off
                                                                               : SHARD_BLOCK_SIZE;
            if (!CHECK_EQ(sealer.sums[b], (uint64_t)XXH3_64bits(want + off, n)))
                fprintf(stderr, "  block %zu, pieces of %zu bytes\n", b, pieces[i]);
        }
        shard_sealer_free(&sealer);
    }
    free(file);
    free(want);
}

/* sums.json: the block sums file of a vector shard, in blocks of block_size, for the
 * file version (ino, mtime_ns) given. */
static void test_sums_vectors(const char *dir)
{
    char path[4096];
    char *text = read_vectors(dir, "sums.json", path, sizeof path);
    if (text == NULL)
        return;
    const char *p = text;
    char err[128];
    struct json *list = json_parse(&p, err, sizeof err);
    if (!CHECK(list != NULL && list->type == JSON_ARRAY)) {
        fprintf(stderr, "  %s: not an array of vectors\n", path);
        free(text);
        json_free(list);
        return;
    }
    for (int i = 0; i < list->n; i++) {
        const struct json *v = list->items[i];
        const char *name = json_get_str(v, "shard"), *hex = json_get_str(v, "sums_hex");
        uint64_t block, ino;
        int64_t mtime;
        if (!CHECK(name != NULL && hex != NULL && json_get_u64(v, "block_size", &block) == 0 &&
                   json_get_u64(v, "ino", &ino) == 0 && json_get_i64(v, "mtime_ns", &mtime) == 0 &&
                   block > 0))
            continue;
        char shard_path[4096];
        snprintf(shard_path, sizeof shard_path, "%s/%s", dir, name);
        size_t size;
        unsigned char *file = (unsigned char *)json_read_file(shard_path, &size);
        if (!CHECK(file != NULL))
            continue;
        size_t n = shard_blocks(size, block), len = shard_sums_file_size(size, block);
        uint64_t *sums = malloc(n * sizeof *sums);
        for (size_t b = 0; b < n; b++)
            sums[b] = (uint64_t)XXH3_64bits(file + b * block,
                                            size - b * block < block ? size - b * block : block);
        unsigned char *out = malloc(len);
        struct shard_sums_key key = {ino, mtime};
        shard_put_sums(out, file, size, block, sums, &key);
        char *got = malloc(2 * len + 1);
        for (size_t k = 0; k < len; k++)
            snprintf(got + 2 * k, 3, "%02x", out[k]);
        if (!CHECK_STR(got, hex))
            fprintf(stderr, "  %s in blocks of %llu\n", name, (unsigned long long)block);
        free(got);
        free(out);
        free(sums);
        free(file);
    }
    printf("checked %d block sums vectors from %s\n", list->n, path);
    json_free(list);
    free(text);
}

/* Which regions restore on another machine (portable.c), and the line that says why not. */
static void test_portable(void)
{
    const struct shard_abi amd64 = {SHARD_ISA_AMD64, SHARD_LD_X87};
    const struct shard_abi arm64 = {SHARD_ISA_ARM64, SHARD_LD_BINARY128};
    const struct shard_abi unknown = {SHARD_ISA_UNKNOWN, SHARD_LD_UNKNOWN};
    const struct {
        uint32_t version;
        struct shard_abi writer, reader;
        uint16_t dtype;
        uint8_t flags;
        int want;
        const char *line;
    } cases[] = {
        {3, amd64, amd64, 15, 0, 1, ""},
        {3, amd64, amd64, 0, SHARD_FLAG_ABI_BOUND, 1, ""},
        {3, amd64, arm64, 14, 0, 1, ""},
        {3, amd64, arm64, 1, 0, 1, ""},
        {3, arm64, amd64, 0, 0, 1, ""},
        {2, unknown, arm64, 15, 0, 1, ""}, /* no ABI recorded: as before */
        {3, amd64, arm64, 15, 0, 0,
         "region 4 holds MPI_LONG_DOUBLE written on amd64 (x87 80-bit); this arm64 machine's "
         "long double is IEEE binary128: not portable"},
        {3, arm64, amd64, 28, 0, 0,
         "region 4 holds MPI_C_LONG_DOUBLE_COMPLEX written on arm64 (IEEE binary128); this "
         "amd64 machine's long double is x87 80-bit: not portable"},
        {3, amd64, arm64, 0, SHARD_FLAG_LONG_DOUBLE, 0,
         "region 4 holds long double in a derived datatype written on amd64 (x87 80-bit); this "
         "arm64 machine's long double is IEEE binary128: not portable"},
        {3, arm64, amd64, 0, SHARD_FLAG_ABI_BOUND, 0,
         "region 4 holds a derived datatype with holes (a struct's padding) laid out on arm64; "
         "this machine is amd64: not portable"},
        {3, unknown, amd64, 14, 0, 0,
         "region 4 (MPI_DOUBLE) was written on an unknown machine; this machine is amd64: not "
         "portable"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char line[256] = "";
        int got = portable_region(cases[i].version, cases[i].writer, cases[i].reader, 4,
                                  cases[i].dtype, cases[i].flags, line, sizeof line);
        if (!CHECK_EQ(got, cases[i].want))
            fprintf(stderr, "  case %zu\n", i);
        CHECK_STR(line, cases[i].line);
    }
    struct portable_refusals r = {0};
    char msg[512];
    CHECK_EQ(portable_verdict(&r, msg, sizeof msg), SHOAL_SUCCESS);
    portable_note(&r, 15, "region 15 holds MPI_LONG_DOUBLE");
    portable_note(&r, 28, "region 28 holds MPI_C_LONG_DOUBLE_COMPLEX");
    CHECK_EQ(portable_verdict(&r, msg, sizeof msg), SHOAL_ERR_PORTABLE);
    CHECK_STR(msg, "region 15 holds MPI_LONG_DOUBLE; so is region 28");
    portable_note(&r, 30, "region 30");
    portable_verdict(&r, msg, sizeof msg);
    CHECK_STR(msg, "region 15 holds MPI_LONG_DOUBLE; so are regions 28, 30");
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "testdata/shards";
    test_round_trip();
    test_round_trip_v2();
    test_portable();
    test_sealer();
    test_verify_failures();
    test_vectors(dir);
    test_sums_vectors(dir);
    return check_summary(check_passed, check_failed);
}
