/*
 * test_traffic.c - the traffic files of a known pattern (docs/traffic.md), on 4 ranks or
 * more, built like a user's program against libshoal.so (shoal.pc), so that it tests
 * that linking with -lshoal is enough for libshoal to see the program's sends.
 *
 * First checkpoint: rank i sends K messages of B bytes to rank i+1 (mod n) with
 * MPI_Send on MPI_COMM_WORLD, and K more with MPI_Isend on a communicator whose ranks are
 * reversed, so that the destination's rank there is not its world rank. The file must
 * hold exactly 2K messages and 2KB bytes to rank i+1, and nothing else.
 * Second checkpoint: every other send call once, to rank i+2 (mod n), each with its own
 * size, plus one message to itself on MPI_COMM_SELF; sends to MPI_PROC_NULL and
 * collectives, which must not count; and WAIT_ROUNDS messages from each even rank to the
 * odd one after it, each sent after 1 ms of sleep, for which the odd rank waits inside
 * MPI_Recv. The file must hold the first checkpoint's counts plus exactly those, and the
 * odd ranks' estimated time in calls must have grown more than the even ranks'.
 *
 * Usage: test_traffic (in a scratch directory: it reads ./shoal-ckpt/test_traffic/)
 *   TRAFFIC_EXPECT=off: run with SHOAL_TRAFFIC=0; no traffic file may appear (the
 *   directory must then hold none).
 */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "shoal.h"

#define K 10
#define B 1000

struct count {
    long long bytes;
    long long messages;
};

struct file {
    int rank, nranks;
    long long epoch, first_epoch;
    double seconds_mpi, seconds_total;
    struct count *peers; /* nranks entries */
    int lines;
};

static int rank, nranks;

static void traffic_path(char *out, size_t len, int r)
{
    snprintf(out, len, "shoal-ckpt/test_traffic/traffic/%d", r);
}

/* Reads a traffic file; 0 on success, -1 if missing, -2 if malformed. */
static int read_file(int r, struct file *f)
{
    char path[256], line[256];
    traffic_path(path, sizeof path, r);
    FILE *in = fopen(path, "r");
    if (in == NULL)
        return -1;
    memset(f->peers, 0, sizeof *f->peers * (size_t)nranks);
    f->lines = 0;
    int rc = -2, end = 0;
    if (fgets(line, sizeof line, in) != NULL &&
        sscanf(line,
               "shoal-traffic 1 rank %d nranks %d epoch %lld first_epoch %lld seconds_mpi %lf "
               "seconds_total %lf\n%n",
               &f->rank, &f->nranks, &f->epoch, &f->first_epoch, &f->seconds_mpi,
               &f->seconds_total, &end) == 6 &&
        end == (int)strlen(line) && f->nranks == nranks) {
        rc = 0;
        int peer, prev = -1;
        long long bytes, messages;
        while (fgets(line, sizeof line, in) != NULL) {
            end = 0;
            if (sscanf(line, "%d %lld %lld\n%n", &peer, &bytes, &messages, &end) != 3 ||
                end != (int)strlen(line) || peer <= prev || peer >= nranks || messages < 1) {
                rc = -2;
                break;
            }
            f->peers[peer].bytes = bytes;
            f->peers[peer].messages = messages;
            prev = peer;
            f->lines++;
        }
    }
    fclose(in);
    return rc;
}

/* Waits for this rank's file to show an epoch above `above`: the writer thread writes
 * it after the shard, while the program goes on. */
