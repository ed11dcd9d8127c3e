/*
 * test_api.c - libshoal through its public API, on any number of ranks (run.sh uses 1
 * and 2): round trips of several datatypes and sizes, growing arrays, recover errors,
 * progress, write errors and which ranks watch their launcher (orphan.c). The epochs
 * on disk (pruning, recycling, stage files, spares, kept epochs) are in test_epochs.c;
 * when checkpoints are taken (the snapshot agreement, the automatic
 * interval, checkpoint requests and holding after them, statistics) is in test_when.c;
 * corrupt shards and configuration errors are in test_corrupt.c.
 *
 * Every scenario uses its own job id under one scratch directory; rank 0 does the file
 * surgery between barriers.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <pthread.h>
#include <unistd.h>
#include <xxhash.h>

#include "check.h"
#include "internal.h" /* store_load_shard: a held epoch's shards must verify */
#include "json.h"
#include "shoal.h"
#include "testutil.h"

void test_corrupt_all(void); /* test_corrupt.c */
void test_when_all(void);    /* test_when.c */
void test_epochs_all(void);  /* test_epochs.c */

/* Values a rank stores: different per rank, region and element. */
static double dval(size_t i, int tag)
{
    return (double)i * 0.5 + 1000.0 * t_rank + tag;
}

struct state {
    double *big; /* several MB */
    size_t nbig;
    int one;
    char empty[1];
    double triples[5][3]; /* a contiguous derived type of 3 doubles */
    char text[12];
};

static void fill(struct state *s, int tag)
{
    for (size_t i = 0; i < s->nbig; i++)
        s->big[i] = dval(i, tag);
    s->one = 42 + t_rank + tag;
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 3; j++)
            s->triples[i][j] = dval((size_t)(i * 3 + j), tag + 7);
    snprintf(s->text, sizeof s->text, "hello %d-%d", t_rank, tag % 10);
}

static int protect_all(struct state *s, MPI_Datatype triple)
{
    int rc = shoal_protect(1, s->big, s->nbig, MPI_DOUBLE);
    if (rc == 0)
        rc = shoal_protect(2, &s->one, 1, MPI_INT);
    if (rc == 0)
        rc = shoal_protect(3, s->empty, 0, MPI_CHAR);
    if (rc == 0)
        rc = shoal_protect(4, s->triples, 5, triple);
    if (rc == 0)
        rc = shoal_protect(-7, s->text, sizeof s->text, MPI_CHAR);
    if (rc == 0)
        rc = shoal_protect(9, NULL, 0, MPI_BYTE); /* zero bytes, no memory at all */
    return rc;
}

