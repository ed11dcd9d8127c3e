/*
 * writer-cost-prog.c - the CPU time libshoal's background writer spends on each
 * checkpoint (hashing the shard, writing it, pruning), read from the kernel's accounting
 * of the thread named shoal-writer, while the ranks go on with memory-bound work, as a
 * job's ranks do between checkpoints. Run by bench/writer-cost.
 *
 * Usage: writer-cost-prog MB CHECKPOINTS SECONDS
 *   Each rank protects MB of doubles and checkpoints CHECKPOINTS times, SECONDS apart,
 *   copying its state back and forth in between. Needs SHOAL_DIR, SHOAL_JOB and
 *   SHOAL_EPOCH_BASE=1 (to see each shard in place before reading the writer's time).
 *   Rank 0 prints one line per checkpoint: its number and the writer's CPU seconds for
 *   it, the mean over the ranks. WRITER_COST_IDLE=1: the ranks sleep between
 *   checkpoints instead. WRITER_COST_CHANGE=F (0 to 1, default 1): before each
 *   checkpoint the rank adds 1 to that fraction of its doubles, a contiguous run that
 *   moves on by its length each time; the rest is as it was at the last checkpoint
 *   (what a copy that sends only changed blocks is measured with). WRITER_COST_NONE=1:
 *   the same run without the checkpoints (each line's time is 0): what the agents cost
 *   a job whose ranks take none (bench/steady-cost's baseline).
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "shoal.h"
#include "stats.h"

/* The schedstat file of this process's thread named shoal-writer, or "" if none. */
static void find_writer(char *out, size_t len)
{
    out[0] = 0;
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        char path[300], comm[64] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue;
        if (fgets(comm, sizeof comm, f) != NULL && strcmp(comm, "shoal-writer\n") == 0)
            snprintf(out, len, "/proc/self/task/%s/schedstat", de->d_name);
        fclose(f);
    }
    closedir(d);
}

/* The thread's CPU time in seconds (the first field of schedstat, in ns). */
static double cpu_of(const char *schedstat)
{
    unsigned long long ns = 0;
    FILE *f = fopen(schedstat, "r");
    if (f == NULL)
        return 0;
    if (fscanf(f, "%llu", &ns) != 1)
        ns = 0;
    fclose(f);
    return (double)ns * 1e-9;
}

static int shard_in_place(long long epoch, int rank)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/e%08lld/r%06d.shard", getenv("SHOAL_DIR"),
             getenv("SHOAL_JOB"), epoch, rank);
    struct stat st;
    return stat(path, &st) == 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 4 || getenv("SHOAL_DIR") == NULL || getenv("SHOAL_JOB") == NULL) {
        if (rank == 0)
            fprintf(stderr, "usage: SHOAL_DIR=... SHOAL_JOB=... SHOAL_EPOCH_BASE=1 "
                            "writer-cost-prog MB CHECKPOINTS SECONDS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t bytes = (size_t)atol(argv[1]) << 20, n = bytes / sizeof(double);
    int checkpoints = atoi(argv[2]);
    const char *idle_env = getenv("WRITER_COST_IDLE");
    int idle = idle_env != NULL && strcmp(idle_env, "1") == 0;
    const char *none_env = getenv("WRITER_COST_NONE");
    int none = none_env != NULL && strcmp(none_env, "1") == 0;
    double seconds = atof(argv[3]);
    const char *change_env = getenv("WRITER_COST_CHANGE");
    double change = change_env != NULL ? atof(change_env) : 1;
    if (!(change >= 0 && change <= 1)) {
        if (rank == 0)
            fprintf(stderr, "WRITER_COST_CHANGE=%s: want a fraction from 0 to 1\n", change_env);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    size_t changed = (size_t)(change * (double)n);
    double *state = malloc(bytes), *work = malloc(bytes);
    if (state == NULL || work == NULL) {
        fprintf(stderr, "rank %d: out of memory for %zu MB\n", rank, bytes >> 20);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < n; i++)
        state[i] = (double)i + rank;
    memcpy(work, state, bytes);
    int rc = shoal_init(MPI_COMM_WORLD);
    if (rc == SHOAL_SUCCESS)
        rc = shoal_protect(1, state, n, MPI_DOUBLE);
    if (rc != SHOAL_SUCCESS) {
        fprintf(stderr, "rank %d: %s\n", rank, shoal_strerror(rc));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    char writer[320];
    find_writer(writer, sizeof writer);
    if (writer[0] == 0) {
        fprintf(stderr, "rank %d: no thread named shoal-writer\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int k = 1; k <= checkpoints; k++) {
        for (size_t j = 0, start = (size_t)(k - 1) * changed % n; j < changed; j++)
            state[(start + j) % n] += 1;
        double before = cpu_of(writer);
        rc = none ? SHOAL_SUCCESS : shoal_checkpoint();
        if (rc != SHOAL_SUCCESS) {
            fprintf(stderr, "rank %d: shoal_checkpoint: %s\n", rank, shoal_strerror(rc));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* The job's own memory traffic until the next checkpoint is due (or, with
         * WRITER_COST_IDLE=1, none: the ranks sleep). */
        double end = now() + seconds;
        while (now() < end || !(none || shard_in_place(k, rank))) {
            if (idle) {
                nanosleep(&(struct timespec){0, 10000000}, NULL);
                continue;
            }
            memcpy(work, state, bytes);
            memcpy(state, work, bytes);
        }
        double mine = cpu_of(writer) - before, sum = 0;
        MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("%d %.6f\n", k, sum / nranks);
            fflush(stdout);
        }
    }
    rc = shoal_finalize();
    if (rc != SHOAL_SUCCESS)
        fprintf(stderr, "rank %d: shoal_finalize: %s\n", rank, shoal_strerror(rc));
    free(state);
    free(work);
    MPI_Finalize();
    return rc == SHOAL_SUCCESS ? 0 : 1;
}
