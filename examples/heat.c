/*
 * heat - 2-D heat diffusion by Jacobi iteration, rows split across the ranks.
 *
 *   heat [--size N] [--steps S] [--pace US] [--table MB]
 *
 * A square plate of N x N points has its edges held at fixed temperatures: the top edge at
 * 100 degrees, the left edge falling linearly from 100 to 0, the other two at 0. Every step
 * each point becomes the mean of its four neighbours. Each rank owns a block of rows plus a
 * ghost row above and below, which its neighbours refill every step (the halo exchange).
 *
 * Rank 0 reports every tenth of the run: `step K of S (T s)`, T the seconds since this run
 * of the program started its loop (after a restart, since the restart: the first report's
 * interval holds the restore).
 *
 * The last line is `checksum: <value>`, the sum of all temperatures. The values of the grid do
 * not depend on how the rows are split, and the sum is taken row by row in global order on
 * rank 0, so any number of ranks prints the same digits.
 *
 * --pace US makes every step last at least US microseconds (see pace.h), so that a demo
 * or a test sees the run last long enough to interrupt it on any machine.
 *
 * --table MB gives the job a table of MB megabytes per rank of its first run that the run
 * reads and never changes, as a solver's mesh or coefficients: one global array, split in
 * blocks over the ranks, protected with the grid, so it is in every checkpoint, and put
 * back by a restart rather than computed again; a restart on another number of ranks
 * gives each rank its block of the same global table (its size from
 * shoal_stored_count). At the end each rank checks its block and rank 0 prints `table: MB
 * MB per rank intact`, or names the ranks whose block differs and heat exits 1.
 *
 * Shoal: the step counter is protected as replicated (the same on every rank) and the
 * grid's interior rows as this rank's block of the global grid, and shoal_snapshot is
 * called at the start of every step, when no message is in flight. After a restart that
 * first call puts back both, and the loop goes on from the saved step: on any number of
 * ranks, each rank's rows taken from the old ranks that held them.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pace.h"
#include "shoal_off.h"

enum { DEFAULT_SIZE = 2048, DEFAULT_STEPS = 5000 };
enum { ID_STEP = 1, ID_GRID = 2, ID_TABLE = 3 }; /* Shoal region ids */

typedef struct {
    int size;  /* N: interior points per side */
    int steps; /* Jacobi sweeps */
    int pace;  /* minimum microseconds per step */
    int table; /* MB of unchanging state per rank */
} options;

/* This rank's rows of the plate, each row N+2 points wide (the edge columns included). */
typedef struct {
    int n;        /* interior points per side */
    int first;    /* global index (1..N) of the first owned row */
    int rows;     /* owned rows; the array holds rows + 2 with the ghost rows */
    int up, down; /* neighbour ranks, MPI_PROC_NULL at the plate's edge */
} block;

static int parse_options(int argc, char **argv, options *opt)
{
    opt->size = DEFAULT_SIZE;
    opt->steps = DEFAULT_STEPS;
    opt->pace = 0;
    opt->table = 0;
    for (int i = 1; i < argc; i++) {
        int *target = NULL;
        if (strcmp(argv[i], "--size") == 0)
            target = &opt->size;
        else if (strcmp(argv[i], "--steps") == 0)
            target = &opt->steps;
        else if (strcmp(argv[i], "--pace") == 0)
            target = &opt->pace;
        else if (strcmp(argv[i], "--table") == 0)
            target = &opt->table;
        if (target == NULL || i + 1 == argc)
            return -1;
        char *end;
        long v = strtol(argv[++i], &end, 10);
        if (*end != '\0' || v < 0 || v > 1000000000)
            return -1;
        *target = (int)v;
    }
    return opt->size >= 1 ? 0 : -1;
}

static block make_block(int n, int rank, int nranks)
{
    block b;
    int base = n / nranks, extra = n % nranks;
    b.n = n;
    b.rows = base + (rank < extra);
    b.first = 1 + rank * base + (rank < extra ? rank : extra);
    b.up = rank > 0 ? rank - 1 : MPI_PROC_NULL;
    b.down = rank < nranks - 1 ? rank + 1 : MPI_PROC_NULL;
    return b;
}

/* Entry g of the global table (--table) of per entries per rank of the first run: what
 * entry g % per of its rank g / per held. */
static double table_entry(size_t g, size_t per)
{
    return (double)((g % per) % 4099) * 0.25 + (double)(g / per);
}

