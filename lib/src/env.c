/*
 * env.c - configuration from the environment (docs/launcher-protocol.md). Every
 * variable is optional; an empty value counts as unset. A bad value is an error that
 * names the variable and the value, never a silent default.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define DEFAULT_DIR        "./shoal-ckpt"
#define DEFAULT_INTERVAL_S 30.0
#define DEFAULT_HOLD_S     120.0
/* Bytes a rank sends, and receives, per round of a restore on another rank count: the
 * memory such a restore takes beyond the state (twice this). */
#define DEFAULT_RESTORE_CHUNK ((uint64_t)32 << 20)
/* A job nothing is known about fails once an hour: erring short costs checkpoints,
 * which are cheap, erring long costs lost work. */
#define DEFAULT_MTBF_S 3600.0

const char *const config_env_vars[] = {
    "SHOAL_DIR",        "SHOAL_JOB",          "SHOAL_CKPT_INTERVAL", "SHOAL_MTBF",
    "SHOAL_EPOCH_BASE", "SHOAL_HOLD_TIMEOUT", "SHOAL_KEEP_EPOCHS",   "SHOAL_RESTART_EPOCH",
    "SHOAL_SPARE",      "SHOAL_STAGE_WAIT",   "SHOAL_STATS",         "SHOAL_TRAFFIC",
    "SHOAL_RESTART_NRANKS", "SHOAL_ELASTIC",  "SHOAL_RESTORE_CHUNK", NULL};

static const char *env(const char *name)
{
    const char *v = getenv(name);
    return (v != NULL && v[0] != 0) ? v : NULL;
}

/* *out = name's value, 1 or 0, or dflt when unset; -1 with msg set for any other. */
static int env_flag(const char *name, int dflt, int *out, char *msg, size_t msglen)
{
    const char *v = env(name);
    if (v != NULL && strcmp(v, "1") != 0 && strcmp(v, "0") != 0) {
        snprintf(msg, msglen, "invalid %s \"%.80s\": want 1 or 0", name, v);
        return -1;
    }
    *out = v == NULL ? dflt : v[0] == '1';
    return 0;
}

static int job_char(char ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '.' || ch == '_' || ch == '-';
}

int config_valid_job(const char *job)
{
    size_t len = strlen(job);
    if (len < 1 || len > SHARD_JOB_MAX)
        return 0;
    /* "." and ".." are made of valid characters but name other directories. */
    if (strcmp(job, ".") == 0 || strcmp(job, "..") == 0)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (!job_char(job[i]))
            return 0;
    return 1;
}

/* The program's file name, with characters a job id cannot hold replaced by '_'. */
static void default_job(char *job, size_t len)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const char *base = "job";
    if (n > 0) {
        exe[n] = 0;
        const char *slash = strrchr(exe, '/');
        base = slash ? slash + 1 : exe;
    }
    size_t keep = strlen(base) < len - 1 ? strlen(base) : len - 1;
    memcpy(job, base, keep);
    job[keep] = 0;
    for (char *p = job; *p; p++)
        if (!job_char(*p))
            *p = '_';
    if (!config_valid_job(job))
        snprintf(job, len, "job");
}

/* Parses a non-negative decimal number "12" or "0.25" at *s, advancing it. */
static int parse_number(const char **s, double *out)
{
    const char *p = *s;
    double v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + (*p++ - '0');
        digits++;
    }
    if (*p == '.') {
        p++;
        double scale = 0.1;
        while (*p >= '0' && *p <= '9') {
            v += (*p++ - '0') * scale;
            scale /= 10;
            digits++;
        }
    }
    if (digits == 0)
        return -1;
    *out = v;
    *s = p;
    return 0;
}

