/*
 * alive.c - the rank's alive file, rNNNNNN.alive in the job's directory: when it was
 * last in shoal_snapshot, how often it usually is, its pid and its CPU time then. The
 * node's agent reads it to tell a job whose ranks stopped making calls (a rank frozen,
 * stopped or hung in a system call) from one that runs (docs/shard-format.md, "Files
 * on disk"; docs/architecture.md, "A rank that stops"). Written at agreements, which
 * read the clock anyway, at most every ALIVE_EVERY_S: one pwrite into the page cache,
 * no fsync (a lost record only makes the rank look older).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define ALIVE_EVERY_S 0.1

static const char *const state_names[] = {
    [ALIVE_RUN] = "run",
    [ALIVE_HOLD] = "hold",
    [ALIVE_DONE] = "done",
};

int alive_line(char *out, size_t len, const struct alive_record *r)
{
    if (len < ALIVE_LINE + 1)
        return -1;
    int n = snprintf(
        out, len, "alive %s calls %lld at %lld gap %lld every %lld pid %lld cpu %lld",
        state_names[r->state], r->calls, r->at_ns, r->gap_ns, r->every_ns, r->pid, r->cpu_ns);
    if (n < 0 || n > ALIVE_LINE - 1)
        return -1;
    memset(out + n, ' ', (size_t)(ALIVE_LINE - 1 - n));
    out[ALIVE_LINE - 1] = '\n';
    out[ALIVE_LINE] = 0;
    return ALIVE_LINE;
}

void alive_open(struct shoal_ctx *c)
{
    char path[PATH_MAX];
    c->alive_fd = -1;
    if (jobdir_path(path, sizeof path, c->jobdir, JOBDIR_ALIVE, 0, c->rank) != 0)
        return;
    /* A record of an earlier run of this rank here would look like a call of this one. */
    unlink(path);
    c->alive_fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
}

void alive_note(struct shoal_ctx *c, double now, enum alive_state state, int force)
{
    if (c->alive_fd < 0)
        return;
    if (!force && state == ALIVE_RUN && c->alive_at > 0 && now - c->alive_at < ALIVE_EVERY_S)
        return;
    if (c->alive_at > 0 && c->calls > c->alive_calls) {
        c->alive_gap = now - c->alive_at;
        c->alive_every = c->alive_gap / (double)(c->calls - c->alive_calls);
    }
    struct timespec cpu = {0, 0};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
    struct alive_record r = {
        .state = state,
        .calls = c->calls,
        .at_ns = (long long)(now * 1e9),
        .gap_ns = (long long)(c->alive_gap * 1e9),
        .every_ns = (long long)(c->alive_every * 1e9),
        .pid = (long long)getpid(),
        .cpu_ns = (long long)cpu.tv_sec * 1000000000LL + cpu.tv_nsec,
    };
    char line[ALIVE_LINE + 1];
    if (alive_line(line, sizeof line, &r) < 0)
        return;
    if (pwrite(c->alive_fd, line, ALIVE_LINE, 0) != ALIVE_LINE) {
        /* Said once: without its file the rank is never judged hung, nothing worse. */
        char text[128];
        shoal_log("writing the alive file of rank %d failed: %s; it is not watched for hangs",
                  c->rank, shoal_errno_text(errno, text, sizeof text));
        close(c->alive_fd);
        c->alive_fd = -1;
        return;
    }
    c->alive_at = now;
    c->alive_calls = c->calls;
}

void alive_close(struct shoal_ctx *c)
{
    if (c->alive_fd >= 0)
        close(c->alive_fd);
    c->alive_fd = -1;
}
