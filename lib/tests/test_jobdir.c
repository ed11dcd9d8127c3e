/*
 * test_jobdir.c - jobdir.c names every file of a job's directory exactly as
 * testdata/jobdir/paths.tsv does, the list the Go package jobdir checks too, and reads
 * back the epochs and ranks of the names it writes. No MPI.
 *
 * Usage: test_jobdir [testdata/jobdir]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "internal.h"

/* Kinds of the list that libshoal never writes, so jobdir.c does not name them: parity
 * files are the agent's (erasure-coded copies of other nodes' shards). */
static const char *const not_libshoals[] = {"parity", NULL};

static int skipped(const char *kind)
{
    for (int i = 0; not_libshoals[i] != NULL; i++)
        if (strcmp(not_libshoals[i], kind) == 0)
            return 1;
    return 0;
}

/* "-" is none (0); otherwise a decimal number. */
static long long field_number(const char *s)
{
    return strcmp(s, "-") == 0 ? 0 : strtoll(s, NULL, 10);
}

static void test_paths(const char *dir)
{
    char file[512];
    snprintf(file, sizeof file, "%s/paths.tsv", dir);
    FILE *f = fopen(file, "r");
    if (!CHECK(f != NULL)) {
        fprintf(stderr, "cannot open %s\n", file);
        return;
    }
    int listed[JOBDIR_NKINDS] = {0}, lineno = 0;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] == '#' || line[0] == 0)
            continue;
        char *fields[4], *save = NULL;
        int n = 0;
        for (char *p = strtok_r(line, "\t", &save); p != NULL && n < 4;
             p = strtok_r(NULL, "\t", &save))
            fields[n++] = p;
        if (!CHECK_EQ(n, 4)) {
            fprintf(stderr, "%s:%d: want 4 fields separated by tabs\n", file, lineno);
            continue;
        }
        if (skipped(fields[0]))
            continue;
        int kind = jobdir_kind_of(fields[0]);
        if (!CHECK(kind >= 0)) {
            fprintf(stderr, "%s:%d: jobdir.c names no file of kind %s\n", file, lineno,
                    fields[0]);
            continue;
        }
        listed[kind] = 1;
        long long epoch = field_number(fields[1]);
        int rank = (int)field_number(fields[2]);
        char got[PATH_MAX], want[PATH_MAX];
        snprintf(want, sizeof want, "/data/job-1/%s", fields[3]);
        CHECK_EQ(jobdir_path(got, sizeof got, "/data/job-1", kind, epoch, rank), 0);
        if (!CHECK_STR(got, want))
            fprintf(stderr, "%s:%d: kind %s\n", file, lineno, fields[0]);

        /* The names libshoal reads back: its epoch directories and its shards, whose
         * ranks have 6 digits (shoal_init refuses a job of more ranks). */
        const char *base = strrchr(fields[3], '/');
        base = base != NULL ? base + 1 : fields[3];
        if (kind == JOBDIR_EPOCH)
            CHECK_EQ(jobdir_epoch_of(base), epoch);
        if (kind == JOBDIR_SHARD && rank <= SHARD_RANK_MAX) {
            CHECK_EQ(jobdir_shard_rank_of(base), rank);
            CHECK_EQ(jobdir_is_tmp(base), 0);
        }
    }
    fclose(f);
    /* Every kind jobdir.c gives a name is in the shared list. */
    for (int k = 0; k < JOBDIR_NKINDS; k++)
        if (jobdir_kind_name(k) != NULL && !CHECK(listed[k]))
            fprintf(stderr, "%s lists no file of kind %s\n", file, jobdir_kind_name(k));
}

/* The kinds only libshoal knows: a file being written is its final name + ".tmp"
 * (store_write_reusing), which is what pruning and the stale-file sweep remove. */