static double edge_temperature(int global_row, int global_col, int n)
{
    if (global_row == 0)
        return 100.0;
    if (global_col == 0)
        return 100.0 * (1.0 - (double)global_row / (n + 1));
    return 0.0;
}

/* Fills row i of a buffer (0 and rows+1 are the ghost rows) with its initial values:
 * edges at their fixed temperatures, the interior at 0. The ghost rows at the plate's top
 * and bottom edge hold the edge values and are never overwritten, because MPI_Sendrecv
 * with MPI_PROC_NULL leaves its buffer alone. */
static void init_row(const block *b, double *g, int i)
{
    int w = b->n + 2, gi = b->first - 1 + i;
    for (int j = 0; j < w; j++) {
        int edge = gi == 0 || gi == b->n + 1 || j == 0 || j == b->n + 1;
        g[(size_t)i * w + j] = edge ? edge_temperature(gi, j, b->n) : 0.0;
    }
}

static void init_grid(const block *b, double *g)
{
    for (int i = 0; i < b->rows + 2; i++)
        init_row(b, g, i);
}

/* Fills only a buffer's frame (both ghost rows, both edge columns) as init_grid would:
 * enough for the buffer a step sweeps into, whose every interior point the sweep writes
 * before anything reads it. On a grid as large as the state this halves the start-up. */
static void init_frame(const block *b, double *g)
{
    int w = b->n + 2;
    init_row(b, g, 0);
    init_row(b, g, b->rows + 1);
    for (int i = 1; i <= b->rows; i++) {
        int gi = b->first - 1 + i;
        g[(size_t)i * w] = edge_temperature(gi, 0, b->n);
        g[(size_t)i * w + w - 1] = edge_temperature(gi, w - 1, b->n);
    }
}

