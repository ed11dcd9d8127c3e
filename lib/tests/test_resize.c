/*
 * test_resize.c - a checkpoint of N ranks restored onto M (docs/libshoal.md, "Changing
 * the rank count"), through the public API. One run of the program holds every
 * scenario: a checkpoint is written by the first N ranks of MPI_COMM_WORLD (shoal_init
 * on a communicator of N ranks) and restored by the first M, for N and M from 1 to the
 * run's size. The state is a block of doubles, a 2-D C-order subarray of ints split on
 * a grid of ranks, a 3-D Fortran-order subarray of doubles, a block some ranks have no
 * part of, and two replicated regions; after the restore every element must be the one
 * the old ranks saved at its global index, shoal_read_old must read any old rank's
 * bytes, and the run must checkpoint on its new count.
 *
 * With RESIZE_SPLIT=1 each rank's checkpoint directory is one of two, as on two nodes,
 * and the old shards are split between them: half the pieces then come through MPI,
 * in rounds as small as SHOAL_RESTORE_CHUNK (run.sh sets 4096). Then the errors: a
 * corrupt or missing old shard, a per-rank region (in the checkpoint, or protected in
 * the new run), replicated values that differ, another array's size, SHOAL_ELASTIC,
 * SHOAL_RESTART_NRANKS without an epoch, and a checkpoint written on the other instruction
 * set (its long double region). run.sh checks the lines they print.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "internal.h" /* store_load_shard, shard_get_layout: the new shards' layouts */
#include "shoal.h"
#include "testutil.h"

enum { ID_A = 1, ID_B = 2, ID_C = 3, ID_STEP = 4, ID_PARAMS = 5, ID_F = 6, ID_PLAIN = 9 };
enum { GA = 1001, BR = 11, BC = 7, CX = 5, CY = 4, CZ = 3, GF = 3 };

static int split_dirs; /* RESIZE_SPLIT: two checkpoint directories, as two nodes */

/* The even split of n items over parts: part p's first item and count. */
static void split(int n, int parts, int p, int *start, int *count)
{
    int base = n / parts, extra = n % parts;
    *count = base + (p < extra);
    *start = p * base + (p < extra ? p : extra);
}

/* A grid of rows x cols ranks for n: rows the largest divisor of n not above its root. */
static void grid(int n, int *rows, int *cols)
{
    *rows = 1;
    for (int d = 1; d * d <= n; d++)
        if (n % d == 0)
            *rows = d;
    *cols = n / *rows;
}

static double a_value(int g)
{
    return g * 0.5 + 3;
}
static int32_t b_value(int i, int j)
{
    return i * 100 + j;
}
static double c_value(int x, int y, int z)
{
    return x + 10.0 * y + 100.0 * z + 0.25;
}
static int64_t f_value(int g)
{
    return (int64_t)g * 1000000007LL - 5;
}

/* One rank's part of the state for a run of n ranks. */
struct part {
    int a_start, a_count;
    int b_start[2], b_size[2];
    int c_start[3], c_size[3];
    int f_start, f_count;
    double *a;
    int32_t *b;
    double *c;
    int64_t *f;
    int32_t step;
    double params[3];
    int32_t plain;
};

static void make_part(struct part *p, int rank, int n)
{
    memset(p, 0, sizeof *p);
    split(GA, n, rank, &p->a_start, &p->a_count);
    int rows, cols;
    grid(n, &rows, &cols);
    split(BR, rows, rank / cols, &p->b_start[0], &p->b_size[0]);
    split(BC, cols, rank % cols, &p->b_start[1], &p->b_size[1]);
    /* C: split along z (the slowest in Fortran order) and x, 2 x (n / 2) where n is even. */
    int zs = n % 2 == 0 ? 2 : 1;
    split(CZ, zs, rank % zs, &p->c_start[2], &p->c_size[2]);
    split(CX, n / zs, rank / zs, &p->c_start[0], &p->c_size[0]);
    p->c_start[1] = 0;
    p->c_size[1] = CY;
    /* F: GF elements, so that beyond GF ranks some hold none. */
    split(GF, n, rank, &p->f_start, &p->f_count);
    p->a = calloc((size_t)p->a_count + 1, sizeof(double));
    p->b = calloc((size_t)(p->b_size[0] * p->b_size[1]) + 1, sizeof(int32_t));
    p->c = calloc((size_t)(p->c_size[0] * p->c_size[1] * p->c_size[2]) + 1, sizeof(double));
    p->f = calloc((size_t)p->f_count + 1, sizeof(int64_t));
}