int config_parse_duration(const char *s, double *seconds)
{
    /* A bare number is seconds; otherwise a sequence of number+unit as Go's
     * time.Duration prints it ("1m30s", "500ms"), since the runner is written in Go. */
    static const struct {
        const char *unit;
        double scale;
    } units[] = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}};
    const char *p = s;
    double total = 0, v;
    if (parse_number(&p, &v) != 0)
        return -1;
    if (*p == 0) {
        *seconds = v;
        return 0;
    }
    for (;;) {
        size_t i, n = sizeof units / sizeof units[0];
        /* "ms" before "m": try the longest unit that matches. */
        int best = -1;
        for (i = 0; i < n; i++) {
            size_t len = strlen(units[i].unit);
            if (strncmp(p, units[i].unit, len) == 0 &&
                (best < 0 || len > strlen(units[best].unit)))
                best = (int)i;
        }
        if (best < 0)
            return -1;
        total += v * units[best].scale;
        p += strlen(units[best].unit);
        if (*p == 0)
            break;
        if (parse_number(&p, &v) != 0)
            return -1;
    }
    *seconds = total;
    return 0;
}

/* Strict decimal integer in [min, max]. */
static int parse_int(const char *s, long long min, long long max, long long *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != 0 || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

/* "65536", "512K", "64M", "1G" (powers of 1024) within [4 KiB, 1 GiB]: 0 or -1. */
static int parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || s[0] == '-')
        return -1;
    int shift = 0;
    if (*end == 'K' || *end == 'k')
        shift = 10, end++;
    else if (*end == 'M' || *end == 'm')
        shift = 20, end++;
    else if (*end == 'G' || *end == 'g')
        shift = 30, end++;
    if (*end != 0 || v > (1ULL << 30) >> shift)
        return -1;
    v <<= shift;
    if (v < 4096)
        return -1;
    *out = v;
    return 0;
}

