/*
 * jobdir.c - the names of the files in a job's directory, $SHOAL_DIR/$SHOAL_JOB, which
 * libshoal shares with the node's agent and with shoal run (docs/shard-format.md, "Files
 * on disk"; docs/launcher-protocol.md). This is the one place libshoal spells them;
 * testdata/jobdir/paths.tsv lists them for this file and its Go twin to check (make
 * test-c: test_jobdir). No I/O.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* The names of paths.tsv; NULL for files only libshoal knows (its temporary names). */
static const char *const kind_names[JOBDIR_NKINDS] = {
    [JOBDIR_EPOCH] = "epoch",       [JOBDIR_SHARD] = "shard",
    [JOBDIR_SUMS] = "sums",         [JOBDIR_SPARE] = "spare",
    [JOBDIR_STAGE] = "stage",       [JOBDIR_MANIFEST] = "manifest",
    [JOBDIR_FINISHED] = "finished", [JOBDIR_PROGRESS] = "progress",
    [JOBDIR_INTERVAL] = "interval", [JOBDIR_REQUEST] = "request",
    [JOBDIR_TRAFFIC] = "traffic",   [JOBDIR_ALIVE] = "alive",
};

const char *jobdir_kind_name(int kind)
{
    return kind >= 0 && kind < JOBDIR_NKINDS ? kind_names[kind] : NULL;
}

int jobdir_kind_of(const char *name)
{
    for (int k = 0; k < JOBDIR_NKINDS; k++)
        if (kind_names[k] != NULL && strcmp(kind_names[k], name) == 0)
            return k;
    return -1;
}

int jobdir_of(char *out, size_t len, const char *dir, const char *job)
{
    int n = snprintf(out, len, "%s/%s", dir, job);
    return (n < 0 || (size_t)n >= len) ? ENAMETOOLONG : 0;
}

int jobdir_path(char *out, size_t len, const char *jobdir, enum jobdir_kind kind,
                long long epoch, int rank)
{
    int n = -1;
    switch (kind) {
    case JOBDIR_EPOCH:
        n = snprintf(out, len, "%s/e%08lld", jobdir, epoch);
        break;
    case JOBDIR_SHARD:
        n = snprintf(out, len, "%s/e%08lld/r%06d.shard", jobdir, epoch, rank);
        break;
    case JOBDIR_SHARD_TMP:
        n = snprintf(out, len, "%s/e%08lld/r%06d.shard.tmp", jobdir, epoch, rank);
        break;
    case JOBDIR_SUMS:
        n = snprintf(out, len, "%s/e%08lld/r%06d.sums", jobdir, epoch, rank);
        break;
    case JOBDIR_SUMS_TMP:
        n = snprintf(out, len, "%s/e%08lld/r%06d.sums.tmp", jobdir, epoch, rank);
        break;
    case JOBDIR_SPARE:
        n = snprintf(out, len, "%s/r%06d.spare", jobdir, rank);
        break;
    case JOBDIR_STAGE:
        n = snprintf(out, len, "%s/r%06d.stage", jobdir, rank);
        break;
    case JOBDIR_PROBE:
        n = snprintf(out, len, "%s/.probe-r%06d.tmp", jobdir, rank);
        break;
    case JOBDIR_MANIFEST:
        n = snprintf(out, len, "%s/manifest", jobdir);
        break;
    case JOBDIR_FINISHED:
        n = snprintf(out, len, "%s/finished", jobdir);
        break;
    case JOBDIR_PROGRESS:
        n = snprintf(out, len, "%s/progress", jobdir);
        break;
    case JOBDIR_INTERVAL:
        n = snprintf(out, len, "%s/interval", jobdir);
        break;
    case JOBDIR_REQUEST:
        n = snprintf(out, len, "%s/request-checkpoint", jobdir);
        break;
    case JOBDIR_REQUEST_TAKEN:
        n = snprintf(out, len, "%s/request-checkpoint.taken.tmp", jobdir);
        break;
    case JOBDIR_TRAFFIC_DIR:
        n = snprintf(out, len, "%s/traffic", jobdir);
        break;
    case JOBDIR_TRAFFIC:
        n = snprintf(out, len, "%s/traffic/%d", jobdir, rank);
        break;
    case JOBDIR_ALIVE:
        n = snprintf(out, len, "%s/r%06d.alive", jobdir, rank);
        break;
    case JOBDIR_NKINDS:
        break;
    }
    return (n < 0 || (size_t)n >= len) ? ENAMETOOLONG : 0;
}

/* The value of the n decimal digits at s, or -1 if one is not a digit. */
static long long digits(const char *s, int n)
{
    long long v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

long long jobdir_epoch_of(const char *name)
{
    return name[0] == 'e' && strlen(name) == 9 ? digits(name + 1, 8) : -1;
}

int jobdir_shard_rank_of(const char *name)
{
    if (name[0] != 'r' || strlen(name) != 13 || strcmp(name + 7, ".shard") != 0)
        return -1;
    return (int)digits(name + 1, 6);
}

int jobdir_is_tmp(const char *name)
{
    size_t len = strlen(name);
    return len > 4 && strcmp(name + len - 4, ".tmp") == 0;
}