static void fill(struct part *p)
{
    for (int i = 0; i < p->a_count; i++)
        p->a[i] = a_value(p->a_start + i);
    for (int i = 0; i < p->b_size[0]; i++)
        for (int j = 0; j < p->b_size[1]; j++)
            p->b[i * p->b_size[1] + j] = b_value(p->b_start[0] + i, p->b_start[1] + j);
    for (int z = 0; z < p->c_size[2]; z++)
        for (int y = 0; y < p->c_size[1]; y++)
            for (int x = 0; x < p->c_size[0]; x++)
                p->c[(z * p->c_size[1] + y) * p->c_size[0] + x] =
                    c_value(p->c_start[0] + x, p->c_start[1] + y, p->c_start[2] + z);
    for (int i = 0; i < p->f_count; i++)
        p->f[i] = f_value(p->f_start + i);
    p->step = 77;
    p->params[0] = 1.5;
    p->params[1] = -2;
    p->params[2] = 8;
    p->plain = 5;
}

/* The number of elements that differ from what the old ranks saved. */
static int wrong(const struct part *p)
{
    struct part want = *p;
    want.a = malloc(sizeof(double) * ((size_t)p->a_count + 1));
    want.b = malloc(sizeof(int32_t) * ((size_t)(p->b_size[0] * p->b_size[1]) + 1));
    want.c = malloc(sizeof(double) * ((size_t)(p->c_size[0] * p->c_size[1] * p->c_size[2]) + 1));
    want.f = malloc(sizeof(int64_t) * ((size_t)p->f_count + 1));
    fill(&want);
    int bad = memcmp(want.a, p->a, sizeof(double) * (size_t)p->a_count) != 0;
    bad += memcmp(want.b, p->b, sizeof(int32_t) * (size_t)(p->b_size[0] * p->b_size[1])) != 0;
    bad += memcmp(want.c, p->c, sizeof(double) * (size_t)(p->c_size[0] * p->c_size[1] * p->c_size[2])) != 0;
    bad += memcmp(want.f, p->f, sizeof(int64_t) * (size_t)p->f_count) != 0;
    bad += p->step != 77 || memcmp(p->params, want.params, sizeof p->params) != 0;
    free(want.a);
    free(want.b);
    free(want.c);
    free(want.f);
    return bad;
}

static void free_part(struct part *p)
{
    free(p->a);
    free(p->b);
    free(p->c);
    free(p->f);
}

/* Protects the state; with plain, a per-rank region too. Returns the first error. */
static int protect_all(struct part *p, int plain)
{
    int rc = SHOAL_SUCCESS;
    const int bsizes[2] = {BR, BC}, csizes[3] = {CX, CY, CZ};
#define TRY(call)                                                                                  \
    do {                                                                                           \
        int r_ = (call);                                                                           \
        if (rc == SHOAL_SUCCESS)                                                                   \
            rc = r_;                                                                               \
    } while (0)
    TRY(shoal_protect_block(ID_A, p->a, (size_t)p->a_count, MPI_DOUBLE, GA, (uint64_t)p->a_start));
    TRY(shoal_protect_subarray(ID_B, p->b, 2, bsizes, p->b_size, p->b_start, MPI_ORDER_C, MPI_INT));
    TRY(shoal_protect_subarray(ID_C, p->c, 3, csizes, p->c_size, p->c_start, MPI_ORDER_FORTRAN,
                               MPI_DOUBLE));
    TRY(shoal_protect_replicated(ID_STEP, &p->step, 1, MPI_INT32_T));
    TRY(shoal_protect_replicated(ID_PARAMS, p->params, 3, MPI_DOUBLE));
    TRY(shoal_protect_block(ID_F, p->f, (size_t)p->f_count, MPI_INT64_T, GF, (uint64_t)p->f_start));
    if (plain)
        TRY(shoal_protect(ID_PLAIN, &p->plain, 1, MPI_INT));
#undef TRY
    return rc;
}

