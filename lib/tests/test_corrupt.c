/*
 * test_corrupt.c - what libshoal does with bad shards and bad configuration: every
 * corrupt-shard case gives its error code, a corrupt newest epoch falls back to the
 * previous one, nothing is deleted because it failed to verify, an unwritable
 * SHOAL_DIR gives SHOAL_ERR_DIR and bad variables SHOAL_ERR_ARG.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "shoal.h"
#include "testutil.h"

/* Runs one fresh job that writes `epochs` epochs, storing 1, 2, ..., and dies. */
static void make_epochs(const char *job, int epochs)
{
    t_env(job);
    int v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    for (v = 1; v <= epochs; v++)
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_unfinish(job); /* as if it had died after its last checkpoint */
}

/* Runs job again after it died; returns the value of region 0 it restored, or -1 when
 * the start was fresh. */
static int restart_value(const char *job)
{
    t_env(job);
    t_unfinish(job);
    int v = -1;
    if (!CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS))
        return -2;
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    if (shoal_status() == 1)
        CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    return v;
}

/* The shard the last rank reads, so that on 2 ranks one rank fails and the other
 * still learns the error. */
static void victim(char *path, size_t len, const char *job, long long epoch)
{
    t_shard_path(path, len, job, epoch, t_nranks - 1);
}

static int bad_magic(const char *job, const char *p)
{
    (void)job;
    return t_flip_byte(p, 0);
}
static int truncated(const char *job, const char *p)
{
    (void)job;
    return t_truncate(p, 100);
}
static int cut_tail(const char *job, const char *p)
{
    (void)job;
    return t_truncate(p, t_file_size(p) - 3);
}
static int flipped(const char *job, const char *p)
{
    (void)job;
    return t_flip_byte(p, -9);
}
static int flipped_header(const char *job, const char *p)
{
    (void)job;
    return t_flip_byte(p, 28);
}
static int version4(const char *job, const char *p)
{
    (void)job;
    return t_patch_u32_resealed(p, 8, 4); /* versions 1 to 3 are read */
}
static int bad_header(const char *job, const char *p)
{
    (void)job;
    return t_patch_u32_resealed(p, 24, 99);
}
static int missing(const char *job, const char *p)
{
    (void)job;
    return unlink(p);
}
static int unreadable(const char *job, const char *p)
{
    (void)job;
    /* Something that cannot be read as a file (as root, permissions can't do that). */
    return unlink(p) || mkdir(p, 0755);
}
static int other_nranks(const char *job, const char *p)
{
    (void)job;
    /* A valid shard, but of a job with one rank more. */
    return t_patch_u32_resealed(p, 28, (uint32_t)t_nranks + 1);
}
static int other_job(const char *job, const char *p)
{
    (void)job;
    char src[512];
    t_shard_path(src, sizeof src, "corrupt-donor", 1, t_nranks - 1);
    return t_copy(src, p);
}
static int other_rank(const char *job, const char *p)
{
    char src[512];
    if (t_nranks == 1) /* a valid shard of rank 1 of a 2-rank job */
        return t_patch_u32_resealed(p, 28, 2) || t_patch_u32_resealed(p, 24, 1);
    t_shard_path(src, sizeof src, job, 1, 0); /* rank 0's shard in rank 1's place */
    return t_copy(src, p);
}

static const struct {
    const char *name;
    int (*apply)(const char *job, const char *path);
    int want;
} cases[] = {
    {"bad-magic", bad_magic, SHOAL_ERR_CORRUPT},
    {"truncated", truncated, SHOAL_ERR_CORRUPT},
    {"cut-tail", cut_tail, SHOAL_ERR_CORRUPT},
    {"checksum", flipped, SHOAL_ERR_CORRUPT},
    {"flipped-header", flipped_header, SHOAL_ERR_CORRUPT},
    {"version", version4, SHOAL_ERR_VERSION},
    {"bad-header", bad_header, SHOAL_ERR_CORRUPT},
    {"missing", missing, SHOAL_ERR_NOCKPT},
    {"unreadable", unreadable, SHOAL_ERR_IO},
    {"other-nranks", other_nranks, SHOAL_ERR_MISMATCH},
    {"other-job", other_job, SHOAL_ERR_MISMATCH},
    {"other-rank", other_rank, SHOAL_ERR_MISMATCH},
};

static void test_corrupt_cases(void)
{
    make_epochs("corrupt-donor", 1);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char job[64], path[512];
        snprintf(job, sizeof job, "corrupt-%s", cases[i].name);
        make_epochs(job, 1);
        victim(path, sizeof path, job, 1);
        if (t_rank == 0 && !CHECK_EQ(cases[i].apply(job, path), 0))
            fprintf(stderr, "  could not corrupt %s\n", path);
        t_barrier();

        /* The runner's way: this epoch and no other. */
        t_env(job);
        setenv("SHOAL_RESTART_EPOCH", "1", 1);
        setenv("SHOAL_EPOCH_BASE", "5", 1);
        if (!CHECK_EQ(shoal_init(MPI_COMM_WORLD), cases[i].want))
            fprintf(stderr, "  case %s\n", cases[i].name);
        CHECK_EQ(shoal_status(), SHOAL_ERR_STATE); /* a failed init leaves nothing */

        /* Standalone: the only epoch is unusable, so a fresh start, loudly. */
        if (!CHECK_EQ(restart_value(job), -1))
            fprintf(stderr, "  case %s\n", cases[i].name);
        if (cases[i].apply != missing)
            CHECK(t_exists(path)); /* kept for inspection, never deleted */
        t_barrier();
    }
}

