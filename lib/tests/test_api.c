/*
 * test_api.c - libshoal through its public API, on any number of ranks (run.sh uses 1
 * and 2): round trips of several datatypes and sizes, growing arrays, recover errors,
 * the snapshot agreement, the automatic interval, checkpoint requests (and holding after
 * them), epochs, pruning, progress, statistics, write errors and which ranks watch their
 * launcher (orphan.c). Corrupt shards and
 * configuration errors are in test_corrupt.c.
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

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

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

/* Reads the last SHOAL_STATS line. */
static int read_stats(const char *path, long long *checkpoints, long long *agreements,
                      double *block_max)
{
    char *text = json_read_file(path, NULL);
    if (text == NULL)
        return -1;
    char *last = text, *nl;
    while ((nl = strchr(last, '\n')) != NULL && nl[1] != 0)
        last = nl + 1;
    const char *p = last;
    char err[100];
    struct json *v = json_parse(&p, err, sizeof err);
    free(text);
    int64_t c, a;
    int rc = (v != NULL && json_get_i64(v, "checkpoints", &c) == 0 &&
              json_get_i64(v, "agreements", &a) == 0 && json_get(v, "blocking_max_s") &&
              json_get(v, "bytes_per_rank") && json_get(v, "blocking_mean_s") &&
              json_get(v, "agreeing_s") && json_get(v, "agreement_cost_s") &&
              json_get(v, "writer_cpu_s") &&
              (c == 0 || atof(json_get(v, "writer_cpu_s")->text) > 0)) /* it hashed shards */
                 ? 0
                 : -1;
    if (rc == 0) {
        *checkpoints = c;
        *agreements = a;
        *block_max = atof(json_get(v, "blocking_max_s")->text);
    }
    json_free(v);
    return rc;
}

static void test_snapshot_interval(void)
{
    const char *job = "interval";
    char stats[512];
    t_job_path(stats, sizeof stats, job, "../interval-stats.json");
    t_env(job);
    setenv("SHOAL_CKPT_INTERVAL", "100ms", 1);
    setenv("SHOAL_STATS", stats, 1);
    double v[1000] = {0};
    double start = MPI_Wtime();
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, v, 1000, MPI_DOUBLE), SHOAL_SUCCESS);
    int bad = 0;
    for (int it = 0; it < 600; it++) { /* 0.7 s on an idle machine */
        v[0] = it;
        sleep_ms(1);
        if (shoal_snapshot() != SHOAL_SUCCESS)
            bad++;
    }
    CHECK_EQ(bad, 0);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    double elapsed = MPI_Wtime() - start;
    long long checkpoints = 0, agreements = 0;
    double block_max = 0;
    if (t_rank == 0 && CHECK(read_stats(stats, &checkpoints, &agreements, &block_max) == 0)) {
        /* One checkpoint per 100 ms at most, and at the first agreement after that
         * (agreements are at most 50 ms apart here), give or take the ends. */
        if (!CHECK(checkpoints >= (long long)(elapsed / 0.2) - 1 &&
                   checkpoints <= (long long)(elapsed / 0.1) + 1) ||
            !CHECK(agreements >= checkpoints && agreements < 200) ||
            !CHECK(block_max > 0 && block_max < 0.5))
            fprintf(stderr, "  %.2f s: %lld checkpoints, %lld agreements, blocking max %g s\n",
                    elapsed, checkpoints, agreements, block_max);
    }
}

/* Writes request-checkpoint as the runner does: whole, then renamed into place. */
static int write_request(const char *job, const char *content)
{
    char tmp[512], path[512];
    t_job_path(tmp, sizeof tmp, job, "request-checkpoint.tmp");
    t_job_path(path, sizeof path, job, "request-checkpoint");
    return t_write_text(tmp, content) == 0 && rename(tmp, path) == 0 ? 0 : -1;
}

/* CPU seconds of the whole process, every thread. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* Sends stderr to path until restore_stderr; returns the saved descriptor. */
static int capture_stderr(const char *path)
{
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        dup2(fd, 2);
        close(fd);
    }
    return saved;
}

