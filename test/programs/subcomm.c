/*
 * subcomm: a program that gives libshoal a communicator of its first ranks only, as
 * NAS MG does when run on more ranks than a power of two: ranks 0 to k-1, k the
 * largest power of two not above the run's count, compute and checkpoint; the others
 * are parked until the end and never call libshoal.
 *
 *   subcomm [--steps S] [--pace US]
 *
 * Each computing rank adds (step × (rank + 1)) mod 97 to its own sum at every step, a
 * per-rank region (shoal_protect), the step being the same on every rank
 * (shoal_protect_replicated). Rank 0 prints `subcomm: k of n ranks compute`, on a
 * restart `subcomm: resumed at step N`, and at the end `result: <sum over the ranks>`,
 * the same for any run of the same count, interrupted or not. --pace makes each step
 * last at least US microseconds.
 */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shoal.h>

enum { ID_STEP = 1, ID_SUM = 2 };

static void or_die(int rc, const char *what)
{
    if (rc != SHOAL_SUCCESS) {
        fprintf(stderr, "subcomm: %s: %s\n", what, shoal_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static void pace(long us)
{
    if (us > 0)
        nanosleep(&(struct timespec){us / 1000000, (us % 1000000) * 1000}, NULL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int world_rank, world_size;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    int steps = 400;
    long pace_us = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--steps") == 0)
            steps = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--pace") == 0)
            pace_us = atol(argv[i + 1]);
    }
    int k = 1;
    while (k * 2 <= world_size)
        k *= 2;
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank < k ? 0 : MPI_UNDEFINED, world_rank, &sub);
    if (sub == MPI_COMM_NULL) {
        MPI_Finalize(); /* parked */
        return 0;
    }
    int rank;
    MPI_Comm_rank(sub, &rank);
    or_die(shoal_init(sub), "shoal_init");
    int restarted = shoal_status() != SHOAL_FRESH;
    if (rank == 0)
        printf("subcomm: %d of %d ranks compute\n", k, world_size);

    int step = 0;
    long long sum = 0;
    or_die(shoal_protect_replicated(ID_STEP, &step, 1, MPI_INT), "shoal_protect_replicated");
    or_die(shoal_protect(ID_SUM, &sum, 1, MPI_LONG_LONG), "shoal_protect");
    for (; step < steps; step++) {
        or_die(shoal_snapshot(), "shoal_snapshot");
        if (restarted && rank == 0)
            printf("subcomm: resumed at step %d\n", step);
        restarted = 0;
        sum += ((long long)step * (rank + 1)) % 97;
        shoal_progress((double)(step + 1) / steps);
        pace(pace_us);
    }
    long long total = 0;
    MPI_Reduce(&sum, &total, 1, MPI_LONG_LONG, MPI_SUM, 0, sub);
    or_die(shoal_finalize(), "shoal_finalize");
    if (rank == 0)
        printf("result: %lld\n", total);
    MPI_Comm_free(&sub);
    MPI_Finalize();
    return 0;
}