static void test_round_trip(void)
{
    const char *job = "types";
    MPI_Datatype triple;
    MPI_Type_contiguous(3, MPI_DOUBLE, &triple);
    MPI_Type_commit(&triple);
    struct state s;
    memset(&s, 0, sizeof s);
    s.nbig = (3u << 20) / sizeof(double) + 3; /* 3 MB and a bit */
    s.big = malloc(s.nbig * sizeof(double));

    t_env(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 0);
    CHECK_EQ(protect_all(&s, triple), SHOAL_SUCCESS);
    fill(&s, 1);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    fill(&s, 2); /* changes after the checkpoint must not reach epoch 1 */
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    char path[512], text[256], want[256];
    t_shard_path(path, sizeof path, job, 1, t_rank);
    CHECK_EQ(t_file_size(path), 128 + 6 * 32 + s.nbig * 8 + 4 + 0 + 5 * 24 + 12 + 0 + 8);
    t_job_path(path, sizeof path, job, "manifest");
    t_read_text(path, text, sizeof text);
    snprintf(want, sizeof want, "epoch 1 nranks %d created_ns ", t_nranks);
    CHECK(strncmp(text, want, strlen(want)) == 0);

    /* A standalone restart: the same program run again after dying finds epoch 1. */
    t_unfinish(job);
    memset(s.big, 0, s.nbig * sizeof(double));
    memset(&s.one, 0, sizeof s - offsetof(struct state, one));
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1);
    size_t count = 0;
    CHECK_EQ(shoal_stored_count(1, &count), SHOAL_SUCCESS);
    CHECK_EQ(count, s.nbig);
    CHECK_EQ(shoal_stored_count(4, &count), SHOAL_SUCCESS);
    CHECK_EQ(count, 5);
    CHECK_EQ(shoal_stored_count(3, &count), SHOAL_SUCCESS);
    CHECK_EQ(count, 0);
    CHECK_EQ(shoal_stored_count(99, &count), SHOAL_ERR_NOTFOUND);
    CHECK_EQ(shoal_stored_count(1, NULL), SHOAL_ERR_ARG);
    CHECK_EQ(protect_all(&s, triple), SHOAL_SUCCESS);
    CHECK_EQ(shoal_snapshot(), SHOAL_SUCCESS); /* the first snapshot recovers */
    struct state w;
    memset(&w, 0, sizeof w);
    w.nbig = s.nbig;
    w.big = malloc(w.nbig * sizeof(double));
    fill(&w, 1);
    CHECK(memcmp(s.big, w.big, s.nbig * sizeof(double)) == 0);
    CHECK_EQ(s.one, w.one);
    CHECK(memcmp(s.triples, w.triples, sizeof s.triples) == 0);
    CHECK_STR(s.text, w.text);
    /* Later snapshots do not recover again; status stays 1. */
    s.one = -1;
    CHECK_EQ(shoal_snapshot(), SHOAL_SUCCESS);
    CHECK_EQ(s.one, -1);
    CHECK_EQ(shoal_status(), 1);
    /* A restarted run writes new epochs above the old ones. */
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_shard_path(path, sizeof path, job, 2, t_rank);
    CHECK(t_exists(path));

    free(w.big);
    free(s.big);
    MPI_Type_free(&triple);
}