static void restore_stderr(int saved)
{
    fflush(stderr);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
}

/* Every rank's shard of epoch verifies, and stores `value`. */
static int epoch_verifies(const char *job, long long epoch, int value)
{
    int ok = 1;
    for (int r = 0; r < t_nranks; r++) {
        char path[512];
        struct shard_image img;
        struct shard_header h;
        t_shard_path(path, sizeof path, job, epoch, r);
        if (store_load_shard(path, &img, &h) != SHARD_OK) {
            fprintf(stderr, "%s%s does not verify\n", check_prefix, path);
            ok = 0;
            continue;
        }
        int stored;
        memcpy(&stored, img.data + SHARD_HEADER_SIZE + SHARD_ENTRY_SIZE, sizeof stored);
        if (h.epoch != (uint64_t)epoch || h.nregions != 1 || stored != value) {
            fprintf(stderr, "%s%s: epoch %llu, %u regions, value %d; want %lld, 1, %d\n",
                    check_prefix, path, (unsigned long long)h.epoch, h.nregions, stored, epoch,
                    value);
            ok = 0;
        }
        shard_image_free(&img);
    }
    return ok;
}

/* A request-checkpoint made by rank 0 at iteration 100 of 450 (interval checkpoints
 * off), answered by the next agreement or, with by_checkpoint, by a shoal_checkpoint
 * at that iteration. Exactly one checkpoint is taken; with `hold` (and a timeout
 * above 0) every rank then holds at the same call for the timeout, using no CPU, and
 * goes on. */
struct request_case {
    const char *job;
    const char *content;
    const char *timeout; /* SHOAL_HOLD_TIMEOUT; NULL: unset (120 s) */
    int by_checkpoint;
    double hold_s; /* 0: checkpoint and continue */
};