static void exchange_halos(const block *b, double *g)
{
    int w = b->n + 2;
    double *top = g + w, *bottom = g + (size_t)b->rows * w;
    double *ghost_top = g, *ghost_bottom = g + (size_t)(b->rows + 1) * w;
    MPI_Sendrecv(top, w, MPI_DOUBLE, b->up, 0, ghost_bottom, w, MPI_DOUBLE, b->down, 0,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Sendrecv(bottom, w, MPI_DOUBLE, b->down, 1, ghost_top, w, MPI_DOUBLE, b->up, 1,
                 MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

static void sweep(const block *b, const double *restrict g, double *restrict next)
{
    int w = b->n + 2;
    for (int i = 1; i <= b->rows; i++) {
        const double *above = g + (size_t)(i - 1) * w, *row = g + (size_t)i * w,
                     *below = g + (size_t)(i + 1) * w;
        double *out = next + (size_t)i * w;
        for (int j = 1; j <= b->n; j++)
            out[j] = 0.25 * (above[j] + below[j] + row[j - 1] + row[j + 1]);
    }
}

/* Sum of the interior, added in the same order whatever the number of ranks: each rank
 * sums its own rows left to right, and rank 0 adds the row sums in global row order. */
static double checksum(const block *b, const double *g, int rank, int nranks)
{
    int w = b->n + 2;
    double *row_sums = malloc(sizeof(double) * (b->rows > 0 ? b->rows : 1));
    for (int i = 0; i < b->rows; i++) {
        double s = 0.0;
        for (int j = 1; j <= b->n; j++)
            s += g[(size_t)(i + 1) * w + j];
        row_sums[i] = s;
    }
    double *all = NULL;
    int *counts = NULL, *displs = NULL;
    if (rank == 0) {
        all = malloc(sizeof(double) * b->n);
        counts = malloc(sizeof(int) * nranks);
        displs = malloc(sizeof(int) * nranks);
        for (int r = 0; r < nranks; r++) {
            block other = make_block(b->n, r, nranks);
            counts[r] = other.rows;
            displs[r] = other.first - 1;
        }
    }
    MPI_Gatherv(row_sums, b->rows, MPI_DOUBLE, all, counts, displs, MPI_DOUBLE, 0,
                MPI_COMM_WORLD);
    double total = 0.0;
    if (rank == 0)
        for (int i = 0; i < b->n; i++)
            total += all[i];
    free(row_sums);
    free(all);
    free(counts);
    free(displs);
    return total;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    options opt;
    if (parse_options(argc, argv, &opt) != 0 || opt.size < nranks) {
        if (rank == 0)
            fprintf(stderr, "usage: heat [--size N] [--steps S] [--pace US] [--table MB]  (N >= number of ranks)\n");
        MPI_Finalize();
        return 2;
    }
    shoal_or_die(shoal_init(MPI_COMM_WORLD), "shoal_init");
    int restarted = shoal_status() != SHOAL_FRESH;

    block b = make_block(opt.size, rank, nranks);
    size_t cells = (size_t)(b.rows + 2) * (b.n + 2);
    double *grid = malloc(sizeof(double) * cells), *next = malloc(sizeof(double) * cells);
    if (grid == NULL || next == NULL) {
        fprintf(stderr, "heat: out of memory for a %d x %d grid\n", opt.size, opt.size);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    /* On a restart the first shoal_snapshot puts the interior rows back. */
    if (!restarted)
        init_grid(&b, grid);
    else
        init_frame(&b, grid);
    init_frame(&b, next);
    if (rank == 0)
        printf("heat: %d x %d points, %d steps, %d ranks\n", opt.size, opt.size, opt.steps,
               nranks);

    /* This rank's block of the global table. Not filled on a restart: only the
     * checkpoint can put it back. */
    size_t per = (size_t)opt.table * (1 << 20) / sizeof(double), global = per * (size_t)nranks;
    if (restarted && per > 0)
        shoal_or_die(shoal_stored_count(ID_TABLE, &global), "shoal_stored_count");
    size_t entries = per > 0 ? global / nranks + ((size_t)rank < global % nranks) : 0;
    size_t first = per > 0 ? rank * (global / nranks) +
                                 ((size_t)rank < global % nranks ? (size_t)rank : global % nranks)
                           : 0;
    double *table = calloc(entries > 0 ? entries : 1, sizeof(double));
    if (table == NULL) {
        fprintf(stderr, "heat: out of memory for a table of %d MB\n", opt.table);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; !restarted && i < entries; i++)
        table[i] = table_entry(first + i, per);
    if (per > 0)
        shoal_or_die(shoal_protect_block(ID_TABLE, table, entries, MPI_DOUBLE, global, first),
                     "shoal_protect_block");

    int step = 0;
    shoal_or_die(shoal_protect_replicated(ID_STEP, &step, 1, MPI_INT), "shoal_protect_replicated");
    double start = MPI_Wtime();
    int report_every = opt.steps >= 10 ? opt.steps / 10 : 1;
    for (; step < opt.steps; step++) {
        double step_start = MPI_Wtime();
        /* The buffers swap roles every step: point the grid region at the current one,
         * its interior rows, global rows first .. first + rows - 1 of the plate's n. */
        shoal_or_die(shoal_protect_block(ID_GRID, grid + (b.n + 2), (size_t)b.rows * (b.n + 2),
                                         MPI_DOUBLE, (uint64_t)b.n * (b.n + 2),
                                         (uint64_t)(b.first - 1) * (b.n + 2)),
                     "shoal_protect_block");
        shoal_or_die(shoal_snapshot(), "shoal_snapshot");
        if (restarted && rank == 0)
            printf("heat: resumed at step %d\n", step);
        restarted = 0;

        exchange_halos(&b, grid);
        sweep(&b, grid, next);
        double *t = grid;
        grid = next;
        next = t;

        shoal_progress((double)(step + 1) / opt.steps);
        if (rank == 0 && (step + 1) % report_every == 0)
            printf("step %d of %d (%.3f s)\n", step + 1, opt.steps, MPI_Wtime() - start);
        pace_wait(step_start, opt.pace);
    }
    double seconds = MPI_Wtime() - start;

    double sum = checksum(&b, grid, rank, nranks);
    int intact = 1;
    for (size_t i = 0; i < entries && intact; i++)
        intact = table[i] == table_entry(first + i, per);
    int *all_intact = rank == 0 ? malloc(sizeof(int) * nranks) : NULL;
    MPI_Gather(&intact, 1, MPI_INT, all_intact, 1, MPI_INT, 0, MPI_COMM_WORLD);
    int damaged = 0;
    shoal_or_die(shoal_finalize(), "shoal_finalize");
    if (rank == 0) {
        printf("time: %.2f s\n", seconds);
        printf("checksum: %.15e\n", sum);
        for (int r = 0; r < nranks; r++)
            if (!all_intact[r]) {
                printf("table: rank %d's table differs from what it was given\n", r);
                damaged = 1;
            }
        if (entries > 0 && !damaged)
            printf("table: %d MB per rank intact\n", opt.table);
    }
    free(all_intact);
    free(table);
    free(grid);
    free(next);
    MPI_Bcast(&damaged, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return damaged;
}
