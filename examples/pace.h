/*
 * pace.h - a floor on how long one unit of work takes, for demos and tests.
 *
 * The examples take `--pace US`: every step (heat) or round (nqueens) lasts at least US
 * microseconds, sleeping for what the computation left over. A run then lasts about as long
 * on a fast machine as on a slow one, long enough to watch it, kill a rank or a node
 * mid-run, and see it recover. 0, the default, adds nothing. Include it after defining
 * _POSIX_C_SOURCE (for nanosleep).
 */
#ifndef SHOAL_EXAMPLE_PACE_H
#define SHOAL_EXAMPLE_PACE_H

#include <mpi.h>
#include <time.h>

/* Sleeps until `pace_us` microseconds have passed since `start` (an MPI_Wtime value). */
static inline void pace_wait(double start, long pace_us)
{
    double left = start + pace_us * 1e-6 - MPI_Wtime();
    if (pace_us <= 0 || left <= 0)
        return;
    struct timespec ts = {(time_t)left, (long)((left - (time_t)left) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

#endif