static void test_request(const struct request_case *tc)
{
    const char *job = tc->job;
    char stats[512], request[512], taken[512], errlog[512];
    snprintf(stats, sizeof stats, "%s/%s-stats.json", t_base, job);
    snprintf(errlog, sizeof errlog, "%s/%s-stderr-%d", t_base, job, t_rank);
    t_job_path(request, sizeof request, job, "request-checkpoint");
    t_job_path(taken, sizeof taken, job, "request-checkpoint.taken.tmp");
    t_env(job);
    setenv("SHOAL_CKPT_INTERVAL", "0", 1);
    setenv("SHOAL_STATS", stats, 1);
    if (tc->timeout != NULL)
        setenv("SHOAL_HOLD_TIMEOUT", tc->timeout, 1);
    int v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);

    int bad = 0, longest_it = -1, verified = -1;
    double longest = 0, longest_cpu = 0;
    int saved = capture_stderr(errlog);
    for (int it = 0; it < 450; it++) { /* about 0.6 s, plus the hold */
        if (it == 100 && t_rank == 0 && write_request(job, tc->content) != 0)
            bad++;
        sleep_ms(1);
        v = it;
        double cpu0 = cpu_seconds(), t0 = MPI_Wtime();
        int rc = tc->by_checkpoint && it == 100 ? shoal_checkpoint() : shoal_snapshot();
        double dt = MPI_Wtime() - t0;
        if (rc != SHOAL_SUCCESS)
            bad++;
        if (dt > longest) {
            longest = dt;
            longest_it = it;
            longest_cpu = cpu_seconds() - cpu0;
        }
        /* Right after the hold: the epoch held for is on disk, on every rank. */
        if (tc->hold_s > 0 && verified < 0 && dt >= tc->hold_s)
            verified = epoch_verifies(job, 1, it);
    }
    restore_stderr(saved);
    CHECK_EQ(bad, 0);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    CHECK(!t_exists(request));
    CHECK(!t_exists(taken));
    long long checkpoints = 0, agreements = 0;
    double block_max = 0;
    if (t_rank == 0 && CHECK(read_stats(stats, &checkpoints, &agreements, &block_max) == 0)) {
        CHECK_EQ(checkpoints, 1);
        CHECK(block_max < 0.5); /* holding is not checkpoint cost */
    }

    char text[4096], want[256];
    t_read_text(errlog, text, sizeof text);
    int logs_ok;
    if (tc->hold_s > 0) {
        int lo, hi;
        MPI_Allreduce(&longest_it, &lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        MPI_Allreduce(&longest_it, &hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        CHECK_EQ(lo, hi); /* every rank held at the same call */
        CHECK(longest_it >= 100);
        if (tc->by_checkpoint)
            CHECK_EQ(longest_it, 100);
        if (!CHECK(longest >= tc->hold_s && longest < tc->hold_s + 2) ||
            !CHECK(longest_cpu < 0.5 * longest)) /* slept, no busy wait in MPI */
            fprintf(stderr, "  held %.3f s at iteration %d, %.3f s of CPU\n", longest,
                    longest_it, longest_cpu);
        CHECK_EQ(verified, 1);
        snprintf(want, sizeof want,
                 "shoal: rank %d held for %g s after a checkpoint and nobody stopped the job; "
                 "continuing\n",
                 t_rank, tc->hold_s);
        logs_ok = CHECK(strstr(text, want) != NULL);
        if (t_rank == 0)
            logs_ok &= CHECK(strstr(text, "shoal: checkpoint epoch 1 taken for a relaunch; "
                                          "holding\n") != NULL);
        else
            logs_ok &= CHECK(strstr(text, "; holding") == NULL);
    } else {
        if (!CHECK(longest < 0.5))
            fprintf(stderr, "  longest call %.3f s at iteration %d\n", longest, longest_it);
        logs_ok = CHECK(strstr(text, "; holding") == NULL && strstr(text, " held ") == NULL);
    }
    if (!logs_ok)
        fprintf(stderr, "  stderr of the run:\n%s", text);

    /* The request was seen at an agreement after it was made; after a hold, the
     * checkpoint is the one of the held call. */
    int restored = -1;
    t_env(job);
    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &restored, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    if (tc->hold_s > 0)
        CHECK_EQ(restored, longest_it);
    else
        CHECK(restored >= 100 && restored < 450);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
}

static void test_snapshot_requests(void)
{
    /* The timeouts are short so that a hold that wrongly happens shows. */
    static const struct request_case cases[] = {
        {"request", "", "1", 0, 0},                   /* empty: checkpoint and continue */
        {"request-newline", "\n", "1", 0, 0},         /* blank line: the same */
        {"request-unknown", "later\n", "1", 0, 0},    /* unknown: a plain checkpoint */
        {"hold", "hold\n", "1", 0, 1.0},              /* the runner's hold */
        {"hold-checkpoint", "hold", "300ms", 1, 0.3}, /* answered by shoal_checkpoint */
        {"hold-off", "hold\n", "0", 0, 0},            /* SHOAL_HOLD_TIMEOUT=0: no hold */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        test_request(&cases[i]);
}

/* Daly's optimum as docs/libshoal.md gives it, to hold the library's against. */
static double daly_interval(double cost, double mtbf)
{
    double t = mtbf;
    if (cost < 2 * mtbf) {
        double r = sqrt(cost / (2 * mtbf));
        t = sqrt(2 * cost * mtbf) * (1 + r / 3 + r * r / 9) - cost;
    }
    return t < 1 ? 1 : t > 600 ? 600 : t;
}

struct interval_file {
    double interval, cost, mtbf;
    int is_auto;
};

/* Reads the job's `interval` file into f and its text into text; -1 unless it is the
 * one line of the format. */
static int read_interval(const char *job, struct interval_file *f, char *text, size_t len)
{
    char path[512];
    int n = -1;
    t_job_path(path, sizeof path, job, "interval");
    t_read_text(path, text, len);
    if (sscanf(text, "interval %lf auto %d cost %lf mtbf %lf%n", &f->interval, &f->is_auto,
               &f->cost, &f->mtbf, &n) != 4 ||
        n < 0 || strcmp(text + n, "\n") != 0) {
        fprintf(stderr, "%s%s: \"%s\" is not an interval line\n", check_prefix, path, text);
        return -1;
    }
    return 0;
}

/* The interval file of an automatic interval says what it is computed from, and the
 * interval is Daly's for the cost and MTBF it says, within the file's 6 digits. */
static int check_auto_interval(const char *job, double mtbf, struct interval_file *f)
{
    char text[256];
    if (!CHECK(read_interval(job, f, text, sizeof text) == 0))
        return 0;
    int ok = CHECK_EQ(f->is_auto, 1);
    ok &= CHECK(fabs(f->mtbf - mtbf) <= 1e-6 * mtbf);
    ok &= CHECK(f->cost > 0); /* measured */
    double want = daly_interval(f->cost, f->mtbf);
    ok &= CHECK(fabs(f->interval - want) <= 1e-5 * want);
    if (!ok)
        fprintf(stderr, "  interval %g s, cost %g s, mtbf %g s: want the interval %g s\n",
                f->interval, f->cost, f->mtbf, want);
    return ok;
}

static void test_auto_interval(void)
{
    /* A job that fails every 2 s checkpoints every second, the floor, by the snapshots'
     * agreement. Before its first checkpoint its cost is a guess (10 ms). */
    const char *job = "auto";
    char stats[512], path[512], text[256];
    struct interval_file often, rarely;
    snprintf(stats, sizeof stats, "%s/auto-stats.json", t_base);
    t_env(job);
    setenv("SHOAL_CKPT_INTERVAL", "auto", 1);
    setenv("SHOAL_MTBF", "2s", 1);
    setenv("SHOAL_STATS", stats, 1);
    static double v[1 << 17]; /* 1 MB */
    double start = MPI_Wtime();
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    if (t_rank == 0 && CHECK(read_interval(job, &often, text, sizeof text) == 0))
        CHECK_STR(text, "interval 1 auto 1 cost 0 mtbf 2\n");
    CHECK_EQ(shoal_protect(0, v, sizeof v / sizeof v[0], MPI_DOUBLE), SHOAL_SUCCESS);
    int bad = 0;
    for (int it = 0; it < 1600; it++) { /* 1.7 s on an idle machine */
        v[0] = it;
        sleep_ms(1);
        if (shoal_snapshot() != SHOAL_SUCCESS)
            bad++;
    }
    CHECK_EQ(bad, 0);
    if (t_rank == 0 && check_auto_interval(job, 2, &often))
        CHECK(often.interval == 1);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    double elapsed = MPI_Wtime() - start;
    long long checkpoints = 0, agreements = 0;
    double block_max = 0;
    if (t_rank == 0 && CHECK(read_stats(stats, &checkpoints, &agreements, &block_max) == 0) &&
        !CHECK(checkpoints >= 1 && checkpoints <= (long long)elapsed + 1))
        fprintf(stderr, "  %.2f s: %lld checkpoints\n", elapsed, checkpoints);

    /* Failing every 11.6 days: a longer interval, by shoal_checkpoint's cost. */
    t_env(job);
    setenv("SHOAL_CKPT_INTERVAL", "auto", 1);
    setenv("SHOAL_MTBF", "1000000", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, v, sizeof v / sizeof v[0], MPI_DOUBLE), SHOAL_SUCCESS);
    for (int i = 0; i < 3; i++)
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    if (t_rank == 0 && check_auto_interval(job, 1e6, &rarely) &&
        !CHECK(rarely.interval > often.interval))
        fprintf(stderr, "  %g s with an MTBF of 1e6 s, %g s with 2 s\n", rarely.interval,
                often.interval);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    /* A fixed interval is written once, with no MTBF; 0 when interval checkpoints are
     * off. */
    static const struct {
        const char *interval, *line;
    } fixed[] = {{"45s", "interval 45 auto 0 cost 0 mtbf 0\n"},
                 {"0", "interval 0 auto 0 cost 0 mtbf 0\n"}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        t_env(job);
        setenv("SHOAL_CKPT_INTERVAL", fixed[i].interval, 1);
        setenv("SHOAL_MTBF", "2s", 1);
        CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
        CHECK_EQ(shoal_protect(0, v, 1, MPI_DOUBLE), SHOAL_SUCCESS);
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
        CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
        if (t_rank == 0) {
            t_job_path(path, sizeof path, job, "interval");
            t_read_text(path, text, sizeof text);
            CHECK_STR(text, fixed[i].line);
        }
    }
}

/* An `interval` that cannot be written is said once, and no checkpoint fails for it. */
static void test_auto_interval_unwritable(void)
{
    const char *job = "auto-unwritable";
    char path[512], errlog[512], text[4096], want[600];
    snprintf(errlog, sizeof errlog, "%s/%s-stderr-%d", t_base, job, t_rank);
    t_job_path(path, sizeof path, job, "interval/in-the-way");
    if (t_rank == 0) {
        char dir[512];
        t_job_path(dir, sizeof dir, job, "");
        mkdir(dir, 0755);
        t_job_path(dir, sizeof dir, job, "interval");
        CHECK_EQ(mkdir(dir, 0755), 0);
        CHECK_EQ(t_write_text(path, "x"), 0);
    }
    t_barrier();
    t_env(job);
    setenv("SHOAL_CKPT_INTERVAL", "auto", 1);
    int x = 0, saved = capture_stderr(errlog);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &x, 1, MPI_INT), SHOAL_SUCCESS);
    for (x = 1; x <= 3; x++)
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    restore_stderr(saved);
    t_read_text(errlog, text, sizeof text);
    t_job_path(path, sizeof path, job, "interval");
    snprintf(want, sizeof want, "shoal: writing %s failed: ", path);
    const char *first = strstr(text, want);
    if (t_rank == 0) {
        if (!CHECK(first != NULL && strstr(first + 1, want) == NULL))
            fprintf(stderr, "  stderr of the run:\n%s", text);
    } else {
        CHECK(first == NULL);
    }
}

