/*
 * traffic-cost-prog.c - what counting the traffic (lib/src/pmpi.c) costs the calls it
 * counts, on loops of nothing but small messages. Run by bench/traffic-cost.
 *
 * Usage: traffic-cost-prog [MESSAGES [ROUNDS [both|with|without]]]
 *   (default 1000000, 5, both)
 *   Two kernels, each sending MESSAGES messages of 8 bytes in all, on 2 ranks or more:
 *     pingpong  ranks 2i and 2i+1 bounce a message with MPI_Send and MPI_Recv on
 *               MPI_COMM_WORLD (the cheapest counted call, on the fastest path)
 *     halo      each rank exchanges a message with both neighbours of a ring with
 *               MPI_Irecv, MPI_Isend and MPI_Waitall on a duplicate of MPI_COMM_WORLD
 *               (a communicator whose ranks must be looked up)
 *     self      each rank sends messages to itself with MPI_Irecv, MPI_Isend and
 *               MPI_Wait on the duplicate: no other rank's timing in the way, so the
 *               difference per message is the cost of counting one
 *   Each kernel runs ROUNDS rounds with counting and ROUNDS without (SHOAL_TRAFFIC=0),
 *   alternating, each between its own shoal_init and shoal_finalize, so that a change
 *   in the machine's load falls on both kinds alike. A round's time is its slowest
 *   rank's. Prints one row per kernel: the median time per message of each kind and
 *   their ratio. `with` or `without` runs only that kind (for perf stat, which counts
 *   the whole process); its rows then show the same time twice.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.h"
#include "stats.h"

#define MAX_ROUNDS 99

static int rank, nranks;
static int only = -1; /* 1: only rounds with counting, 0: only without, -1: both */

static void pingpong(long steps)
{
    int partner = rank ^ 1;
    double buf = 0;
    if (partner >= nranks)
        return; /* the odd rank out of an odd count */
    for (long i = 0; i < steps; i++) {
        if (rank % 2 == 0) {
            MPI_Send(&buf, 1, MPI_DOUBLE, partner, 0, MPI_COMM_WORLD);
            MPI_Recv(&buf, 1, MPI_DOUBLE, partner, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(&buf, 1, MPI_DOUBLE, partner, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(&buf, 1, MPI_DOUBLE, partner, 0, MPI_COMM_WORLD);
        }
    }
}

static MPI_Comm ring;

static void halo(long steps)
{
    int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
    double out[2] = {0, 0}, in[2];
    MPI_Request r[4];
    MPI_Status st[4];
    for (long i = 0; i < steps; i++) {
        MPI_Irecv(&in[0], 1, MPI_DOUBLE, left, 0, ring, &r[0]);
        MPI_Irecv(&in[1], 1, MPI_DOUBLE, right, 1, ring, &r[1]);
        MPI_Isend(&out[0], 1, MPI_DOUBLE, right, 0, ring, &r[2]);
        MPI_Isend(&out[1], 1, MPI_DOUBLE, left, 1, ring, &r[3]);
        MPI_Waitall(4, r, st);
    }
}

static void self(long steps)
{
    double out = 0, in;
    MPI_Request r[2];
    MPI_Status st[2];
    for (long i = 0; i < steps; i++) {
        MPI_Irecv(&in, 1, MPI_DOUBLE, rank, 0, ring, &r[0]);
        MPI_Isend(&out, 1, MPI_DOUBLE, rank, 0, ring, &r[1]);
        MPI_Waitall(2, r, st);
    }
}

static double round_time(void (*kernel)(long), long steps, int counting)
{
    if (only >= 0)
        counting = only;
    setenv("SHOAL_TRAFFIC", counting ? "1" : "0", 1);
    if (shoal_init(MPI_COMM_WORLD) != SHOAL_SUCCESS) {
        fprintf(stderr, "shoal_init failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    kernel(steps);
    double t = now() - t0, slowest;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    shoal_finalize();
    return slowest;
}

static void measure(const char *name, void (*kernel)(long), long steps, long messages,
                    int rounds)
{
    double with[MAX_ROUNDS], without[MAX_ROUNDS];
    kernel(steps / 10 + 1); /* warm up connections and caches */
    for (int i = 0; i < rounds; i++) {
        /* Which kind goes first alternates too. */
        int first = i % 2 == 0;
        double a = round_time(kernel, steps, first), b = round_time(kernel, steps, !first);
        with[i] = first ? a : b;
        without[i] = first ? b : a;
    }
    double on = median(with, rounds), off = median(without, rounds);
    if (rank == 0)
        printf("%-9s %9ld %12.1f %12.1f %8.4f\n", name, messages, on / (double)messages * 1e9,
               off / (double)messages * 1e9, on / off);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    long messages = argc > 1 ? atol(argv[1]) : 1000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (argc > 3 && strcmp(argv[3], "both") != 0)
        only = strcmp(argv[3], "with") == 0 ? 1 : strcmp(argv[3], "without") == 0 ? 0 : -2;
    if (nranks < 2 || messages < nranks || rounds < 1 || rounds > MAX_ROUNDS || only == -2) {
        if (rank == 0)
            fprintf(stderr,
                    "usage: traffic-cost-prog [MESSAGES [ROUNDS <= %d "
                    "[both|with|without]]] on 2 ranks or more\n",
                    MAX_ROUNDS);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &ring);
    if (rank == 0)
        printf("%-9s %9s %12s %12s %8s\n", "kernel", "messages", "with_ns/msg",
               "without_ns/msg", "ratio");
    /* A step of pingpong is 2 messages per pair; of halo, 2 per rank. */
    measure("pingpong", pingpong, messages / (nranks / 2 * 2), messages, rounds);
    measure("halo", halo, messages / (2 * nranks), messages, rounds);
    measure("self", self, messages / nranks, messages, rounds);
    MPI_Comm_free(&ring);
    MPI_Finalize();
    return 0;
}