int config_from_env(struct shoal_config *c, char *msg, size_t msglen)
{
    const char *v;
    memset(c, 0, sizeof *c);
    c->restart_epoch = -1;

    v = env("SHOAL_DIR");
    if (snprintf(c->dir, sizeof c->dir, "%s", v ? v : DEFAULT_DIR) >= (int)sizeof c->dir) {
        snprintf(msg, msglen, "SHOAL_DIR is too long (%zu bytes)", strlen(v));
        return SHOAL_ERR_ARG;
    }

    v = env("SHOAL_JOB");
    if (v == NULL) {
        default_job(c->job, sizeof c->job);
    } else if (!config_valid_job(v)) {
        snprintf(msg, msglen,
                 "invalid SHOAL_JOB \"%.80s\": want 1 to 63 characters of A-Z a-z 0-9 . _ -",
                 v);
        return SHOAL_ERR_ARG;
    } else {
        snprintf(c->job, sizeof c->job, "%s", v);
    }

    c->interval_s = DEFAULT_INTERVAL_S;
    v = env("SHOAL_CKPT_INTERVAL");
    if (v != NULL && strcmp(v, "auto") == 0) {
        c->interval_auto = 1;
    } else if (v != NULL && config_parse_duration(v, &c->interval_s) != 0) {
        snprintf(msg, msglen,
                 "invalid SHOAL_CKPT_INTERVAL \"%.80s\": want seconds (30, 0.5), a "
                 "duration (500ms, 30s, 2m, 1h) or auto",
                 v);
        return SHOAL_ERR_ARG;
    }

    /* Checked even when the interval is fixed: a bad value is never silently ignored. */
    c->mtbf_s = DEFAULT_MTBF_S;
    v = env("SHOAL_MTBF");
    if (v != NULL && (config_parse_duration(v, &c->mtbf_s) != 0 || !(c->mtbf_s > 0))) {
        snprintf(msg, msglen,
                 "invalid SHOAL_MTBF \"%.80s\": want seconds above 0 (3600, 0.5) or a "
                 "duration (90m, 1h, 2h30m)",
                 v);
        return SHOAL_ERR_ARG;
    }
    if (c->interval_auto)
        c->interval_s = interval_auto(0, c->mtbf_s);

    v = env("SHOAL_RESTART_EPOCH");
    if (v != NULL) {
        if (parse_int(v, -1, SHARD_EPOCH_MAX, &c->restart_epoch) != 0) {
            snprintf(msg, msglen, "invalid SHOAL_RESTART_EPOCH \"%.80s\": want 0 to %lld", v,
                     SHARD_EPOCH_MAX);
            return SHOAL_ERR_ARG;
        }
        if (c->restart_epoch < 0)
            c->restart_epoch = 0; /* -1 is the runner's other spelling of "fresh" */
    }

    if (env_flag("SHOAL_KEEP_EPOCHS", 0, &c->keep_epochs, msg, msglen) != 0)
        return SHOAL_ERR_ARG;

    if (env_flag("SHOAL_SPARE", 1, &c->spare, msg, msglen) != 0)
        return SHOAL_ERR_ARG;

    if (env_flag("SHOAL_TRAFFIC", 1, &c->traffic, msg, msglen) != 0)
        return SHOAL_ERR_ARG;

    v = env("SHOAL_EPOCH_BASE");
    if (v != NULL && parse_int(v, 1, SHARD_EPOCH_MAX, &c->epoch_base) != 0) {
        snprintf(msg, msglen, "invalid SHOAL_EPOCH_BASE \"%.80s\": want 1 to %lld", v,
                 SHARD_EPOCH_MAX);
        return SHOAL_ERR_ARG;
    }
    if (c->epoch_base > 0 && c->restart_epoch >= c->epoch_base) {
        snprintf(msg, msglen,
                 "SHOAL_EPOCH_BASE %lld must be above SHOAL_RESTART_EPOCH %lld: "
                 "a run never rewrites an existing epoch",
                 c->epoch_base, c->restart_epoch);
        return SHOAL_ERR_ARG;
    }

    c->hold_timeout_s = DEFAULT_HOLD_S;
    v = env("SHOAL_HOLD_TIMEOUT");
    if (v != NULL && config_parse_duration(v, &c->hold_timeout_s) != 0) {
        snprintf(msg, msglen,
                 "invalid SHOAL_HOLD_TIMEOUT \"%.80s\": want seconds (120, 0.5) or a "
                 "duration (500ms, 30s, 2m)",
                 v);
        return SHOAL_ERR_ARG;
    }

    c->stage_wait_s = 0;
    v = env("SHOAL_STAGE_WAIT");
    if (v != NULL && config_parse_duration(v, &c->stage_wait_s) != 0) {
        snprintf(msg, msglen,
                 "invalid SHOAL_STAGE_WAIT \"%.80s\": want seconds (600, 0.5) or a duration "
                 "(500ms, 30s, 10m)",
                 v);
        return SHOAL_ERR_ARG;
    }

    v = env("SHOAL_RESTART_NRANKS");
    if (v != NULL) {
        long long n;
        if (parse_int(v, 1, SHARD_RANK_MAX + 1, &n) != 0) {
            snprintf(msg, msglen, "invalid SHOAL_RESTART_NRANKS \"%.80s\": want 1 to %d", v,
                     SHARD_RANK_MAX + 1);
            return SHOAL_ERR_ARG;
        }
        if (c->restart_epoch < 0) {
            snprintf(msg, msglen,
                     "SHOAL_RESTART_NRANKS=%lld without SHOAL_RESTART_EPOCH: it says how many "
                     "ranks wrote that epoch",
                     n);
            return SHOAL_ERR_ARG;
        }
        c->restart_nranks = (int)n;
    }

    if (env_flag("SHOAL_ELASTIC", 0, &c->elastic, msg, msglen) != 0)
        return SHOAL_ERR_ARG;

    c->restore_chunk = DEFAULT_RESTORE_CHUNK;
    v = env("SHOAL_RESTORE_CHUNK");
    if (v != NULL && parse_bytes(v, &c->restore_chunk) != 0) {
        snprintf(msg, msglen,
                 "invalid SHOAL_RESTORE_CHUNK \"%.80s\": want bytes from 4096 to 1G (65536, "
                 "512K, 64M)",
                 v);
        return SHOAL_ERR_ARG;
    }

    v = env("SHOAL_STATS");
    if (v != NULL && snprintf(c->stats, sizeof c->stats, "%s", v) >= (int)sizeof c->stats) {
        snprintf(msg, msglen, "SHOAL_STATS is too long (%zu bytes)", strlen(v));
        return SHOAL_ERR_ARG;
    }
    return SHOAL_SUCCESS;
}