static int count_epoch_dirs(const char *job, long long upto)
{
    int n = 0;
    for (long long e = 1; e <= upto; e++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s/e%08lld", t_base, job, e);
        n += t_exists(path);
    }
    return n;
}

static void test_pruning(void)
{
    const char *job = "prune";
    t_env(job);
    int v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    for (v = 1; v <= 4; v++)
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();
    char path[512], text[512], want[512];
    CHECK_EQ(count_epoch_dirs(job, 10), 2);
    t_shard_path(path, sizeof path, job, 3, t_rank);
    CHECK(t_exists(path));
    t_job_path(path, sizeof path, job, "manifest");
    t_read_text(path, text, sizeof text);
    snprintf(want, sizeof want, "epoch 3 nranks %d created_ns", t_nranks);
    CHECK(strncmp(text, want, strlen(want)) == 0);
    CHECK(strstr(text, "\nepoch 4 ") != NULL);
    CHECK(strstr(text, "epoch 2 ") == NULL);

    /* Leftovers of a killed run go at the next start; finished shards stay. */
    t_barrier();
    if (t_rank == 0) {
        t_shard_path(path, sizeof path, job, 4, 7);
        strcat(path, ".tmp");
        CHECK_EQ(t_write_text(path, "partial"), 0);
        t_job_path(path, sizeof path, job, "manifest.tmp");
        CHECK_EQ(t_write_text(path, "partial"), 0);
    }
    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1);
    t_barrier();
    t_shard_path(path, sizeof path, job, 4, 7);
    strcat(path, ".tmp");
    CHECK(!t_exists(path));
    t_job_path(path, sizeof path, job, "manifest.tmp");
    CHECK(!t_exists(path));
    t_shard_path(path, sizeof path, job, 4, t_rank);
    CHECK(t_exists(path));
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    CHECK_EQ(v, 4);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
}