/* The first n ranks of the run, or MPI_COMM_NULL on the others. */
static MPI_Comm first(int n)
{
    MPI_Comm c;
    MPI_Comm_split(MPI_COMM_WORLD, t_rank < n ? 0 : MPI_UNDEFINED, t_rank, &c);
    return c;
}

enum { W_PLAIN = 1, W_DIFFER = 2 };

/* The first n ranks write epoch 1 of job (the run then finishes). */
static void write_epoch(const char *job, int n, int flags)
{
    MPI_Comm comm = first(n);
    if (comm != MPI_COMM_NULL) {
        t_env(job);
        setenv("SHOAL_CKPT_INTERVAL", "0", 1);
        setenv("SHOAL_EPOCH_BASE", "1", 1);
        struct part p;
        int rank;
        MPI_Comm_rank(comm, &rank);
        make_part(&p, rank, n);
        fill(&p);
        if (flags & W_DIFFER)
            p.step += rank == n - 1;
        CHECK_EQ(shoal_init(comm), SHOAL_SUCCESS);
        CHECK_EQ(protect_all(&p, flags & W_PLAIN), SHOAL_SUCCESS);
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
        CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
        free_part(&p);
        MPI_Comm_free(&comm);
    }
    t_barrier();
}

/* With split_dirs, rank 0 puts old shard o of epoch 1 of job in the directory of "node"
 * o % 2 (t_base/node0 or node1), where the ranks of the same parity read. */
static void split_shards(const char *job, int n)
{
    t_barrier();
    if (split_dirs && t_rank == 0) {
        for (int o = 0; o < n; o++) {
            char src[512], dir[512], dst[600];
            t_shard_path(src, sizeof src, job, 1, o);
            snprintf(dir, sizeof dir, "%s/node%d/%s/e00000001", t_base, o % 2, job);
            CHECK_EQ(store_mkdirs(dir), 0);
            snprintf(dst, sizeof dst, "%s/r%06d.shard", dir, o);
            CHECK_EQ(t_copy(src, dst), 0);
        }
    }
    t_barrier();
}

/* The environment of a run of the first m ranks restoring epoch 1 of n ranks (runner:
 * SHOAL_RESTART_EPOCH and SHOAL_RESTART_NRANKS; else standalone, from the manifest). */
static void read_env(const char *job, int n, int runner, int rank)
{
    t_env(job);
    setenv("SHOAL_CKPT_INTERVAL", "0", 1);
    if (runner) {
        char nold[16];
        snprintf(nold, sizeof nold, "%d", n);
        setenv("SHOAL_RESTART_EPOCH", "1", 1);
        setenv("SHOAL_RESTART_NRANKS", nold, 1);
        setenv("SHOAL_EPOCH_BASE", "2", 1);
    }
    if (split_dirs && runner) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/node%d", t_base, rank % 2);
        setenv("SHOAL_DIR", dir, 1);
        setenv("SHOAL_RESTORE_CHUNK", "4096", 1);
    }
}

