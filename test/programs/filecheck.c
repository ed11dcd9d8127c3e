/*
 * filecheck - every rank reads a file staged into its job directory and says what it found.
 *
 *   filecheck FILE
 *
 * For the tests of `shoal run --file`: a job's input must be on every node that runs one
 * of its ranks, with no shared file system. Each rank prints
 *
 *   filecheck: rank R on HOST: SIZE bytes, fnv1a64 HASH, first line "LINE"
 *
 * and rank 0 then prints `filecheck: all N ranks read the same SIZE bytes` (or that they
 * did not). A rank that cannot read the file exits 1. Plain MPI: no libshoal.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    if (argc != 2) {
        if (rank == 0)
            fprintf(stderr, "usage: filecheck FILE\n");
        MPI_Finalize();
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        char cwd[4096] = "?";
        if (getcwd(cwd, sizeof cwd) == NULL)
            strcpy(cwd, "?");
        fprintf(stderr, "filecheck: rank %d: cannot open %s in %s\n", rank, argv[1], cwd);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 1;
    }
    unsigned long long hash = 14695981039346656037ULL; /* FNV-1a, 64 bits */
    long long size = 0;
    char first[128] = "";
    size_t used = 0;
    int in_first = 1, c;
    while ((c = getc(f)) != EOF) {
        hash = (hash ^ (unsigned char)c) * 1099511628211ULL;
        size++;
        if (in_first && (c == '\n' || used == sizeof first - 1))
            in_first = 0;
        else if (in_first)
            first[used++] = (char)c;
    }
    fclose(f);
    first[used] = '\0';
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    printf("filecheck: rank %d on %s: %lld bytes, fnv1a64 %016llx, first line \"%s\"\n", rank, host,
           size, hash, first);
    fflush(stdout);

    unsigned long long lo, hi;
    MPI_Allreduce(&hash, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&hash, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0) {
        if (lo == hi)
            printf("filecheck: all %d ranks read the same %lld bytes\n", nranks, size);
        else
            printf("filecheck: the ranks read different bytes\n");
    }
    MPI_Finalize();
    return lo == hi ? 0 : 1;
}
