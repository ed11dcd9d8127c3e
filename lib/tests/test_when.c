/*
 * test_when.c - when libshoal takes a checkpoint, through its public API, as part of
 * test_api: the snapshot agreement at a fixed interval, the automatic interval (and one
 * that cannot be written down), checkpoint requests from the runner and holding after
 * them, and the statistics line that reports them.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "internal.h" /* store_load_shard: a held epoch's shards must verify */
#include "json.h"
#include "shoal.h"
#include "testutil.h"

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
        t_sleep_ms(1);
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
        if (it == 100 && t_rank == 0 && t_write_request(job, tc->content) != 0)
            bad++;
        t_sleep_ms(1);
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
        t_sleep_ms(1);
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

/* Every scenario of this file, in order. */
void test_when_all(void)
{
    test_snapshot_interval();
    test_auto_interval();
    test_auto_interval_unwritable();
    test_snapshot_requests();
}