static unsigned long long inode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* The epoch of the whole, verified shard the open file fd holds (closed here), or -1. */
static long long held_epoch(int fd)
{
    struct stat st;
    struct shard_header h;
    unsigned char *b = NULL;
    long long epoch = -1;
    if (fd >= 0 && fstat(fd, &st) == 0 && (b = malloc((size_t)st.st_size)) != NULL &&
        pread(fd, b, (size_t)st.st_size, 0) == (ssize_t)st.st_size &&
        shard_verify(b, (size_t)st.st_size, &h) == SHARD_OK)
        epoch = (long long)h.epoch;
    free(b);
    if (fd >= 0)
        close(fd);
    return epoch;
}

/* The block sums file beside the shard at path describes it: the version of the file
 * (inode, modification time, size), its checksum, and the XXH3-64 of each of its blocks
 * (docs/shard-format.md). */
static int sums_describe(const char *path)
{
    char sums_path[600];
    snprintf(sums_path, sizeof sums_path, "%.*s.sums", (int)(strlen(path) - strlen(".shard")),
             path);
    size_t size, len;
    unsigned char *file = (unsigned char *)json_read_file(path, &size);
    unsigned char *sums = (unsigned char *)json_read_file(sums_path, &len);
    struct stat st;
    int ok = file != NULL && sums != NULL && stat(path, &st) == 0 &&
             len == shard_sums_file_size(size, SHARD_BLOCK_SIZE);
    if (ok) {
        uint64_t *want = malloc(shard_blocks(size, SHARD_BLOCK_SIZE) * sizeof *want);
        for (size_t b = 0; b < shard_blocks(size, SHARD_BLOCK_SIZE); b++) {
            size_t off = b * SHARD_BLOCK_SIZE;
            want[b] = (uint64_t)XXH3_64bits(file + off, size - off < SHARD_BLOCK_SIZE
                                                            ? size - off
                                                            : SHARD_BLOCK_SIZE);
        }
        struct shard_sums_key key = {(uint64_t)st.st_ino,
                                     (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
        unsigned char *expect = malloc(len);
        shard_put_sums(expect, file, size, SHARD_BLOCK_SIZE, want, &key);
        ok = memcmp(expect, sums, len) == 0;
        free(expect);
        free(want);
    }
    if (!ok)
        fprintf(stderr, "%s%s does not describe %s\n", check_prefix, sums_path, path);
    free(file);
    free(sums);
    return ok;
}

/* A rank's pruned shard is kept as its spare and written over by its next shard, which
 * ends at its own size; a shard a reader holds (locked, as jobdir.Dir reads) is removed
 * instead and stays whole for the reader; no spare is left after shoal_finalize. */
static void test_recycling(void)
{
    const char *job = "recycle";
    t_env(job);
    enum { N = 100000 };
    static int a[N];
    unsigned long long ino[6] = {0};
    char path[512];
    int held = -1;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_INT), SHOAL_SUCCESS);
    for (int e = 1; e <= 5; e++) {
        if (e == 4) /* smaller than the epoch 1 shard it is written over */
            CHECK_EQ(shoal_protect(0, a, N / 2, MPI_INT), SHOAL_SUCCESS);
        for (int i = 0; i < N; i++)
            a[i] = e * 1000003 + i + t_rank;
        if (e == 5) { /* epoch 2 is pruned once epoch 4 is complete: at this checkpoint */
            t_shard_path(path, sizeof path, job, 2, t_rank);
            held = open(path, O_RDONLY);
            CHECK(held >= 0 && flock(held, LOCK_SH) == 0);
        }
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
        /* The checkpoint waited for the writer to finish the one before. */
        t_shard_path(path, sizeof path, job, e - 1, t_rank);
        ino[e - 1] = inode_of(path);
    }
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();
    t_shard_path(path, sizeof path, job, 5, t_rank);
    ino[5] = inode_of(path);
    /* Epoch 1's file lives on as a later shard: epoch 4's when shards are written into
     * files, epoch 5's when the staging buffer is a file that becomes the shard (tmpfs:
     * epoch 4's was staged before epoch 1 was pruned). Epoch 2's, held, does not. */
    CHECK(ino[1] != 0 && (ino[4] == ino[1]) != (ino[5] == ino[1]));
    CHECK(ino[5] != 0 && ino[4] != ino[2] && ino[5] != ino[2]);
    CHECK_EQ(count_epoch_dirs(job, 10), 2);
    snprintf(path, sizeof path, "%s/%s/r%06d.spare", t_base, job, t_rank);
    CHECK(!t_exists(path));

    struct shard_image img;
    struct shard_header h;
    t_shard_path(path, sizeof path, job, 4, t_rank);
    CHECK_EQ(store_load_shard(path, &img, &h), SHARD_OK);
    CHECK(h.epoch == 4 && h.payload_bytes == (uint64_t)N / 2 * sizeof a[0]);
    shard_image_free(&img);
    CHECK(sums_describe(path));
    t_shard_path(path, sizeof path, job, 5, t_rank);
    CHECK(sums_describe(path));
    CHECK_EQ(held_epoch(held), 2);

    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1);
    CHECK_EQ(shoal_protect(0, a, N / 2, MPI_INT), SHOAL_SUCCESS);
    memset(a, 0, sizeof a);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    int wrong = 0;
    for (int i = 0; i < N / 2; i++)
        wrong += a[i] != 5 * 1000003 + i + t_rank;
    CHECK_EQ(wrong, 0);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
}

