/*
 * osu - point-to-point latency and bandwidth between ranks 0 and 1, measured as the
 * OSU micro-benchmarks' osu_latency and osu_bw measure them, for bench/overlay.
 *
 *   osu latency|bw [--size BYTES] [--iters N] [--skip N]
 *
 * latency: rank 0 sends SIZE bytes (default 8) to rank 1, which sends them back, N times
 * (default 10000) after SKIP warm-up round trips (default 1000); the line printed is
 * `latency: L us`, half the mean round trip, as osu_latency prints.
 * bw: rank 0 posts a window of 64 non-blocking sends of SIZE bytes (default 1 MiB), rank 1
 * 64 receives, then answers with 4 bytes; N windows (default 20) after SKIP (default 2);
 * the line is `bw: B MB/s` (10^6 bytes a second, as osu_bw counts) and `bytes: T`, the
 * bytes rank 0 sent in the timed windows.
 * Other ranks, if any, wait at the end.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WINDOW = 64 };

static int usage(int rank)
{
    if (rank == 0)
        fprintf(stderr, "usage: osu latency|bw [--size BYTES] [--iters N] [--skip N]\n");
    MPI_Finalize();
    return 2;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc < 2 || size < 2)
        return usage(rank);
    int bw = strcmp(argv[1], "bw") == 0;
    if (!bw && strcmp(argv[1], "latency") != 0)
        return usage(rank);
    long bytes = bw ? 1 << 20 : 8, iters = bw ? 20 : 10000, skip = bw ? 2 : 1000;
    for (int i = 2; i + 1 < argc; i += 2) {
        long v = strtol(argv[i + 1], NULL, 10);
        if (v < 0)
            return usage(rank);
        if (strcmp(argv[i], "--size") == 0)
            bytes = v;
        else if (strcmp(argv[i], "--iters") == 0)
            iters = v;
        else if (strcmp(argv[i], "--skip") == 0)
            skip = v;
        else
            return usage(rank);
    }
    char *buf = calloc(bw ? WINDOW : 1, (size_t)bytes + 1);
    if (buf == NULL)
        MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Request req[WINDOW];
    double start = 0;
    if (rank < 2) {
        int peer = 1 - rank;
        for (long i = 0; i < skip + iters; i++) {
            if (i == skip)
                start = MPI_Wtime();
            if (!bw) {
                if (rank == 0) {
                    MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                    MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                } else {
                    MPI_Recv(buf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                    MPI_Send(buf, (int)bytes, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
                }
                continue;
            }
            for (int w = 0; w < WINDOW; w++) {
                char *b = buf + (size_t)w * (size_t)bytes;
                if (rank == 0)
                    MPI_Isend(b, (int)bytes, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[w]);
                else
                    MPI_Irecv(b, (int)bytes, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &req[w]);
            }
            MPI_Waitall(WINDOW, req, MPI_STATUSES_IGNORE);
            if (rank == 0)
                MPI_Recv(buf, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            else
                MPI_Send(buf, 4, MPI_CHAR, peer, 101, MPI_COMM_WORLD);
        }
    }
    double t = MPI_Wtime() - start;
    if (rank == 0) {
        if (bw) {
            double total = (double)bytes * WINDOW * (double)iters;
            printf("bw: %.2f MB/s\nbytes: %.0f\n", total / t / 1e6, total);
        } else {
            printf("latency: %.2f us\n", t / (2.0 * (double)iters) * 1e6);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    free(buf);
    MPI_Finalize();
    return 0;
}