/* The new shard of rank of epoch 2 holds region A as the block it protected. */
static void check_new_shard(const char *job, int rank, const struct part *p)
{
    char path[600];
    if (split_dirs)
        snprintf(path, sizeof path, "%s/node%d/%s/e00000002/r%06d.shard", t_base, rank % 2, job,
                 rank);
    else
        t_shard_path(path, sizeof path, job, 2, rank);
    struct shard_image img;
    struct shard_header h;
    if (!CHECK_EQ(store_load_shard(path, &img, &h), SHARD_OK))
        return;
    struct region_layout l;
    shard_get_layout(img.data, &h, 0, &l);
    CHECK_EQ(h.version, SHARD_VERSION);
    CHECK(l.kind == REGION_BLOCK && l.global == GA && l.offset == (uint64_t)p->a_start &&
          l.dtype == layout_datatype_code(MPI_DOUBLE));
    shard_image_free(&img);
}

/* The first m ranks restore epoch 1, written by n, and check everything. */
static void restore(const char *job, int n, int m, int runner)
{
    MPI_Comm comm = first(m);
    if (comm != MPI_COMM_NULL) {
        int rank;
        MPI_Comm_rank(comm, &rank);
        read_env(job, n, runner, rank);
        struct part p;
        make_part(&p, rank, m);
        if (CHECK_EQ(shoal_init(comm), SHOAL_SUCCESS)) {
            int nold = 0;
            size_t count = 0, bytes = 0;
            CHECK_EQ(shoal_status(), n == m ? SHOAL_RESTARTED : SHOAL_RESIZED);
            CHECK_EQ(shoal_restart_nranks(&nold), SHOAL_SUCCESS);
            CHECK_EQ(nold, n);
            CHECK(shoal_stored_count(ID_A, &count) == SHOAL_SUCCESS && count == GA);
            CHECK(shoal_stored_count(ID_B, &count) == SHOAL_SUCCESS && count == BR * BC);
            CHECK(shoal_stored_count(ID_PARAMS, &count) == SHOAL_SUCCESS && count == 3);
            CHECK_EQ(protect_all(&p, 0), SHOAL_SUCCESS);
            if (!CHECK_EQ(shoal_recover(), SHOAL_SUCCESS) || !CHECK_EQ(wrong(&p), 0))
                fprintf(stderr, "%s%d ranks restoring %d (%s%s)\n", check_prefix, m, n,
                        runner ? "runner" : "standalone", split_dirs ? ", split" : "");
            /* Any old rank's bytes, from wherever its shard is. */
            int o = (rank + 1) % n, ostart, ocount;
            split(GA, n, o, &ostart, &ocount);
            CHECK(shoal_old_bytes(o, ID_A, &bytes) == SHOAL_SUCCESS &&
                  bytes == (size_t)ocount * sizeof(double));
            double got[2] = {0, 0};
            CHECK_EQ(shoal_read_old(o, ID_A, sizeof(double), got, sizeof got), SHOAL_SUCCESS);
            CHECK(got[0] == a_value(ostart + 1) && got[1] == a_value(ostart + 2));
            CHECK_EQ(shoal_read_old(0, ID_A, 0, NULL, 0), SHOAL_SUCCESS); /* nothing */
            CHECK_EQ(shoal_old_bytes(n, ID_A, &bytes), SHOAL_ERR_ARG);
            CHECK_EQ(shoal_old_bytes(0, 77, &bytes), SHOAL_ERR_NOTFOUND);
            /* The run goes on on its own count. */
            CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
            CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
            check_new_shard(job, rank, &p);
        }
        free_part(&p);
        MPI_Comm_free(&comm);
    }
    t_barrier();
}

static void test_counts(int runner)
{
    for (int n = 1; n <= t_nranks; n++)
        for (int m = 1; m <= t_nranks; m++) {
            /* Split, each "node" needs a rank of the new run: its shards are nowhere else. */
            if ((!runner && n == m) || (split_dirs && m < 2))
                continue;
            char job[64];
            snprintf(job, sizeof job, "resize-%s-%d-%d", runner ? "r" : "s", n, m);
            write_epoch(job, n, 0);
            split_shards(job, n);
            if (!runner)
                t_unfinish(job);
            restore(job, n, m, runner);
        }
}

/* The first m ranks try to restore epoch 1 of n ranks: shoal_init's code, or, when it
 * succeeds, shoal_recover's after protecting the state (and a plain region with
 * plain). */