/* On a tmpfs the staging buffer maps the rank's stage file, which its checkpoint renames
 * into the epoch: the shard is the file the state was copied into, no second copy. The
 * writer prepares another for the program's next checkpoint; none is left at the end.
 * Elsewhere there is no stage file. */
static void test_stage_file(void)
{
    const char *job = "stage-file";
    t_env(job);
    int tmpfs = store_is_tmpfs(t_base);
    enum { N = 50000 };
    static double a[N];
    char stage[512], path[512];
    snprintf(stage, sizeof stage, "%s/%s/r%06d.stage", t_base, job, t_rank);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_DOUBLE), SHOAL_SUCCESS);
    unsigned long long staged = inode_of(stage);
    CHECK_EQ(staged != 0, tmpfs);
    for (int e = 1; e <= 2; e++) {
        for (int i = 0; i < N; i++)
            a[i] = e * 1e6 + i + t_rank;
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    }
    /* The second checkpoint waited for the first shard. */
    t_shard_path(path, sizeof path, job, 1, t_rank);
    if (tmpfs)
        CHECK(inode_of(path) == staged);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    CHECK(!t_exists(stage));
    t_shard_path(path, sizeof path, job, 2, t_rank);
    CHECK(inode_of(path) != 0 && inode_of(path) != staged);
    CHECK(sums_describe(path));

    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_DOUBLE), SHOAL_SUCCESS);
    memset(a, 0, sizeof a);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += a[i] != 2e6 + i + t_rank;
    CHECK_EQ(wrong, 0);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
}

