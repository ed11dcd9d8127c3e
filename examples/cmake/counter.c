/*
 * counter - the smallest Shoal program, built against an installed Shoal with CMake
 * (examples/cmake/CMakeLists.txt).
 *
 *   counter [STEPS [US_PER_STEP]]     (defaults: 1000 steps, 1000 microseconds each)
 *
 * At every step each rank adds rank + 1 to a total the ranks agree on (MPI_Allreduce).
 * The step and the total are protected, so after a lost rank the job resumes from the
 * newest checkpoint and still prints the total of an uninterrupted run:
 * STEPS * n(n+1)/2 for n ranks.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <shoal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static void check(int code, const char *call)
{
    if (code != SHOAL_SUCCESS) {
        fprintf(stderr, "counter: %s: %s\n", call, shoal_strerror(code));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int steps = argc > 1 ? atoi(argv[1]) : 1000;
    long pace_us = argc > 2 ? atol(argv[2]) : 1000;
    if (argc > 3 || steps < 1 || pace_us < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: counter [STEPS [US_PER_STEP]]  (STEPS >= 1)\n");
        MPI_Finalize();
        return 2;
    }

    check(shoal_init(MPI_COMM_WORLD), "shoal_init");
    int restarted = shoal_status() == 1;
    int step = 0;
    long long total = 0;
    check(shoal_protect(0, &step, 1, MPI_INT), "shoal_protect");
    check(shoal_protect(1, &total, 1, MPI_LONG_LONG), "shoal_protect");

    /* The sleep stands for an iteration's work, long enough to lose a rank mid-run. */
    struct timespec pause = {pace_us / 1000000, (pace_us % 1000000) * 1000};
    for (; step < steps; step++) {
        check(shoal_snapshot(), "shoal_snapshot"); /* restores step and total on a restart */
        if (restarted && rank == 0)
            printf("counter: resumed at step %d\n", step);
        restarted = 0;
        long long mine = rank + 1, sum;
        MPI_Allreduce(&mine, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
        total += sum;
        nanosleep(&pause, NULL);
    }
    if (rank == 0)
        printf("counter: total %lld after %d steps on %d ranks\n", total, steps, nranks);
    check(shoal_finalize(), "shoal_finalize");
    MPI_Finalize();
    return 0;
}