static void test_own_names(void)
{
    static const struct {
        int kind;
        long long epoch;
        int rank;
        const char *want;
    } cases[] = {
        {JOBDIR_SHARD_TMP, 7, 3, "j/e00000007/r000003.shard.tmp"},
        {JOBDIR_SUMS_TMP, 7, 3, "j/e00000007/r000003.sums.tmp"},
        {JOBDIR_PROBE, 0, 3, "j/.probe-r000003.tmp"},
        {JOBDIR_REQUEST_TAKEN, 0, 0, "j/request-checkpoint.taken.tmp"},
        {JOBDIR_TRAFFIC_DIR, 0, 3, "j/traffic"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char got[PATH_MAX];
        CHECK_EQ(
            jobdir_path(got, sizeof got, "j", cases[i].kind, cases[i].epoch, cases[i].rank), 0);
        CHECK_STR(got, cases[i].want);
        const char *base = strrchr(got, '/') + 1;
        CHECK_EQ(jobdir_is_tmp(base), strcmp(base, "traffic") != 0);
    }
    char shard[PATH_MAX], tmp[PATH_MAX], want[PATH_MAX + 8];
    jobdir_path(shard, sizeof shard, "j", JOBDIR_SHARD, 12, 5);
    jobdir_path(tmp, sizeof tmp, "j", JOBDIR_SHARD_TMP, 12, 5);
    snprintf(want, sizeof want, "%s.tmp", shard);
    CHECK_STR(tmp, want);

    char job[PATH_MAX];
    CHECK_EQ(jobdir_of(job, sizeof job, "./shoal-ckpt", "heat"), 0);
    CHECK_STR(job, "./shoal-ckpt/heat");

    /* A path that does not fit is an error, never a cut name. */
    char small[12];
    CHECK_EQ(jobdir_path(small, sizeof small, "j", JOBDIR_SHARD, 7, 3), ENAMETOOLONG);
    CHECK_EQ(jobdir_of(small, sizeof small, "./shoal-ckpt", "heat"), ENAMETOOLONG);

    /* Names that are not libshoal's. */
    CHECK_EQ(jobdir_epoch_of("e0000007"), -1);
    CHECK_EQ(jobdir_epoch_of("e0000000x"), -1);
    CHECK_EQ(jobdir_shard_rank_of("r000003.shard.tmp"), -1);
    CHECK_EQ(jobdir_shard_rank_of("r000003.spare"), -1);
    CHECK_EQ(jobdir_kind_of("shard.tmp"), -1);
}

/* alive.c writes each record of alive.tsv as its line, padded to ALIVE_LINE bytes. */
static void test_alive(const char *dir)
{
    char file[512];
    snprintf(file, sizeof file, "%s/alive.tsv", dir);
    FILE *f = fopen(file, "r");
    if (!CHECK(f != NULL)) {
        fprintf(stderr, "cannot open %s\n", file);
        return;
    }
    static const char *const states[] = {"run", "hold", "done"};
    char line[1024];
    int lineno = 0, records = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (line[0] == '#' || line[0] == 0)
            continue;
        char *fields[8], *save = NULL;
        int n = 0;
        for (char *p = strtok_r(line, "\t", &save); p != NULL && n < 8;
             p = strtok_r(NULL, "\t", &save))
            fields[n++] = p;
        if (!CHECK_EQ(n, 8)) {
            fprintf(stderr, "%s:%d: want 8 fields separated by tabs\n", file, lineno);
            continue;
        }
        struct alive_record r = {.state = ALIVE_RUN};
        int known = 0;
        for (int s = 0; s < 3; s++)
            if (strcmp(fields[0], states[s]) == 0) {
                r.state = (enum alive_state)s;
                known = 1;
            }
        CHECK(known);
        long long *v[] = {&r.calls, &r.at_ns, &r.gap_ns, &r.every_ns, &r.pid, &r.cpu_ns};
        for (int i = 0; i < 6; i++)
            *v[i] = strtoll(fields[1 + i], NULL, 10);
        char got[ALIVE_LINE + 1], want[ALIVE_LINE + 1];
        CHECK_EQ(alive_line(got, sizeof got, &r), ALIVE_LINE);
        snprintf(want, sizeof want, "%-*s\n", ALIVE_LINE - 1, fields[7]);
        if (!CHECK_STR(got, want))
            fprintf(stderr, "%s:%d\n", file, lineno);
        records++;
    }
    fclose(f);
    CHECK(records > 0);
    /* A buffer too small for the padded line is refused, never cut. */
    char small[ALIVE_LINE];
    struct alive_record r = {.state = ALIVE_RUN};
    CHECK_EQ(alive_line(small, sizeof small, &r), -1);
}

int main(int argc, char **argv)
{
    test_paths(argc > 1 ? argv[1] : "testdata/jobdir");
    test_own_names();
    test_alive(argc > 1 ? argv[1] : "testdata/jobdir");
    return check_summary(check_passed, check_failed);
}