static int try_restore(const char *job, int n, int m, int runner, int plain, int *status)
{
    MPI_Comm comm = first(m);
    int rc = -100;
    *status = -1;
    if (comm != MPI_COMM_NULL) {
        int rank;
        MPI_Comm_rank(comm, &rank);
        read_env(job, n, runner, rank);
        struct part p;
        make_part(&p, rank, m);
        rc = shoal_init(comm);
        if (rc == SHOAL_SUCCESS) {
            *status = shoal_status();
            if (*status == SHOAL_RESIZED) {
                CHECK_EQ(protect_all(&p, plain), SHOAL_SUCCESS);
                rc = shoal_recover();
            }
            CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
        }
        free_part(&p);
        MPI_Comm_free(&comm);
    }
    t_barrier();
    return rc;
}

static void test_errors(void)
{
    int n = t_nranks, m = t_nranks > 1 ? t_nranks - 1 : 1, status;
    int in = t_rank < m; /* a rank of the restoring run */
    char path[512];
    if (n == m)
        return; /* one rank: no other count */

    /* A corrupt old shard, then a missing one: shoal_init fails naming it. */
    write_epoch("resize-corrupt", n, 0);
    split_shards("resize-corrupt", n);
    if (t_rank == 0) {
        t_shard_path(path, sizeof path, "resize-corrupt", 1, 1);
        CHECK_EQ(t_flip_byte(path, 200), 0);
        if (split_dirs) {
            snprintf(path, sizeof path, "%s/node1/resize-corrupt/e00000001/r000001.shard", t_base);
            CHECK_EQ(t_flip_byte(path, 200), 0);
        }
    }
    t_barrier();
    int rc = try_restore("resize-corrupt", n, m, 1, 0, &status);
    if (in)
        CHECK_EQ(rc, SHOAL_ERR_CORRUPT);
    write_epoch("resize-missing", n, 0);
    split_shards("resize-missing", n);
    if (t_rank == 0) {
        t_shard_path(path, sizeof path, "resize-missing", 1, n - 1);
        CHECK_EQ(unlink(path), 0);
        if (split_dirs) {
            snprintf(path, sizeof path, "%s/node%d/resize-missing/e00000001/r%06d.shard", t_base,
                     (n - 1) % 2, n - 1);
            CHECK_EQ(unlink(path), 0);
        }
    }
    t_barrier();
    rc = try_restore("resize-missing", n, m, 1, 0, &status);
    if (in)
        CHECK_EQ(rc, SHOAL_ERR_NOCKPT);

    /* A per-rank region in the checkpoint: refused at shoal_init by a runner, and
     * standalone the run starts afresh, saying why. */
    write_epoch("resize-plain", n, W_PLAIN);
    split_shards("resize-plain", n);
    rc = try_restore("resize-plain", n, m, 1, 0, &status);
    if (in)
        CHECK_EQ(rc, SHOAL_ERR_PERRANK);
    t_unfinish("resize-plain");
    rc = try_restore("resize-plain", n, m, 0, 0, &status);
    if (in)
        CHECK(rc == SHOAL_SUCCESS && status == SHOAL_FRESH);

    /* An elastic checkpoint, but the new run protects a per-rank region. */
    write_epoch("resize-plain-new", n, 0);
    split_shards("resize-plain-new", n);
    rc = try_restore("resize-plain-new", n, m, 1, 1, &status);
    if (in)
        CHECK(status == SHOAL_RESIZED && rc == SHOAL_ERR_PERRANK);

    /* Replicated values the old ranks saved differently. */
    write_epoch("resize-differ", n, W_DIFFER);
    split_shards("resize-differ", n);
    rc = try_restore("resize-differ", n, m, 1, 0, &status);
    if (in)
        CHECK(status == SHOAL_RESIZED && rc == SHOAL_ERR_MISMATCH);
}

