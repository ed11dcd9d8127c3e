/*
 * snapshot-cost-prog.c - what calling shoal_snapshot every iteration costs a loop whose
 * iterations take US microseconds of computation (DESIGN.md: the agreement on whether a
 * checkpoint is due costs < 0.1 % of an iteration). Run by bench/snapshot-cost.
 *
 * Usage: snapshot-cost-prog US SECONDS
 *   Calibrates a fixed amount of arithmetic that takes about US microseconds, then runs
 *   the loop for about SECONDS in rounds that alternate: without shoal_snapshot, with it.
 *   Prints one row: US, iterations per round, the median per-iteration time of each kind,
 *   their ratio, and (from SHOAL_STATS, written at shoal_finalize) the agreements made,
 *   the calls between two agreements, and two shares of the snapshot rounds' time: the
 *   agreements at what one costs when the ranks arrive together (agreement_cost_s), and
 *   the time actually spent in them, waits for late ranks included (agreeing_s). The
 *   first is what the target bounds; the second also shows the imbalance of the
 *   machine the ranks share (a wait the next collective would otherwise take). No
 *   checkpoint is taken
 *   (SHOAL_CKPT_INTERVAL=0), so what is measured is deciding, not checkpointing.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "shoal.h"
#include "stats.h"

#define ROUNDS 10 /* of each kind */

/* A dependent chain of multiply-adds: the same work every call, no memory traffic. */
static double work(long n, double x)
{
    for (long i = 0; i < n; i++)
        x = x * 0.999999 + 1e-9;
    return x;
}

/* One round: iters iterations, with or without the snapshot call; the slowest rank's
 * time per iteration (the loop would end with its slowest rank's next collective). */
static double round_time(long n, long iters, int snapshot, double *sink)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now(), x = *sink;
    for (long i = 0; i < iters; i++) {
        x = work(n, x);
        if (snapshot && shoal_snapshot() != SHOAL_SUCCESS) {
            fprintf(stderr, "shoal_snapshot failed\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    double mine = (now() - t0) / (double)iters, slowest;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    *sink = x;
    return slowest;
}

/* The last line of the SHOAL_STATS file: agreements, agreeing_s, agreement_cost_s. */
static int read_stats(const char *path, long long *agreements, double *agreeing, double *cost)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    char line[1024], last[1024] = "";
    while (fgets(line, sizeof line, f) != NULL)
        strcpy(last, line);
    fclose(f);
    const char *a = strstr(last, "\"agreements\":"), *s = strstr(last, "\"agreeing_s\":");
    const char *k = strstr(last, "\"agreement_cost_s\":");
    if (a == NULL || s == NULL || k == NULL)
        return -1;
    *agreements = atoll(a + strlen("\"agreements\":"));
    *agreeing = atof(s + strlen("\"agreeing_s\":"));
    *cost = atof(k + strlen("\"agreement_cost_s\":"));
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const char *stats = getenv("SHOAL_STATS");
    if (argc != 3 || atof(argv[1]) <= 0 || atof(argv[2]) <= 0 || stats == NULL) {
        if (rank == 0)
            fprintf(stderr, "usage: SHOAL_STATS=FILE snapshot-cost-prog US SECONDS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    double us = atof(argv[1]), seconds = atof(argv[2]), sink = 1;
    if (shoal_init(MPI_COMM_WORLD) != SHOAL_SUCCESS) {
        fprintf(stderr, "shoal_init failed\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }

    /* Calibrate on rank 0 and share, so that every rank does the same work. */
    long n = 1000;
    if (rank == 0) {
        for (;;) {
            double t0 = now();
            sink = work(n, sink);
            double t = now() - t0;
            if (t > 0.01) {
                n = (long)((double)n * us * 1e-6 / t);
                break;
            }
            n *= 2;
        }
        if (n < 1)
            n = 1;
    }
    MPI_Bcast(&n, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    long iters = (long)(seconds / (2.0 * ROUNDS) / (us * 1e-6));
    if (iters < 1)
        iters = 1;

    double plain[ROUNDS], snap[ROUNDS], snap_total = 0;
    round_time(n, iters, 1, &sink); /* warm-up: K settles */
    for (int r = 0; r < ROUNDS; r++) {
        plain[r] = round_time(n, iters, 0, &sink);
        snap[r] = round_time(n, iters, 1, &sink);
        snap_total += snap[r] * (double)iters;
    }
    double mp = median(plain, ROUNDS), ms = median(snap, ROUNDS);
    shoal_finalize();

    if (rank == 0) {
        long long agreements = 0;
        double agreeing = 0, cost = 0;
        if (read_stats(stats, &agreements, &agreeing, &cost) != 0) {
            fprintf(stderr, "snapshot-cost-prog: no statistics line in %s\n", stats);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* The warm-up round's agreements are in the count too: scale to the measured
         * rounds' share of the snapshot calls. */
        double measured = (double)ROUNDS / (ROUNDS + 1);
        printf("%8.0f %10ld %11.3f %12.3f %7.4f %11lld %10.0f %9.2f %8.4f %8.4f\n", us, iters,
               mp * 1e6, ms * 1e6, ms / mp, agreements,
               (double)iters * (ROUNDS + 1) / (double)(agreements > 0 ? agreements : 1),
               cost * 1e6, 100 * (double)agreements * cost * measured / snap_total,
               100 * agreeing * measured / snap_total);
    }
    MPI_Finalize();
    return sink == 42 ? 3 : 0; /* keeps the work from being optimised away */
}