static void test_growing(void)
{
    const char *job = "grow";
    t_env(job);
    size_t n = 10;
    int *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = (int)i;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, n, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    /* Grows right after a checkpoint, while the writer may still be busy. */
    for (int step = 0; step < 3; step++) {
        n = n * 10 + 7;
        a = realloc(a, n * sizeof *a);
        for (size_t i = 0; i < n; i++)
            a[i] = (int)(i * 3 + (size_t)t_rank);
        CHECK_EQ(shoal_protect(0, a, n, MPI_INT), SHOAL_SUCCESS);
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    }
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    size_t count = 0;
    CHECK_EQ(shoal_stored_count(0, &count), SHOAL_SUCCESS);
    CHECK_EQ(count, n);
    int *b = calloc(count, sizeof *b);
    CHECK_EQ(shoal_protect(0, b, count, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    CHECK(memcmp(a, b, n * sizeof *a) == 0);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    free(a);
    free(b);
}

/* The staging buffer shifts each shard image so that its largest region's copy keeps
 * the source's offset within a page: whatever that offset, the shard must hold the
 * regions exactly (and no shift bytes), and come back bit-identical into memory at
 * another offset. */
static void test_stage_shift(void)
{
    size_t nbig = (1u << 20) + 5; /* bytes */
    unsigned char *raw = malloc(nbig + 8192), *small = malloc(77);
    unsigned char *back = malloc(nbig + 64), *small_back = malloc(77);
    const size_t offsets[] = {0, 1, 8, 160, 2048, 4000, 4095};
    for (size_t k = 0; k < sizeof offsets / sizeof offsets[0]; k++) {
        char job[32], path[512];
        snprintf(job, sizeof job, "shift%zu", offsets[k]);
        t_env(job);
        unsigned char *big = raw + offsets[k];
        for (size_t i = 0; i < nbig; i++)
            big[i] = (unsigned char)(i * 7 + k + (size_t)t_rank);
        for (size_t i = 0; i < 77; i++)
            small[i] = (unsigned char)(i ^ k);
        CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
        CHECK_EQ(shoal_protect(1, small, 77, MPI_BYTE), SHOAL_SUCCESS);
        CHECK_EQ(shoal_protect(2, big, nbig, MPI_BYTE), SHOAL_SUCCESS);
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
        CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
        t_shard_path(path, sizeof path, job, 1, t_rank);
        CHECK_EQ(t_file_size(path), 128 + 2 * 32 + 77 + nbig + 8);

        t_unfinish(job);
        memset(back, 0, nbig + 64);
        memset(small_back, 0, 77);
        CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
        CHECK_EQ(shoal_protect(1, small_back, 77, MPI_BYTE), SHOAL_SUCCESS);
        CHECK_EQ(shoal_protect(2, back + 3, nbig, MPI_BYTE), SHOAL_SUCCESS);
        CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
        CHECK(memcmp(back + 3, big, nbig) == 0);
        CHECK(memcmp(small_back, small, 77) == 0);
        CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    }
    free(back);
    free(small_back);
    free(raw);
    free(small);
}

/* The environment a fake process manager gave: name=value pairs, NULL-terminated. */
static const char *const *fake_env;

static const char *fake_lookup(const char *name)
{
    size_t len = strlen(name);
    for (const char *const *kv = fake_env; *kv != NULL; kv++)
        if (strncmp(*kv, name, len) == 0 && (*kv)[len] == '=')
            return *kv + len + 1;
    return NULL;
}

/* Which processes watch their launcher, and when it counts as gone (orphan.c). */
static void test_orphan_rules(void)
{
    static const struct {
        const char *name;
        const char *env[3];
        int launched;
    } launched[] = {
        {"Open MPI", {"OMPI_COMM_WORLD_RANK=1", "PMIX_RANK=1", NULL}, 1},
        {"PMIx alone (srun --mpi=pmix)", {"PMIX_RANK=0", NULL}, 1},
        {"MPICH's Hydra", {"PMI_RANK=3", "PMI_FD=6", NULL}, 1},
        {"a singleton", {"HOME=/root", NULL}, 0},
        {"an empty value", {"PMIX_RANK=", NULL}, 0},
    };
    for (size_t i = 0; i < sizeof launched / sizeof launched[0]; i++) {
        fake_env = launched[i].env;
        if (!CHECK_EQ(orphan_launched(fake_lookup), launched[i].launched))
            fprintf(stderr, "  (%s)\n", launched[i].name);
    }
    static const struct {
        pid_t recorded, parent;
        int gone;
    } gone[] = {
        {4242, 4242, 0}, /* the launcher is still the parent */
        {4242, 1, 1},    /* reparented to init */
        {4242, 977, 1},  /* to a subreaper */
        {0, 1, 0},       /* not watched */
    };
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++)
        CHECK_EQ(orphan_gone(gone[i].recorded, gone[i].parent), gone[i].gone);
}

static void test_recover_errors(void)
{
    const char *job = "recover-errors";
    t_env(job);
    double x[4] = {1, 2, 3, 4};
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_ERR_NOCKPT); /* fresh start */
    CHECK_EQ(shoal_stored_count(5, &(size_t){0}), SHOAL_ERR_NOCKPT);
    CHECK_EQ(shoal_protect(5, x, 4, MPI_DOUBLE), SHOAL_SUCCESS);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    double y[5] = {9, 9, 9, 9, 9}, z = 9;
    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(5, y, 3, MPI_DOUBLE), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_ERR_SIZE);
    CHECK_EQ(shoal_snapshot(), SHOAL_ERR_SIZE); /* still not recovered: tries again */
    CHECK_EQ(shoal_protect(5, y, 4, MPI_FLOAT), SHOAL_SUCCESS); /* same bytes, other type */
    CHECK_EQ(shoal_recover(), SHOAL_ERR_SIZE);
    CHECK_EQ(shoal_protect(5, y, 4, MPI_DOUBLE), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(6, &z, 1, MPI_DOUBLE), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_ERR_NOTFOUND);
    CHECK(y[0] == 9 && z == 9); /* a failed recover changes nothing */
    CHECK_EQ(shoal_unprotect(6), SHOAL_SUCCESS);
    CHECK_EQ(shoal_unprotect(6), SHOAL_ERR_NOTFOUND);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    CHECK(y[0] == 1 && y[3] == 4 && y[4] == 9);
    /* Explicit recover again reads the shard again. */
    y[0] = 0;
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    CHECK(y[0] == 1);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
}

/* A shard large enough to be mapped in place (STORE_MAP_MIN) and cut short after it
 * was verified, before the restore copies out of it: the access past the file's end
 * raises SIGBUS, which shoal_recover turns into an error instead of dying. A restore
 * that follows from an intact file restores every byte, and the staging buffer the
 * writer faults in afterwards takes the next checkpoint. */