/* Another array's size, SHOAL_ELASTIC, and SHOAL_RESTART_NRANKS without an epoch. */
static void test_refusals(void)
{
    int n = t_nranks, m = t_nranks > 1 ? t_nranks - 1 : 1;
    if (n != m) {
        write_epoch("resize-global", n, 0);
        split_shards("resize-global", n);
        MPI_Comm comm = first(m);
        if (comm != MPI_COMM_NULL) {
            int rank;
            MPI_Comm_rank(comm, &rank);
            read_env("resize-global", n, 1, rank);
            double x[4];
            if (CHECK_EQ(shoal_init(comm), SHOAL_SUCCESS)) {
                CHECK_EQ(shoal_protect_block(ID_A, x, rank == 0 ? 4 : 0, MPI_DOUBLE, GA + 1,
                                             rank == 0 ? 0 : 4),
                         SHOAL_SUCCESS);
                CHECK_EQ(shoal_recover(), SHOAL_ERR_SIZE);
                CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
            }
            MPI_Comm_free(&comm);
        }
        t_barrier();
    }

    t_env("resize-elastic");
    setenv("SHOAL_ELASTIC", "1", 1);
    int v = 0;
    double d[2] = {0, 0};
    const int sizes[1] = {2 * t_nranks}, sub[1] = {2}, start[1] = {2 * t_rank};
    if (CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS)) {
        CHECK_EQ(shoal_protect(1, &v, 1, MPI_INT), SHOAL_ERR_PERRANK);
        CHECK_EQ(shoal_protect_replicated(1, &v, 1, MPI_INT), SHOAL_SUCCESS);
        CHECK_EQ(shoal_protect_subarray(2, d, 1, sizes, sub, start, MPI_ORDER_C, MPI_DOUBLE),
                 SHOAL_SUCCESS);
        CHECK_EQ(shoal_protect_subarray(3, d, 1, sizes, sub, start, 12345, MPI_DOUBLE),
                 SHOAL_ERR_ARG);
        CHECK_EQ(shoal_protect_block(4, d, 2, MPI_DOUBLE, 3, 2), SHOAL_ERR_ARG);
        CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    }
    t_env("resize-nranks-alone");
    setenv("SHOAL_RESTART_NRANKS", "3", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_ARG);
    t_barrier();
}

/* A checkpoint written, as its header says, on the other instruction set: its long double
 * block, a derived type holding long double and a struct with padding are refused after a
 * change of the rank count and on the same count, in one line naming the first region and
 * both machines, then the others (run.sh), and its doubles and a derived type of doubles
 * restore once those are unprotected. */