static int wait_for_epoch(long long above, struct file *f)
{
    for (int i = 0; i < 1000; i++) {
        if (read_file(rank, f) == 0 && f->epoch > above)
            return 0;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    return -1;
}

/* Checks that f holds exactly want (nranks entries). */
static void check_counts(const struct file *f, const struct count *want, const char *what)
{
    int lines = 0;
    for (int p = 0; p < nranks; p++) {
        if (want[p].messages > 0)
            lines++;
        if (f->peers[p].bytes != want[p].bytes || f->peers[p].messages != want[p].messages) {
            fprintf(stderr,
                    "rank %d, %s: peer %d: %lld bytes in %lld messages, want %lld in %lld\n",
                    rank, what, p, f->peers[p].bytes, f->peers[p].messages, want[p].bytes,
                    want[p].messages);
            CHECK(!"counts as expected");
        }
    }
    CHECK_EQ(f->lines, lines);
}

/* Until the first checkpoint: the ring, half on MPI_COMM_WORLD, half on the reversed
 * communicator. */
static void ring(MPI_Comm reversed)
{
    int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    static int ints[B / sizeof(int)], in_ints[K][B / sizeof(int)];
    static double doubles[B / sizeof(double)], in_doubles[K][B / sizeof(double)];
    MPI_Request recv[2 * K], send[K];
    /* Statuses, not MPI_STATUSES_IGNORE: GCC reads MPICH's (MPI_Status *)1 as an array. */
    MPI_Status statuses[2 * K];
    for (int k = 0; k < K; k++) {
        MPI_Irecv(in_ints[k], B / sizeof(int), MPI_INT, left, k, MPI_COMM_WORLD, &recv[k]);
        MPI_Irecv(in_doubles[k], B / sizeof(double), MPI_DOUBLE, nranks - 1 - left, k, reversed,
                  &recv[K + k]);
    }
    for (int k = 0; k < K; k++)
        MPI_Send(ints, B / sizeof(int), MPI_INT, right, k, MPI_COMM_WORLD);
    for (int k = 0; k < K; k++)
        MPI_Isend(doubles, B / sizeof(double), MPI_DOUBLE, nranks - 1 - right, k, reversed,
                  &send[k]);
    MPI_Waitall(K, send, statuses);
    MPI_Waitall(2 * K, recv, statuses);
}

/* Until the second checkpoint: every other way to send, to the rank across (i + 2); returns the
 * bytes and messages sent to it. The partner does the same, so each send has its receive. */
static struct count across(void)
{
    int to = (rank + 2) % nranks, from = (rank + nranks - 2) % nranks;
    struct count sent = {0, 0};
    char in[4096], out[4096];
    memset(out, 1, sizeof out);
    MPI_Request r, s;

    MPI_Irecv(in, 3, MPI_INT, from, 1, MPI_COMM_WORLD, &r);
    MPI_Ssend(out, 3, MPI_INT, to, 1, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    sent.bytes += 3 * 4, sent.messages++;

    MPI_Irecv(in, 5, MPI_CHAR, from, 2, MPI_COMM_WORLD, &r);
    MPI_Issend(out, 5, MPI_CHAR, to, 2, MPI_COMM_WORLD, &s);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    sent.bytes += 5, sent.messages++;

    int bsize = 2 * (64 + MPI_BSEND_OVERHEAD);
    void *bbuf = malloc((size_t)bsize);
    MPI_Buffer_attach(bbuf, bsize);
    MPI_Irecv(in, 7, MPI_SHORT, from, 3, MPI_COMM_WORLD, &r);
    MPI_Bsend(out, 7, MPI_SHORT, to, 3, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    sent.bytes += 7 * 2, sent.messages++;
    MPI_Irecv(in, 2, MPI_DOUBLE, from, 4, MPI_COMM_WORLD, &r);
    MPI_Ibsend(out, 2, MPI_DOUBLE, to, 4, MPI_COMM_WORLD, &s);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    sent.bytes += 2 * 8, sent.messages++;
    MPI_Buffer_detach(&bbuf, &bsize);
    free(bbuf);

    /* Ready mode: the partner's receive is posted before the barrier. */
    MPI_Irecv(in, 4, MPI_FLOAT, from, 5, MPI_COMM_WORLD, &r);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Rsend(out, 4, MPI_FLOAT, to, 5, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    sent.bytes += 4 * 4, sent.messages++;
    MPI_Irecv(in, 1, MPI_LONG_LONG, from, 6, MPI_COMM_WORLD, &r);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Irsend(out, 1, MPI_LONG_LONG, to, 6, MPI_COMM_WORLD, &s);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    sent.bytes += 8, sent.messages++;

    MPI_Sendrecv(out, 6, MPI_INT, to, 7, in, 6, MPI_INT, from, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    sent.bytes += 6 * 4, sent.messages++;
    char replace[9] = {0};
    MPI_Sendrecv_replace(replace, 9, MPI_CHAR, to, 8, from, 8, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
    sent.bytes += 9, sent.messages++;

    /* A derived type counts its size, and an empty message counts as a message. */
    MPI_Datatype triple;
    MPI_Type_contiguous(3, MPI_DOUBLE, &triple);
    MPI_Type_commit(&triple);
    MPI_Irecv(in, 2, triple, from, 9, MPI_COMM_WORLD, &r);
    MPI_Send(out, 2, triple, to, 9, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Type_free(&triple);
    sent.bytes += 2 * 24, sent.messages++;
    MPI_Irecv(in, 0, MPI_INT, from, 10, MPI_COMM_WORLD, &r);
    MPI_Send(out, 0, MPI_INT, to, 10, MPI_COMM_WORLD);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    sent.messages++;

    /* Persistent: each start is a message; the request is known only through its init. */
    MPI_Request p[2];
    MPI_Status statuses[2];
    MPI_Recv_init(in, 11, MPI_INT, from, 11, MPI_COMM_WORLD, &p[0]);
    MPI_Send_init(out, 11, MPI_INT, to, 11, MPI_COMM_WORLD, &p[1]);
    for (int i = 0; i < 2; i++) {
        MPI_Start(&p[0]);
        MPI_Start(&p[1]);
        MPI_Waitall(2, p, statuses);
    }
    MPI_Startall(2, p);
    MPI_Waitall(2, p, statuses);
    MPI_Request_free(&p[0]);
    MPI_Request_free(&p[1]);
    sent.bytes += 3 * 11 * 4, sent.messages += 3;

    /* Not counted: no destination, and collectives. */
    MPI_Send(out, 100, MPI_CHAR, MPI_PROC_NULL, 12, MPI_COMM_WORLD);
    MPI_Isend(out, 100, MPI_CHAR, MPI_PROC_NULL, 12, MPI_COMM_WORLD, &s);
    MPI_Wait(&s, MPI_STATUS_IGNORE);
    MPI_Sendrecv(out, 100, MPI_CHAR, MPI_PROC_NULL, 12, in, 100, MPI_CHAR, MPI_PROC_NULL, 12,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    double x = rank, sum;
    MPI_Allreduce(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(out, 1000, MPI_CHAR, 0, MPI_COMM_WORLD);
    MPI_Alltoall(out, 8, MPI_CHAR, in, 8, MPI_CHAR, MPI_COMM_WORLD);
    return sent;
}

/* Odd ranks wait in MPI_Recv while the even rank before them sleeps WAIT_ROUNDS times
 * 1 ms before each send: the odd ranks' time in calls grows by about WAIT_ROUNDS ms, the
 * even ranks' hardly at all. Nothing is sent by an odd last rank (n odd: it has no
 * partner). */
#define WAIT_ROUNDS 200

static struct count waits(void)
{
    struct count sent = {0, 0};
    int token = 0;
    for (int i = 0; i < WAIT_ROUNDS; i++) {
        if (rank % 2 == 0 && rank + 1 < nranks) {
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            MPI_Send(&token, 1, MPI_INT, rank + 1, 14, MPI_COMM_WORLD);
            sent.bytes += 4, sent.messages++;
        } else if (rank % 2 == 1) {
            MPI_Recv(&token, 1, MPI_INT, rank - 1, 14, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
    }
    return sent;
}

/* Sums the checks of every rank; rank 0 prints the closing line. */
static int summary(const char *mode)
{
    int local[2] = {check_passed, check_failed}, total[2];
    MPI_Allreduce(local, total, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("(%d ranks, %s) ", nranks, mode);
        check_summary(total[0], total[1]);
    }
    return total[1] == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    snprintf(check_prefix, sizeof check_prefix, "rank %d: ", rank);
    if (nranks < 4) {
        if (rank == 0)
            fprintf(stderr, "test_traffic needs 4 ranks or more (i+1 and i+2 must differ "
                            "from i and each other)\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    const char *mode = getenv("TRAFFIC_EXPECT");
    int off = mode != NULL && strcmp(mode, "off") == 0;

    /* Sent before shoal_init: not counted. */
    int token = rank, got;
    MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % nranks, 0, &got, 1, MPI_INT,
                 (rank + nranks - 1) % nranks, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);

    static char state[1024];
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, state, sizeof state, MPI_CHAR), SHOAL_SUCCESS);
    MPI_Comm reversed;
    MPI_Comm_split(MPI_COMM_WORLD, 0, nranks - 1 - rank, &reversed);

    struct file f = {0};
    f.peers = calloc((size_t)nranks, sizeof *f.peers);
    struct count *want = calloc((size_t)nranks, sizeof *want);
    /* A file left by an earlier run in the same directory has an older epoch: this
     * run's epochs start above every epoch there. */
    long long first = 0;
    if (read_file(rank, &f) == 0)
        first = f.epoch;

    ring(reversed);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    want[(rank + 1) % nranks] = (struct count){2 * K * B, 2 * K};
    if (!off && CHECK_EQ(wait_for_epoch(first, &f), 0)) {
        first = f.epoch;
        CHECK_EQ(f.rank, rank);
        CHECK_EQ(f.first_epoch, first);
        CHECK(f.seconds_total > 0 && f.seconds_mpi >= 0);
        check_counts(&f, want, "first checkpoint");
    }

    double mpi_before = f.seconds_mpi;
    struct count sent = across();
    struct count waited = waits();
    int me[2] = {rank, rank + 100}, back[2];
    MPI_Sendrecv(me, 2, MPI_INT, 0, 13, back, 2, MPI_INT, 0, 13, MPI_COMM_SELF,
                 MPI_STATUS_IGNORE);
    CHECK_EQ(back[1], rank + 100);
    want[(rank + 2) % nranks] = sent;
    want[rank] = (struct count){2 * 4, 1};
    if (waited.messages > 0)
        want[rank + 1].bytes += waited.bytes, want[rank + 1].messages += waited.messages;
    MPI_Comm_free(&reversed);
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    /* shoal_finalize waited for the last write. */
    double waited_mpi = 0;
    if (off) {
        CHECK_EQ(read_file(rank, &f), -1);
    } else if (CHECK_EQ(read_file(rank, &f), 0)) {
        CHECK_EQ(f.epoch, first + 1);
        CHECK_EQ(f.first_epoch, first);
        check_counts(&f, want, "second checkpoint");
        /* The time is sampled (one call in up to 64), but after the first sampled wait
         * every wait is: an odd rank's estimate holds most of its 200 ms. */
        waited_mpi = f.seconds_mpi - mpi_before;
        if (rank % 2 == 1)
            CHECK(waited_mpi >= 0.05);
        CHECK(f.seconds_mpi >= 0 && f.seconds_mpi <= f.seconds_total + 0.01);
    }
    double all[2] = {rank % 2 == 1 ? waited_mpi : 0, rank % 2 == 0 ? waited_mpi : 0}, sum[2];
    MPI_Allreduce(all, sum, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    if (!off && rank == 0)
        CHECK(sum[1] < sum[0]); /* the even ranks spent less time in calls */
    /* Sent after shoal_finalize: not counted either (the file above is final anyway). */
    MPI_Sendrecv(&token, 1, MPI_INT, (rank + 1) % nranks, 0, &got, 1, MPI_INT,
                 (rank + nranks - 1) % nranks, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    free(f.peers);
    free(want);
    int status = summary(off ? "SHOAL_TRAFFIC=0" : "counting");
    MPI_Finalize();
    return status;
}
