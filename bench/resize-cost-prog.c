/*
 * resize-cost-prog - the program bench/resize-cost runs.
 *
 *   resize-cost-prog write MB    each rank protects MB MiB of doubles as its block of a
 *                                global array (and a replicated step), checkpoints once
 *   resize-cost-prog restore     restores that checkpoint (SHOAL_RESTART_EPOCH, and
 *                                SHOAL_RESTART_NRANKS when it was written by another
 *                                count) on this run's count, each rank's block the even
 *                                split of the global array, and checks every element
 *
 * restore prints, on rank 0, `restore_s S`: from before shoal_init to the end of
 * shoal_recover, the slowest rank's; and `restore_cpu_s C`: the CPU time of the ranks
 * (every thread) over the same span, summed, which a loaded machine changes less.
 * SHOAL_STATS gets the bytes it moved. With RESIZE_COST_SPLIT=1 rank r restores from
 * $SHOAL_DIR/node(r % 2), as on two nodes (bench/resize-cost puts the old shards there).
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <shoal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static double cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static void die(int rc, const char *call)
{
    if (rc != SHOAL_SUCCESS) {
        fprintf(stderr, "resize-cost-prog: %s: %s\n", call, shoal_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

static double value(uint64_t g)
{
    return (double)g * 0.5 + 1.0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc < 2 || (strcmp(argv[1], "write") == 0 && argc < 3)) {
        if (rank == 0)
            fprintf(stderr, "usage: resize-cost-prog write MB | restore\n");
        MPI_Finalize();
        return 2;
    }
    int write = strcmp(argv[1], "write") == 0;
    const char *split = getenv("RESIZE_COST_SPLIT"), *dir = getenv("SHOAL_DIR");
    if (!write && split != NULL && strcmp(split, "1") == 0 && dir != NULL) {
        char node[4096];
        snprintf(node, sizeof node, "%s/node%d", dir, rank % 2);
        setenv("SHOAL_DIR", node, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime(), c0 = cpu_s();
    die(shoal_init(MPI_COMM_WORLD), "shoal_init");
    size_t global;
    if (write)
        global = (size_t)atoi(argv[2]) * (1 << 20) / sizeof(double) * (size_t)nranks;
    else
        die(shoal_stored_count(1, &global), "shoal_stored_count");
    size_t base = global / (size_t)nranks, extra = global % (size_t)nranks;
    size_t count = base + ((size_t)rank < extra);
    uint64_t first = (uint64_t)rank * base + ((size_t)rank < extra ? (size_t)rank : extra);
    double *block = malloc(count * sizeof *block + 1);
    int step = 0;
    if (block == NULL) {
        fprintf(stderr, "resize-cost-prog: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (write) {
        for (size_t i = 0; i < count; i++)
            block[i] = value(first + i);
        step = 7;
    }
    die(shoal_protect_replicated(0, &step, 1, MPI_INT), "shoal_protect_replicated");
    die(shoal_protect_block(1, block, count, MPI_DOUBLE, global, first), "shoal_protect_block");
    if (write) {
        die(shoal_checkpoint(), "shoal_checkpoint");
    } else {
        die(shoal_recover(), "shoal_recover");
        double took = MPI_Wtime() - t0, cpu = cpu_s() - c0, worst, cpu_all;
        MPI_Reduce(&took, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        MPI_Reduce(&cpu, &cpu_all, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        long bad = step != 7;
        for (size_t i = 0; i < count; i++)
            bad += block[i] != value(first + i);
        long all;
        MPI_Reduce(&bad, &all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("restore_s %.6f\nrestore_cpu_s %.6f\n", worst, cpu_all);
            if (all != 0)
                printf("WRONG %ld elements\n", all);
        }
    }
    die(shoal_finalize(), "shoal_finalize");
    free(block);
    MPI_Finalize();
    return 0;
}