static void test_other_machine(void)
{
    const char *job = "resize-abi";
    int n = t_nranks, m = t_nranks > 1 ? t_nranks - 1 : 1;
    enum { LD = 11, D = 12, LD2 = 13, PADDED = 14, D2 = 15, PER = 4 };
    struct padded {
        double x;
        char c;
    };
    MPI_Datatype ld_pair, d_pair, padded_type, members;
    MPI_Type_contiguous(2, MPI_LONG_DOUBLE, &ld_pair);
    MPI_Type_contiguous(2, MPI_DOUBLE, &d_pair);
    MPI_Type_create_struct(2, (int[]){1, 1},
                           (MPI_Aint[]){offsetof(struct padded, x), offsetof(struct padded, c)},
                           (MPI_Datatype[]){MPI_DOUBLE, MPI_CHAR}, &members);
    MPI_Type_create_resized(members, 0, sizeof(struct padded), &padded_type);
    MPI_Type_commit(&ld_pair);
    MPI_Type_commit(&d_pair);
    MPI_Type_commit(&padded_type);
    long double ld_two[2] = {1.5L, 2.5L};
    double d_two[2] = {3.5, 4.5}, d_back[2] = {0, 0};
    struct padded pad = {5.5, 'p'}, pad_back;
    struct shard_abi here = portable_this_abi();
    struct shard_abi other = here.isa == SHARD_ISA_ARM64
                                 ? (struct shard_abi){SHARD_ISA_AMD64, SHARD_LD_X87}
                                 : (struct shard_abi){SHARD_ISA_ARM64, SHARD_LD_BINARY128};
    MPI_Comm comm = first(n);
    t_env(job);
    setenv("SHOAL_CKPT_INTERVAL", "0", 1);
    setenv("SHOAL_EPOCH_BASE", "1", 1);
    long double ld[PER];
    double d[PER];
    for (int i = 0; i < PER; i++) {
        ld[i] = t_rank * PER + i;
        d[i] = t_rank * PER + i + 0.5;
    }
    CHECK_EQ(shoal_init(comm), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect_block(LD, ld, PER, MPI_LONG_DOUBLE, (uint64_t)PER * n,
                                 (uint64_t)PER * t_rank),
             SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect_block(D, d, PER, MPI_DOUBLE, (uint64_t)PER * n, (uint64_t)PER * t_rank),
             SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect_replicated(LD2, ld_two, 1, ld_pair), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect_replicated(PADDED, &pad, 1, padded_type), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect_replicated(D2, d_two, 1, d_pair), SHOAL_SUCCESS);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    MPI_Comm_free(&comm);
    char path[600];
    t_shard_path(path, sizeof path, job, 1, t_rank);
    CHECK_EQ(t_patch_u32_resealed(path, 36, other.isa | (uint32_t)other.long_double << 8), 0);
    t_barrier();
    split_shards(job, n);

    for (int count = m; count <= n; count += n - m > 0 ? n - m : 1) {
        comm = first(count);
        if (comm != MPI_COMM_NULL) {
            int rank;
            MPI_Comm_rank(comm, &rank);
            read_env(job, n, 1, rank);
            int start, part;
            split(PER * n, count, rank, &start, &part);
            long double *ld2 = calloc((size_t)part + 1, sizeof *ld2);
            double *d2 = calloc((size_t)part + 1, sizeof *d2);
            if (CHECK_EQ(shoal_init(comm), SHOAL_SUCCESS)) {
                shoal_protect_block(LD, ld2, (size_t)part, MPI_LONG_DOUBLE, (uint64_t)PER * n,
                                    (uint64_t)start);
                shoal_protect_block(D, d2, (size_t)part, MPI_DOUBLE, (uint64_t)PER * n,
                                    (uint64_t)start);
                shoal_protect_replicated(LD2, ld_two, 1, ld_pair);
                shoal_protect_replicated(PADDED, &pad_back, 1, padded_type);
                shoal_protect_replicated(D2, d_back, 1, d_pair);
                CHECK_EQ(shoal_recover(), SHOAL_ERR_PORTABLE);
                CHECK_EQ(shoal_unprotect(LD), SHOAL_SUCCESS);
                CHECK_EQ(shoal_unprotect(LD2), SHOAL_SUCCESS);
                CHECK_EQ(shoal_recover(), SHOAL_ERR_PORTABLE); /* the padded struct */
                CHECK_EQ(shoal_unprotect(PADDED), SHOAL_SUCCESS);
                CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
                for (int i = 0; i < part; i++)
                    CHECK(d2[i] == start + i + 0.5);
                CHECK(d_back[0] == 3.5 && d_back[1] == 4.5);
                CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
            }
            free(ld2);
            free(d2);
            MPI_Comm_free(&comm);
        }
        t_barrier();
        if (n == m)
            break;
    }
    MPI_Type_free(&ld_pair);
    MPI_Type_free(&d_pair);
    MPI_Type_free(&members);
    MPI_Type_free(&padded_type);
}

int main(int argc, char **argv)
{
    t_setup(&argc, &argv);
    split_dirs = getenv("RESIZE_SPLIT") != NULL && strcmp(getenv("RESIZE_SPLIT"), "1") == 0;
    test_counts(1);
    if (!split_dirs)
        test_counts(0);
    test_errors();
    test_refusals();
    test_other_machine();
    return t_finish();
}