/* Between interval checkpoints the stage file the last checkpoint took is made again
 * at an agreement once half the time between checkpoints has passed (before the second
 * checkpoint: half the time from shoal_init to the first). One checkpoint, asked for by
 * the runner; no interval checkpoint is ever due. */
static void test_stage_refill(void)
{
    const char *job = "stage-refill";
    t_env(job);
    setenv("SHOAL_CKPT_INTERVAL", "0", 1);
    int tmpfs = store_is_tmpfs(t_base);
    enum { N = 20000 };
    static double a[N];
    char stage[512], shard[512];
    snprintf(stage, sizeof stage, "%s/%s/r%06d.stage", t_base, job, t_rank);
    t_shard_path(shard, sizeof shard, job, 1, t_rank);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_DOUBLE), SHOAL_SUCCESS);
    unsigned long long staged = inode_of(stage);
    CHECK_EQ(staged != 0, tmpfs);
    sleep_ms(100);
    if (t_rank == 0)
        CHECK_EQ(write_request(job, ""), 0);
    /* Until the shard is in place and the stage file back, or 20 s: every rank makes the
     * same calls, since each is an agreement's turn. */
    int done = 0, bad = 0;
    for (int i = 0; i < 10000 && !done; i++) {
        bad += shoal_snapshot() != SHOAL_SUCCESS;
        sleep_ms(2);
        int mine = t_exists(shard) && (inode_of(stage) != 0) == tmpfs, all;
        MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        done = all;
    }
    CHECK_EQ(bad, 0);
    CHECK(done);
    if (tmpfs)
        CHECK(inode_of(shard) == staged && inode_of(stage) != staged);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    CHECK(!t_exists(stage));
}

