/*
 * agree.c - the snapshot agreement and epoch completion (docs/launcher-protocol.md,
 * "When a checkpoint happens"): the messages in which the ranks decide together. Each
 * function returns what was decided (checkpoint now, hold after it, the next K, an error
 * on some rank); shoal.c acts on it.
 *
 * shoal_snapshot is called once per iteration and must cost next to nothing, so the
 * ranks only talk every K calls: one MPI_Allreduce(MPI_MAX) of a few ints carrying
 * rank 0's decision and the next K (other ranks contribute 0), and each rank's
 * progress writing shards, from which every rank derives the same newest complete
 * epoch without further messages.
 *
 * A request whose content is `hold` makes every rank, after that checkpoint, wait for
 * its shard to be written and then sleep until the launcher kills it: the relaunch that
 * follows (a node leaving, a rebalance) starts from that checkpoint and computes no step
 * twice.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Slots of the agreement message. */
enum {
    MSG_CHECKPOINT, /* rank 0: checkpoint now */
    MSG_K,          /* rank 0: calls until the next agreement */
    MSG_WRITTEN,    /* -(newest epoch written): the max is minus the minimum */
    MSG_FAILED,     /* newest failed epoch that a later written epoch hides */
    MSG_IO_ERROR,   /* a write failed since the last agreement */
    MSG_HOLD,       /* rank 0: after this checkpoint, hold until killed */
    MSG_UNREADY,    /* a rank's staging buffer is still being made: no checkpoint yet */
    MSG_LEN
};

#define AGREE_SHARE    0.001 /* agreements may cost 0.1% of the caller's time */
#define AGREE_WINDOW_S 0.2   /* and run at least this often, to see requests quickly */
#define AGREE_K_MAX    100000
/* K grows at most 4x per agreement: a few fast calls must not commit the ranks to a
 * huge K if the calls then slow down. */
#define AGREE_K_GROWTH 4.0
/* A holding rank wakes this often to check SHOAL_HOLD_TIMEOUT. */
#define HOLD_SLEEP_S 0.05