static void test_recover_mapped(void)
{
    const char *job = "recover-mapped";
    size_t n = (4u << 20) / sizeof(double);
    double *a = malloc(n * sizeof *a);
    for (size_t i = 0; i < n; i++)
        a[i] = dval(i, 3);
    t_env(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(1, a, n, MPI_DOUBLE), SHOAL_SUCCESS);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    char path[512];
    t_shard_path(path, sizeof path, job, 1, t_rank);
    long long whole = t_file_size(path);
    t_unfinish(job);
    memset(a, 0, n * sizeof *a);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1); /* the shard is mapped and verified */
    CHECK_EQ(truncate(path, whole / 2), 0);
    CHECK_EQ(shoal_protect(1, a, n, MPI_DOUBLE), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_ERR_IO);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    /* The same epoch written again, whole: the restore is exact. */
    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    for (size_t i = 0; i < n; i++)
        a[i] = dval(i, 3);
    CHECK_EQ(shoal_protect(1, a, n, MPI_DOUBLE), SHOAL_SUCCESS);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_unfinish(job);
    memset(a, 0, n * sizeof *a);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1);
    CHECK_EQ(shoal_protect(1, a, n, MPI_DOUBLE), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += a[i] != dval(i, 3);
    CHECK_EQ(wrong, 0);
    a[0] = -1;
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    /* Epoch 1 was unusable, the second run wrote epoch 2, this one restored it. */
    t_shard_path(path, sizeof path, job, 3, t_rank);
    struct shard_image img;
    struct shard_header h;
    CHECK_EQ(store_load_shard(path, &img, &h), SHARD_OK);
    CHECK_EQ(img.mapped, 1);
    double first = 0;
    if (img.data != NULL)
        memcpy(&first, img.data + SHARD_HEADER_SIZE + SHARD_ENTRY_SIZE, sizeof first);
    CHECK(first == -1.0);
    shard_image_free(&img);
    free(a);
}

static void test_runner_mode(void)
{
    /* The runner names the epoch to restore and the first one to write. */
    const char *job = "prune"; /* epochs 3 and 4 exist */
    t_env(job);
    setenv("SHOAL_RESTART_EPOCH", "3", 1);
    setenv("SHOAL_EPOCH_BASE", "10", 1);
    int v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_snapshot(), SHOAL_SUCCESS);
    CHECK_EQ(v, 3);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    char path[512];
    t_shard_path(path, sizeof path, job, 10, t_rank);
    CHECK(t_exists(path));

    /* "0" (and "-1") mean a fresh start even with complete epochs present. */
    t_env(job);
    setenv("SHOAL_RESTART_EPOCH", "-1", 1);
    setenv("SHOAL_EPOCH_BASE", "20", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 0);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    /* A base at or below the restart epoch would rewrite it. */
    t_env(job);
    setenv("SHOAL_RESTART_EPOCH", "10", 1);
    setenv("SHOAL_EPOCH_BASE", "10", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_ARG);
}

struct arrival {
    char from[560], to[512];
    int delay_ms;
};

static void *arrive(void *arg)
{
    struct arrival *a = arg;
    t_sleep_ms(a->delay_ms);
    CHECK_EQ(rename(a->from, a->to), 0);
    return NULL;
}

/* SHOAL_STAGE_WAIT: a runner copies a rank's shard while the job starts and renames
 * it into place; the rank waits for it, up to the wait, and fails without it. */