/* With SHOAL_SPARE=0 a pruned shard is removed: a reader that opened epoch 1's shard
 * without a lock still reads epoch 1 after epoch 4 is written. */
static void test_no_spare(void)
{
    const char *job = "no-spare";
    t_env(job);
    setenv("SHOAL_SPARE", "0", 1);
    enum { N = 10000 };
    static int a[N];
    char path[512];
    int fd = -1;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_INT), SHOAL_SUCCESS);
    for (int e = 1; e <= 5; e++) {
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
        if (e == 2) {
            t_shard_path(path, sizeof path, job, 1, t_rank);
            fd = open(path, O_RDONLY);
            CHECK(fd >= 0);
        }
    }
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    CHECK_EQ(count_epoch_dirs(job, 10), 2);
    CHECK_EQ(held_epoch(fd), 1);

    t_env("spare-bad");
    setenv("SHOAL_SPARE", "yes", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_ARG);
    t_env("spare-bad");
}

/* A spare the rank cannot open for writing (here a link to nowhere; on a cluster, a
 * replica's file the agent wrote) gives way to a new file, and nothing is made where it
 * pointed. A shard loaded to be restored from stays locked shared while its image is
 * held, mapped or not, and no longer: the ranks' and the agent's pruning leave it alone. */
static void test_spare_and_load_lock(void)
{
    const char *job = "spare-lock";
    t_env(job);
    setenv("SHOAL_KEEP_EPOCHS", "1", 1);
    enum { N = 100000 }; /* 400 KB: restored from a mapping */
    static int a[N];
    char path[512], spare[512], nowhere[512];
    snprintf(spare, sizeof spare, "%s/%s/r%06d.spare", t_base, job, t_rank);
    snprintf(nowhere, sizeof nowhere, "%s/%s/nowhere-%d", t_base, job, t_rank);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(symlink(nowhere, spare), 0);
    for (int i = 0; i < N; i++)
        a[i] = i + t_rank;
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    CHECK(!t_exists(nowhere));

    t_shard_path(path, sizeof path, job, 1, t_rank);
    struct shard_image img;
    struct shard_header h;
    CHECK_EQ(store_load_shard(path, &img, &h), SHARD_OK);
    CHECK(img.mapped);
    int other = open(path, O_RDONLY);
    CHECK(other >= 0);
    CHECK(flock(other, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK);
    shard_image_free(&img);
    CHECK_EQ(flock(other, LOCK_EX | LOCK_NB), 0);
    close(other);
    CHECK_EQ(held_epoch(open(path, O_RDONLY)), 1);
}

/* On a cluster the coordinator removes epochs (SHOAL_KEEP_EPOCHS=1): the ranks keep
 * every epoch they write, since one complete among them may not be durable yet. */
static void test_keep_epochs(void)
{
    const char *job = "keep";
    t_env(job);
    setenv("SHOAL_KEEP_EPOCHS", "1", 1);
    int v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    for (v = 1; v <= 4; v++)
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();
    CHECK_EQ(count_epoch_dirs(job, 10), 4);

    t_env("keep-bad");
    setenv("SHOAL_KEEP_EPOCHS", "yes", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_ARG);
    t_env("keep-bad");
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
    sleep_ms(a->delay_ms);
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
    sleep_ms(50);
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
    test_pruning();
    test_recycling();
    test_no_spare();
    test_spare_and_load_lock();
    test_stage_file();
    test_stage_refill();
    test_keep_epochs();
    test_finished();
    test_runner_mode();
    test_staged_restart();
    test_write_error();
    test_progress();
    test_snapshot_interval();
    test_auto_interval();
    test_auto_interval_unwritable();
    test_snapshot_requests();
    test_corrupt_all();
    return t_finish();
}