int agree_error(struct shoal_ctx *c, int code, const char *msg)
{
    int in[2] = {code != SHOAL_SUCCESS ? c->rank : c->nranks, code}, out[2];
    if (MPI_Allreduce(in, out, 1, MPI_2INT, MPI_MINLOC, c->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    if (out[0] == c->nranks)
        return SHOAL_SUCCESS;
    if (out[0] == c->rank && msg != NULL && msg[0] != 0)
        shoal_log("%s", msg);
    return out[1];
}

static uint64_t created_ns_of(struct shoal_ctx *c, long long epoch)
{
    int slot = (int)(epoch % CREATED_RING);
    if (c->created[slot].epoch == epoch)
        return c->created[slot].created_ns;
    return shoal_wall_ns();
}

void agree_note_complete(struct shoal_ctx *c, const struct manifest_entry *e)
{
    if (c->ncomplete == 2) {
        c->complete[0] = c->complete[1];
        c->complete[1] = *e;
    } else {
        c->complete[c->ncomplete++] = *e;
    }
}

/* An epoch is complete when every rank wrote its shard. Rank r has written every epoch
 * in (failed_r, written_r], so the newest complete epoch is min(written) provided it is
 * above every such failed_r. */
static void commit(struct shoal_ctx *c, long long min_written, long long failed)
{
    if (min_written <= c->committed || min_written <= failed)
        return;
    c->committed = min_written;
    struct manifest_entry e = {min_written, c->nranks,
                               (long long)created_ns_of(c, min_written)};
    agree_note_complete(c, &e);
    /* On a cluster the coordinator removes epochs, once it has newer ones durable:
     * epochs complete among the ranks may not be durable yet, and a node holds other
     * ranks' copies in the same directories. */
    long long prune_below = c->ncomplete == 2 && !c->cfg.keep_epochs ? c->complete[0].epoch : 0;
    writer_commit(&c->writer, c->complete, c->ncomplete, prune_below);
}

int agree_exchange(struct shoal_ctx *c, int checkpoint, int hold, int k, int unready,
                   struct exchange *out)
{
    long long written, failed;
    int errors;
    writer_poll(&c->writer, &written, &failed, &errors);
    int in[MSG_LEN], res[MSG_LEN];
    in[MSG_CHECKPOINT] = checkpoint;
    in[MSG_K] = k;
    in[MSG_WRITTEN] = -(int)written;
    /* A failure older than the newest written epoch leaves a hole; one newer than it
     * does not matter, as nothing above `written` is claimed. */
    in[MSG_FAILED] = failed < written ? (int)failed : 0;
    in[MSG_IO_ERROR] = errors > 0;
    in[MSG_HOLD] = hold;
    /* Every rank says whether its staging buffer is ready, since only rank 0 knows
     * whether a checkpoint is asked for; a program's own checkpoint and the last
     * agreement ask for none here, so they never wait for it. */
    in[MSG_UNREADY] = unready;
    if (MPI_Allreduce(in, res, MSG_LEN, MPI_INT, MPI_MAX, c->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    out->postponed = res[MSG_CHECKPOINT] && res[MSG_UNREADY];
    out->checkpoint = res[MSG_CHECKPOINT] && !res[MSG_UNREADY];
    out->k = res[MSG_K];
    out->io_error = res[MSG_IO_ERROR];
    out->hold = res[MSG_HOLD];
    commit(c, -(long long)res[MSG_WRITTEN], res[MSG_FAILED]);
    return SHOAL_SUCCESS;
}

/* The request is renamed before it is read: rename both tests for it and consumes it
 * in one system call (the common case, no request, costs just that), and a request the
 * runner makes meanwhile (written whole, then renamed into place) is neither half read
 * nor deleted unread: it waits for the next agreement. */
int agree_take_request(struct shoal_ctx *c)
{
    if (rename(c->request_path, c->request_taken_path) != 0)
        return REQUEST_NONE;
    char text[64];
    size_t n = 0;
    int fd = open(c->request_taken_path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        while (n < sizeof text - 1) {
            ssize_t got = read(fd, text + n, sizeof text - 1 - n);
            if (got < 0 && errno == EINTR)
                continue;
            if (got <= 0)
                break;
            n += (size_t)got;
        }
        close(fd);
    }
    unlink(c->request_taken_path);
    text[n] = 0;
    /* One word, `hold`, with any white space around it; empty: a plain checkpoint. */
    char *word = text;
    while (*word == ' ' || *word == '\t' || *word == '\r' || *word == '\n')
        word++;
    size_t len = strlen(word);
    while (len > 0 && (word[len - 1] == ' ' || word[len - 1] == '\t' || word[len - 1] == '\r' ||
                       word[len - 1] == '\n'))
        word[--len] = 0;
    if (strcmp(word, "hold") == 0)
        return REQUEST_HOLD;
    if (fd < 0)
        shoal_log("reading %s failed; checkpointing without holding", c->request_path);
    else if (len > 0)
        shoal_log("%s: unknown request \"%.40s\"; checkpointing without holding",
                  c->request_path, word);
    return REQUEST_CHECKPOINT;
}

static int agree_due(struct shoal_ctx *c, double now, int *hold)
{
    int due = c->cfg.interval_s > 0 && now - c->t_checkpoint >= c->cfg.interval_s;
    int request = c->request_postponed;
    c->request_postponed = REQUEST_NONE;
    if (request == REQUEST_NONE)
        request = agree_take_request(c);
    *hold = request == REQUEST_HOLD;
    return due || request != REQUEST_NONE;
}

void agree_hold(struct shoal_ctx *c, long long epoch)
{
    if (c->cfg.hold_timeout_s <= 0)
        return;
    /* Holding only spares work once the shard is on disk: fsynced and renamed. */
    writer_wait_idle(&c->writer);
    /* The program's own buffered output up to the checkpoint, which the relaunch will
     * not print again, must not die with the process. */
    fflush(NULL);
    if (c->rank == 0)
        shoal_log("checkpoint epoch %lld taken for a relaunch; holding", epoch);
    /* No MPI and no CPU: the launcher kills the ranks once the epoch is durable. If
     * nobody does (a coordinator lost meanwhile), the job must not freeze forever. */
    double start = shoal_now(), left;
    while ((left = c->cfg.hold_timeout_s - (shoal_now() - start)) > 0) {
        double s = left < HOLD_SLEEP_S ? left : HOLD_SLEEP_S;
        struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
        nanosleep(&ts, NULL);
    }
    shoal_log("rank %d held for %g s after a checkpoint and nobody stopped the job; "
              "continuing",
              c->rank, c->cfg.hold_timeout_s);
}

static int agree_next_k(struct shoal_ctx *c, double now)
{
    double per_call = (now - c->t_agreed) / c->k;
    if (per_call < 1e-9)
        per_call = 1e-9;
    double window = AGREE_WINDOW_S;
    if (c->cfg.interval_s > 0 && c->cfg.interval_s / 2 < window)
        window = c->cfg.interval_s / 2;
    double k_cost = c->agree_cost / (AGREE_SHARE * per_call);
    double k_window = window / per_call;
    /* Agree as often as the window asks when that is cheap enough; otherwise cost wins. */
    double k = k_window >= k_cost ? k_window : k_cost;
    if (k > AGREE_K_GROWTH * c->k)
        k = AGREE_K_GROWTH * c->k;
    if (k > AGREE_K_MAX)
        k = AGREE_K_MAX;
    return k < 1 ? 1 : (int)k;
}

/* The cost of one agreement is what the allreduce costs when the ranks arrive
 * together. Waiting for a rank that arrives late is not counted: it only moves the
 * wait from the application's own next collective to this one, and counting it would
 * make K, and the time between agreements, grow with every bit of imbalance. So the
 * estimate is the lowest time seen, starting from a calibration at shoal_init. */
static void note_agree_cost(struct shoal_ctx *c, double seconds)
{
    if (c->agree_cost <= 0 || seconds < c->agree_cost)
        c->agree_cost = seconds;
}

int agree_calibrate(struct shoal_ctx *c)
{
    int in[MSG_LEN] = {0}, out[MSG_LEN];
    if (MPI_Barrier(c->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    for (int i = 0; i < 3; i++) {
        double t0 = shoal_now();
        if (MPI_Allreduce(in, out, MSG_LEN, MPI_INT, MPI_MAX, c->comm) != MPI_SUCCESS)
            return SHOAL_ERR_MPI;
        note_agree_cost(c, shoal_now() - t0);
    }
    return SHOAL_SUCCESS;
}

int agree_snapshot(struct shoal_ctx *c, double now, int unready, struct exchange *out)
{
    int due = 0, hold = 0, k = 0;
    if (c->rank == 0) {
        due = agree_due(c, now, &hold);
        k = agree_next_k(c, now);
    }
    double t0 = shoal_now();
    int rc = agree_exchange(c, due, hold, k, unready, out);
    if (rc != SHOAL_SUCCESS)
        return rc;
    if (c->rank == 0)
        note_agree_cost(c, shoal_now() - t0);
    c->agreements++;
    c->k = out->k;
    c->countdown = out->k;
    /* A checkpoint put off until every staging buffer is made: at the next agreement,
     * the runner's request (taken from its file now) with it. */
    if (out->postponed && c->rank == 0)
        c->request_postponed = hold ? REQUEST_HOLD : REQUEST_CHECKPOINT;
    return SHOAL_SUCCESS;
}