static void test_staged_restart(void)
{
    const char *job = "staged";
    t_env(job);
    int v = 5;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS); /* epoch 1 */
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();

    struct arrival a = {.delay_ms = 300};
    t_shard_path(a.to, sizeof a.to, job, 1, t_rank);
    snprintf(a.from, sizeof a.from, "%s.aside", a.to);

    /* Not there, and no wait: the restart fails at once. */
    CHECK_EQ(rename(a.to, a.from), 0);
    t_env(job);
    setenv("SHOAL_RESTART_EPOCH", "1", 1);
    setenv("SHOAL_EPOCH_BASE", "10", 1);
    CHECK(shoal_init(MPI_COMM_WORLD) != SHOAL_SUCCESS);

    /* Arriving 0.3 s into a wait of 10 s: restored. */
    t_env(job);
    setenv("SHOAL_RESTART_EPOCH", "1", 1);
    setenv("SHOAL_EPOCH_BASE", "10", 1);
    setenv("SHOAL_STAGE_WAIT", "10s", 1);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, arrive, &a), 0);
    v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(shoal_status(), 1);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_snapshot(), SHOAL_SUCCESS);
    CHECK_EQ(v, 5);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    /* Damaged, then replaced by a good copy 0.3 s later: restored from the copy. */
    t_barrier();
    CHECK_EQ(rename(a.to, a.from), 0);
    CHECK_EQ(t_write_text(a.to, "not a shard"), 0);
    t_env(job);
    setenv("SHOAL_RESTART_EPOCH", "1", 1);
    setenv("SHOAL_EPOCH_BASE", "20", 1);
    setenv("SHOAL_STAGE_WAIT", "10", 1);
    CHECK_EQ(pthread_create(&th, NULL, arrive, &a), 0);
    v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(pthread_join(th, NULL), 0);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_snapshot(), SHOAL_SUCCESS);
    CHECK_EQ(v, 5);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    /* Nothing arrives within a wait of 0.2 s: the restart fails then. */
    t_barrier();
    CHECK_EQ(rename(a.to, a.from), 0);
    t_env(job);
    setenv("SHOAL_RESTART_EPOCH", "1", 1);
    setenv("SHOAL_EPOCH_BASE", "30", 1);
    setenv("SHOAL_STAGE_WAIT", "200ms", 1);
    CHECK(shoal_init(MPI_COMM_WORLD) != SHOAL_SUCCESS);
    CHECK_EQ(rename(a.from, a.to), 0);

    t_env(job);
    setenv("SHOAL_STAGE_WAIT", "soon", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_ARG);
    t_env(job);
}

static void test_write_error(void)
{
    /* A file where epoch 50's directory should be makes the writer thread fail. */
    const char *job = "write-error";
    char path[512];
    t_env(job);
    setenv("SHOAL_EPOCH_BASE", "50", 1);
    int v = 5;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    if (t_rank == 0) {
        t_job_path(path, sizeof path, job, "e00000050");
        CHECK_EQ(t_write_text(path, "in the way"), 0);
    }
    t_barrier();
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    int rc[3];
    rc[0] = shoal_checkpoint(); /* epoch 50: fails in the background */
    t_sleep_ms(50);
    rc[1] = shoal_checkpoint(); /* epoch 51 */
    rc[2] = shoal_finalize();
    int io = 0, ok = 0;
    for (int i = 0; i < 3; i++) {
        io += rc[i] == SHOAL_ERR_IO;
        ok += rc[i] == SHOAL_SUCCESS;
    }
    /* Each rank's failure is reported once, by a later call, on every rank alike; the
     * two ranks' failures may arrive in different calls. */
    CHECK(io >= 1 && io <= t_nranks && io + ok == 3);
    int lo[3], hi[3];
    MPI_Allreduce(rc, lo, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(rc, hi, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    CHECK(memcmp(lo, hi, sizeof lo) == 0);
    /* Epoch 51 is complete, 50 never is. */
    char text[512];
    t_job_path(path, sizeof path, job, "manifest");
    t_read_text(path, text, sizeof text);
    CHECK(strncmp(text, "epoch 51 ", 9) == 0);
    CHECK(strstr(text, "epoch 50 ") == NULL);
}

static void test_progress(void)
{
    const char *job = "progress";
    char path[512], text[64];
    t_job_path(path, sizeof path, job, "progress");
    t_env(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_progress(0.25), SHOAL_SUCCESS);
    t_barrier();
    t_read_text(path, text, sizeof text);
    CHECK_STR(text, "0.25\n");
    CHECK_EQ(shoal_progress(0.5), SHOAL_SUCCESS); /* within a second: not yet written */
    t_read_text(path, text, sizeof text);
    CHECK_STR(text, "0.25\n");
    CHECK_EQ(shoal_progress(1.5), SHOAL_ERR_ARG);
    CHECK_EQ(shoal_progress(-0.1), SHOAL_ERR_ARG);
    CHECK_EQ(shoal_progress(NAN), SHOAL_ERR_ARG);
    t_barrier();
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS); /* writes the last value */
    t_barrier();
    t_read_text(path, text, sizeof text);
    CHECK_STR(text, "0.5\n");
}

static void test_finished(void)
{
    /* A run that ended with shoal_finalize is over: running it again starts from the
     * beginning, and a later run that dies resumes from its own epochs. */
    const char *job = "finished";
    char path[512], text[64];
    int v = 1;
    t_env(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();
    t_job_path(path, sizeof path, job, "finished");
    t_read_text(path, text, sizeof text);
    CHECK_STR(text, "epoch 1\n");

    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 0);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    for (v = 2; v <= 3; v++)
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS); /* epochs 2 and 3 */
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();
    t_read_text(path, text, sizeof text);
    CHECK_STR(text, "epoch 3\n");

    /* As if the second run had died: only epoch 1 is a finished run's. */
    t_barrier();
    if (t_rank == 0)
        CHECK_EQ(t_write_text(path, "epoch 1\n"), 0);
    t_barrier();
    v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    CHECK_EQ(v, 3);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
}

