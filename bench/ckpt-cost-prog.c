/*
 * ckpt-cost-prog.c - how long shoal_checkpoint blocks the caller, compared with a plain
 * memcpy of the same bytes measured in the same run (DESIGN.md target: blocking time of
 * a checkpoint ~ memcpy of the protected state). Run by bench/ckpt-cost.
 *
 * Usage: ckpt-cost-prog [-r REPS] MB...
 *   Needs SHOAL_DIR, SHOAL_JOB and SHOAL_EPOCH_BASE=1 so that it can tell when each
 *   shard has been written: every checkpoint is measured with the previous one fully
 *   written, as with any sensible checkpoint interval.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "shoal.h"
#include "stats.h"

/* Busy-waits instead of sleeping: on virtual machines a vCPU that went idle comes
 * back slow for a while, which would make whichever measurement follows a sleep noisy. */
static void spin(double seconds)
{
    double end = now() + seconds;
    while (now() < end)
        ;
}

/* Waits until this rank's shard of epoch is in place, then lets the writer finish its
 * bookkeeping (manifest, pruning), so that nothing runs behind the next measurement. */
static void wait_written(long long epoch, int rank)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/e%08lld/r%06d.shard", getenv("SHOAL_DIR"),
             getenv("SHOAL_JOB"), epoch, rank);
    struct stat st;
    for (int i = 0; i < 60000 && stat(path, &st) != 0; i++)
        spin(0.001);
    spin(0.15);
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks, reps = 7, first = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc > 2 && strcmp(argv[1], "-r") == 0) {
        reps = atoi(argv[2]);
        first = 3;
    }
    if (first >= argc || reps < 1 || getenv("SHOAL_DIR") == NULL ||
        getenv("SHOAL_JOB") == NULL) {
        if (rank == 0)
            fprintf(stderr, "usage: SHOAL_DIR=... SHOAL_JOB=... SHOAL_EPOCH_BASE=1 "
                            "ckpt-cost-prog [-r REPS] MB...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rc = shoal_init(MPI_COMM_WORLD);
    if (rc != SHOAL_SUCCESS) {
        fprintf(stderr, "shoal_init: %s\n", shoal_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (rank == 0)
        printf("%d ranks; per round the slowest rank, median of %d rounds\n"
               "%8s %14s %14s %8s\n",
               nranks, reps, "MB/rank", "checkpoint_s", "memcpy_s", "ratio");

    long long epoch = 0;
    double *ckpt = malloc(sizeof *ckpt * (size_t)reps);
    double *copy = malloc(sizeof *copy * (size_t)reps);
    int worst_ratio_ok = 1;
    for (int a = first; a < argc; a++) {
        size_t bytes = (size_t)atol(argv[a]) << 20;
        size_t n = bytes / sizeof(double);
        double *state = malloc(bytes), *dst = malloc(bytes);
        if (state == NULL || dst == NULL) {
            fprintf(stderr, "rank %d: out of memory for %zu MB\n", rank, bytes >> 20);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (size_t i = 0; i < n; i++)
            state[i] = (double)i + rank;
        memset(dst, 1, bytes); /* faulted in, like the application's own memory */
        rc = shoal_protect(1, state, n, MPI_DOUBLE);
        if (rc != SHOAL_SUCCESS) {
            fprintf(stderr, "shoal_protect: %s\n", shoal_strerror(rc));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        for (int r = 0; r < reps; r++) {
            /* An unmeasured copy first, so that neither measurement is the first thing
             * after the idle wait below (caches, clock frequency). */
            memcpy(dst, state, bytes);
            MPI_Barrier(MPI_COMM_WORLD);
            double t0 = now();
            memcpy(dst, state, bytes);
            copy[r] = now() - t0;
            state[r] += 1; /* live data */
            MPI_Barrier(MPI_COMM_WORLD);
            t0 = now();
            rc = shoal_checkpoint();
            ckpt[r] = now() - t0;
            if (rc != SHOAL_SUCCESS) {
                fprintf(stderr, "shoal_checkpoint: %s\n", shoal_strerror(rc));
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
            wait_written(++epoch, rank);
            /* A collective call ends with its slowest rank, and so would the
             * application's next collective after a plain memcpy: compare the slowest
             * rank's times of each round. */
            double mine[2] = {ckpt[r], copy[r]}, slowest[2];
            MPI_Allreduce(mine, slowest, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            ckpt[r] = slowest[0];
            copy[r] = slowest[1];
            if (rank == 0 && getenv("CKPT_COST_VERBOSE") != NULL)
                fprintf(stderr, "%zu MB round %d: checkpoint %.6f s, memcpy %.6f s\n",
                        bytes >> 20, r, ckpt[r], copy[r]);
        }
        double worst[2] = {median(ckpt, reps), median(copy, reps)};
        if (rank == 0) {
            double ratio = worst[0] / worst[1];
            printf("%8zu %14.6f %14.6f %8.2f\n", bytes >> 20, worst[0], worst[1], ratio);
            fflush(stdout);
            worst_ratio_ok &= ratio <= 1.5;
        }
        if (dst[n - 1] < 0) /* keeps the copy from being optimised away */
            printf("?\n");
        free(dst);
        /* The library holds the pointer until it is re-protected or unprotected. */
        shoal_unprotect(1);
        free(state);
    }
    rc = shoal_finalize();
    if (rc != SHOAL_SUCCESS)
        fprintf(stderr, "shoal_finalize: %s\n", shoal_strerror(rc));
    if (rank == 0)
        printf("target ratio <= 1.5: %s\n", worst_ratio_ok ? "met" : "NOT met");
    free(ckpt);
    free(copy);
    MPI_Finalize();
    return 0;
}
