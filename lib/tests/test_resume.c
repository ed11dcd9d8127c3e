/*
 * test_resume.c - a standalone restart the way a user meets it: plain mpirun, shards in
 * ./shoal-ckpt (or SHOAL_DIR), the program dies, and running it again resumes. Built
 * against the installed-style libshoal.so through shoal.pc.
 *
 * Usage: RESUME_CRASH_AT=N RESUME_EXPECT=fresh|restart test_resume ITERATIONS
 *   Takes checkpoints at iterations 60 and 100; at RESUME_CRASH_AT (0 or unset: never)
 *   it leaves without shoal_finalize, like a killed run. The result is checked against
 *   a replay. What the test expects is in the environment, not in the arguments: a
 *   standalone checkpoint belongs to the program's arguments, and a run with other
 *   ones starts afresh.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "shoal.h"

#define N 4096

static void step(double *a, int it, int rank)
{
    for (int j = 0; j < N; j++)
        a[j] += (double)(it % 7) + j * 0.001 + rank;
}

/* Sums the checks of every rank; rank 0 prints the closing line. */
static int summary(int rank, int nranks, const char *mode)
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
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    snprintf(check_prefix, sizeof check_prefix, "rank %d: ", rank);
    const char *crash = getenv("RESUME_CRASH_AT"), *mode = getenv("RESUME_EXPECT");
    if (argc != 2 || mode == NULL ||
        (strcmp(mode, "fresh") != 0 && strcmp(mode, "restart") != 0)) {
        fprintf(stderr,
                "usage: RESUME_CRASH_AT=N RESUME_EXPECT=fresh|restart test_resume ITERATIONS\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int iterations = atoi(argv[1]), crash_at = crash ? atoi(crash) : 0;
    int expect_restart = strcmp(mode, "restart") == 0;

    static double a[N];
    int it = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), expect_restart);
    CHECK_EQ(shoal_protect(0, &it, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(1, a, N, MPI_DOUBLE), SHOAL_SUCCESS);
    int first = 1;
    for (;;) {
        CHECK_EQ(shoal_snapshot(), SHOAL_SUCCESS);
        if (first && expect_restart) {
            /* Epoch of iteration 60 for sure; 100 if an agreement completed it. */
            CHECK(it == 60 || it == 100);
            if (rank == 0)
                printf("resumed at iteration %d\n", it);
        }
        first = 0;
        if (it >= iterations)
            break;
        step(a, it, rank);
        it++;
        if (it == 60 || it == 100)
            CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
        if (it == crash_at) {
            if (rank == 0)
                printf("leaving at iteration %d without shoal_finalize\n", it);
            int status = summary(rank, nranks, mode);
            MPI_Finalize();
            return status;
        }
    }
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);

    static double want[N];
    for (int i = 0; i < iterations; i++)
        step(want, i, rank);
    CHECK(memcmp(a, want, sizeof a) == 0);

    int status = summary(rank, nranks, mode);
    MPI_Finalize();
    return status;
}