static void test_call_order(void)
{
    int x = 0;
    CHECK_EQ(shoal_protect(0, &x, 1, MPI_INT), SHOAL_ERR_STATE);
    CHECK_EQ(shoal_snapshot(), SHOAL_ERR_STATE);
    CHECK_EQ(shoal_checkpoint(), SHOAL_ERR_STATE);
    CHECK_EQ(shoal_recover(), SHOAL_ERR_STATE);
    CHECK_EQ(shoal_finalize(), SHOAL_ERR_STATE);
    CHECK_EQ(shoal_status(), SHOAL_ERR_STATE);
    t_env("call-order");
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_STATE);
    CHECK_EQ(shoal_protect(0, NULL, 3, MPI_INT), SHOAL_ERR_ARG);
    CHECK_EQ(shoal_protect(0, &x, 1, MPI_DATATYPE_NULL), SHOAL_ERR_ARG);
    /* A type with holes is saved whole, its extent an element; one that starts below 0
     * is refused. */
    MPI_Datatype strided, shifted;
    int three[3] = {1, 2, 3};
    MPI_Type_vector(2, 1, 2, MPI_INT, &strided);
    MPI_Type_commit(&strided);
    CHECK_EQ(shoal_protect(0, three, 1, strided), SHOAL_SUCCESS);
    MPI_Type_create_resized(MPI_INT, -4, 8, &shifted);
    MPI_Type_commit(&shifted);
    CHECK_EQ(shoal_protect(0, &x, 1, shifted), SHOAL_ERR_ARG);
    MPI_Type_free(&strided);
    MPI_Type_free(&shifted);
    CHECK_EQ(shoal_unprotect(3), SHOAL_ERR_NOTFOUND);
    /* Re-protecting an id replaces it; snapshot with nothing due is cheap and fine. */
    CHECK_EQ(shoal_protect(0, &x, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &x, 1, MPI_INT), SHOAL_SUCCESS);
    for (int i = 0; i < 1000; i++)
        CHECK_EQ(shoal_snapshot(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    CHECK_EQ(shoal_version_number(), SHOAL_VERSION_NUMBER);
    CHECK_STR(shoal_strerror(SHOAL_ERR_CORRUPT),
              "corrupt shard (bad magic, truncated or checksum mismatch)");
    CHECK_STR(shoal_strerror(12345), "unknown error");
    for (int code = 0; code >= SHOAL_ERR_NOTFOUND; code--)
        CHECK(strcmp(shoal_strerror(code), "unknown error") != 0);
}

int main(int argc, char **argv)
{
    t_setup(&argc, &argv);
    test_call_order();
    test_round_trip();
    test_growing();
    test_stage_shift();
    test_orphan_rules();
    test_recover_errors();
    test_recover_mapped();
    test_epochs_all();
    test_finished();
    test_runner_mode();
    test_staged_restart();
    test_write_error();
    test_progress();
    test_when_all();
    test_corrupt_all();
    return t_finish();
}
