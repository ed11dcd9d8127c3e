/*
 * ring - a communication-heavy MPI job whose talking pairs are not neighbouring rank
 * numbers, for bench/placement.
 *
 *   ring [--kb K] [--iters N] [--work W] [--shuffle SEED]
 *
 * Every iteration each rank computes W million loop turns, then sends K KiB to the next
 * rank of a ring and receives K KiB from the previous one (MPI_Sendrecv). The ring's order
 * is the ranks shuffled by SEED (a fixed permutation every rank computes alike; 0 keeps
 * the natural order 0, 1, 2, ...), so a layout of contiguous blocks of rank numbers puts
 * most talking pairs on different nodes. With --kb large and --work small the job is
 * communication-heavy; with --kb 0 and --work large it is compute-heavy (like ep).
 *
 * The iteration counter and the buffer are protected with libshoal; shoal_snapshot is
 * called at the start of every iteration. The last lines are `time: S s` (the loop's wall
 * time on rank 0) and `checksum: X`, which does not depend on the layout.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal_off.h"

typedef struct {
    long kb;
    long iters;
    long work; /* million loop turns per iteration */
    unsigned shuffle;
} options;

static int parse(int argc, char **argv, options *o)
{
    *o = (options){.kb = 1024, .iters = 100, .work = 1, .shuffle = 1};
    for (int i = 1; i < argc; i++) {
        long *target = NULL;
        if (strcmp(argv[i], "--kb") == 0)
            target = &o->kb;
        else if (strcmp(argv[i], "--iters") == 0)
            target = &o->iters;
        else if (strcmp(argv[i], "--work") == 0)
            target = &o->work;
        else if (strcmp(argv[i], "--shuffle") == 0) {
            if (i + 1 == argc)
                return -1;
            o->shuffle = (unsigned)strtoul(argv[++i], NULL, 10);
            continue;
        }
        if (target == NULL || i + 1 == argc)
            return -1;
        char *end;
        *target = strtol(argv[++i], &end, 10);
        if (*end != '\0' || *target < 0)
            return -1;
    }
    return 0;
}

/* order fills perm with 0..n-1 shuffled by seed (Fisher-Yates over a xorshift). */
static void order(int *perm, int n, unsigned seed)
{
    for (int i = 0; i < n; i++)
        perm[i] = i;
    if (seed == 0)
        return;
    uint32_t x = seed * 2654435761u + 1;
    for (int i = n - 1; i > 0; i--) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        int j = (int)(x % (uint32_t)(i + 1));
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static volatile double sink;

static void compute(long millions)
{
    double a = 1.0;
    for (long i = 0; i < millions * 1000000; i++)
        a = a * 1.0000001 + 1e-9;
    sink = a;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    options o;
    if (parse(argc, argv, &o) != 0) {
        if (rank == 0)
            fprintf(stderr, "usage: ring [--kb K] [--iters N] [--work W] [--shuffle SEED]\n");
        MPI_Finalize();
        return 2;
    }
    shoal_or_die(shoal_init(MPI_COMM_WORLD), "shoal_init");
    int *perm = malloc(sizeof(int) * (size_t)n), *pos = malloc(sizeof(int) * (size_t)n);
    size_t count = (size_t)o.kb * 1024 / sizeof(double);
    double *out = malloc(sizeof(double) * (count + 1)), *in = malloc(sizeof(double) * (count + 1));
    if (perm == NULL || pos == NULL || out == NULL || in == NULL) {
        fprintf(stderr, "ring: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    order(perm, n, o.shuffle);
    for (int i = 0; i < n; i++)
        pos[perm[i]] = i;
    int next = perm[(pos[rank] + 1) % n], prev = perm[(pos[rank] + n - 1) % n];
    for (size_t i = 0; i <= count; i++)
        out[i] = rank;

    long iter = 0;
    double acc = 0;
    shoal_or_die(shoal_protect(1, &iter, 1, MPI_LONG), "shoal_protect");
    shoal_or_die(shoal_protect(2, &acc, 1, MPI_DOUBLE), "shoal_protect");
    double start = MPI_Wtime();
    for (; iter < o.iters; iter++) {
        shoal_or_die(shoal_snapshot(), "shoal_snapshot");
        compute(o.work);
        if (count > 0)
            MPI_Sendrecv(out, (int)count, MPI_DOUBLE, next, 0, in, (int)count, MPI_DOUBLE, prev, 0,
                         MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        acc += count > 0 ? in[0] : prev;
        shoal_progress((double)(iter + 1) / (double)o.iters);
    }
    double secs = MPI_Wtime() - start, total = 0;
    MPI_Reduce(&acc, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    shoal_or_die(shoal_finalize(), "shoal_finalize");
    if (rank == 0) {
        printf("time: %.3f s\n", secs);
        printf("checksum: %.1f\n", total);
    }
    free(perm);
    free(pos);
    free(out);
    free(in);
    MPI_Finalize();
    return 0;
}