static void test_fallback(void)
{
    const char *job = "fallback";
    char path[512];
    make_epochs(job, 2);
    victim(path, sizeof path, job, 2);
    if (t_rank == 0)
        CHECK_EQ(t_flip_byte(path, -9), 0);
    t_barrier();
    /* restart_value also writes nothing; run a checkpoint after the fallback too. */
    t_env(job);
    int v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_snapshot(), SHOAL_SUCCESS);
    CHECK_EQ(v, 1); /* from epoch 1: epoch 2 is corrupt */
    v = 30;
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS); /* epoch 3: above every existing one */
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();
    CHECK(t_exists(path));
    t_shard_path(path, sizeof path, job, 3, t_rank);
    CHECK(t_exists(path));
    CHECK_EQ(restart_value(job), 30);

    /* Every epoch corrupt: a fresh start, and still nothing deleted. */
    t_barrier();
    if (t_rank == 0)
        for (long long e = 1; e <= 3; e++) {
            victim(path, sizeof path, job, e);
            t_flip_byte(path, -1);
        }
    t_barrier();
    CHECK_EQ(restart_value(job), -1);
    for (long long e = 1; e <= 3; e++) {
        victim(path, sizeof path, job, e);
        CHECK(t_exists(path));
    }
}

static void test_dir_not_writable(void)
{
    char dir[600], file[512];
    snprintf(file, sizeof file, "%s/a-file", t_base);
    if (t_rank == 0)
        CHECK_EQ(t_write_text(file, "x"), 0);
    t_barrier();
    t_env("dir");
    snprintf(dir, sizeof dir, "%s/sub", file); /* below a regular file */
    setenv("SHOAL_DIR", dir, 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_DIR);
    setenv("SHOAL_DIR", "/proc/shoal-not-here", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_DIR);
    if (geteuid() != 0) {
        snprintf(dir, sizeof dir, "%s/read-only", t_base);
        if (t_rank == 0)
            mkdir(dir, 0500);
        t_barrier();
        setenv("SHOAL_DIR", dir, 1);
        CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_DIR);
    } else if (t_rank == 0) {
        printf("skip: a read-only SHOAL_DIR by permissions (root writes anyway)\n");
    }
}

static void expect_arg_error(const char *name, const char *value)
{
    t_env("env");
    setenv(name, value, 1);
    if (!CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_ARG))
        fprintf(stderr, "  %s=%s\n", name, value);
}

static void test_environment(void)
{
    expect_arg_error("SHOAL_CKPT_INTERVAL", "abc");
    expect_arg_error("SHOAL_CKPT_INTERVAL", "10x");
    expect_arg_error("SHOAL_CKPT_INTERVAL", "-5");
    expect_arg_error("SHOAL_CKPT_INTERVAL", "1e3");
    expect_arg_error("SHOAL_JOB", "a/b");
    expect_arg_error("SHOAL_JOB", "..");
    expect_arg_error("SHOAL_JOB",
                     "abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijkl");
    expect_arg_error("SHOAL_RESTART_EPOCH", "x");
    expect_arg_error("SHOAL_RESTART_EPOCH", "-2");
    expect_arg_error("SHOAL_EPOCH_BASE", "0");
    expect_arg_error("SHOAL_HOLD_TIMEOUT", "forever");
    expect_arg_error("SHOAL_HOLD_TIMEOUT", "-1");
    expect_arg_error("SHOAL_TRAFFIC", "yes");
    expect_arg_error("SHOAL_CKPT_INTERVAL", "Auto");
    expect_arg_error("SHOAL_MTBF", "0");

    static const struct {
        const char *text;
        double seconds;
    } good[] = {{"30", 30},  {"0.5", 0.5}, {"500ms", 0.5}, {"30s", 30},
                {"2m", 120}, {"1h", 3600}, {"1m30s", 90},  {"0", 0}};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        double s = -1;
        CHECK_EQ(config_parse_duration(good[i].text, &s), 0);
        if (!CHECK(s > good[i].seconds - 1e-9 && s < good[i].seconds + 1e-9))
            fprintf(stderr, "  %s -> %g\n", good[i].text, s);
    }
    t_env("env");
    setenv("SHOAL_CKPT_INTERVAL", "1m30s", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    /* Defaults: ./shoal-ckpt and the program's name. */
    char cwd[512], path[600];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    CHECK_EQ(chdir(t_base), 0);
    t_env("unused");
    unsetenv("SHOAL_DIR");
    unsetenv("SHOAL_JOB");
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    char exe[512] = "";
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = 0;
    snprintf(path, sizeof path, "%s/shoal-ckpt/%.80s", t_base,
             strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe);
    CHECK(t_exists(path));
    CHECK_EQ(chdir(cwd), 0);
}

void test_corrupt_all(void)
{
    test_corrupt_cases();
    test_fallback();
    test_dir_not_writable();
    test_environment();
}
