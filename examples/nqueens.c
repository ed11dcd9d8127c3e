/*
 * nqueens - count the ways to place N non-attacking queens on an N x N board.
 *
 *   nqueens [--pace US] N
 *
 * Master-worker: rank 0, the master, lists every legal placement of the queens of the first
 * rows (a task is such a board) and hands the boards out; every rank, the master included,
 * counts the solutions that complete its board by bitmask backtracking. The last line is
 * `solutions: <count>`; the line before it compares the count with the known value.
 *
 * --pace US makes every round last at least US microseconds (see pace.h).
 *
 * Shoal: the work goes in rounds. Each round the master scatters one board to every rank and
 * the counts are summed back on the master, so a round ends with no message in flight, which
 * is where shoal_snapshot is called. The task cursor and the running total are protected;
 * after a restart the master resumes handing out boards where the checkpoint left off.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pace.h"
#include "shoal_off.h"

enum { MAX_N = 24, PLACED_ROWS = 3 };
enum { ID_CURSOR = 1, ID_TOTAL = 2 }; /* Shoal region ids */

/* A task as it travels: the number of rows placed (0 means "no task this round"), then the
 * column of the queen in each placed row. */
typedef struct {
    int placed;
    int col[PLACED_ROWS];
} task;

/* Solutions to the n-queens problem for n = 0..18 (OEIS A000170). */
static const long long known_counts[] = {
    1,   1,    0,     0,     2,      10,      4,        40,       92,        352,
    724, 2680, 14200, 73712, 365596, 2279184, 14772512, 95815104, 666090624,
};

/* Counts the completions of a board whose attacked columns and diagonals, seen from the
 * next row, are cols, ld (moving left) and rd (moving right). */
static long long count_from(unsigned all, unsigned cols, unsigned ld, unsigned rd)
{
    if (cols == all)
        return 1;
    long long n = 0;
    unsigned free_cols = all & ~(cols | ld | rd);
    while (free_cols) {
        unsigned bit = free_cols & -free_cols;
        free_cols -= bit;
        n += count_from(all, cols | bit, (ld | bit) << 1, (rd | bit) >> 1);
    }
    return n;
}

static long long count_task(int n, const task *t)
{
    unsigned all = (1u << n) - 1, cols = 0, ld = 0, rd = 0;
    for (int r = 0; r < t->placed; r++) {
        unsigned bit = 1u << t->col[r];
        cols |= bit;
        ld = (ld | bit) << 1;
        rd = (rd | bit) >> 1;
    }
    return count_from(all, cols, ld, rd);
}

typedef struct {
    task *items;
    int count, capacity;
} task_list;

static void add_task(task_list *l, const task *t)
{
    if (l->count == l->capacity) {
        l->capacity = l->capacity ? 2 * l->capacity : 256;
        l->items = realloc(l->items, sizeof(task) * l->capacity);
        if (l->items == NULL) {
            fprintf(stderr, "nqueens: out of memory for the task list\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }
    l->items[l->count++] = *t;
}

/* Lists, in lexicographic order, every legal placement of the first `depth` rows. */
static void list_tasks(task_list *l, task *t, int depth, unsigned all, unsigned cols,
                       unsigned ld, unsigned rd)
{
    if (t->placed == depth) {
        add_task(l, t);
        return;
    }
    unsigned free_cols = all & ~(cols | ld | rd);
    for (int c = 0; free_cols >> c; c++) {
        unsigned bit = 1u << c;
        if (!(free_cols & bit))
            continue;
        t->col[t->placed++] = c;
        list_tasks(l, t, depth, all, cols | bit, (ld | bit) << 1, (rd | bit) >> 1);
        t->placed--;
    }
}

/* Reads `[--pace US] N`; returns N, or -1 when the arguments are wrong. */
static int parse_args(int argc, char **argv, long *pace)
{
    *pace = 0;
    int i = 1;
    char *end;
    if (argc == 4 && strcmp(argv[1], "--pace") == 0) {
        *pace = strtol(argv[2], &end, 10);
        if (*end != '\0' || *pace < 0 || *pace > 1000000000)
            return -1;
        i = 3;
    }
    if (argc != i + 1)
        return -1;
    long n = strtol(argv[i], &end, 10);
    return *end == '\0' && n >= 1 && n <= MAX_N ? (int)n : -1;
}

/* The master's side of one round: the next nranks tasks, padded with empty ones. */
static void fill_round(const task_list *tasks, int cursor, int nranks, task *round)
{
    for (int r = 0; r < nranks; r++) {
        memset(&round[r], 0, sizeof(task));
        if (cursor + r < tasks->count)
            round[r] = tasks->items[cursor + r];
    }
}

/* Prints the check against the known count; returns 0 when it matches (or is unknown). */
static int report(int n, long long total)
{
    int known = n < (int)(sizeof known_counts / sizeof known_counts[0]);
    int ok = !known || known_counts[n] == total;
    if (!known)
        printf("check: no known count for N=%d\n", n);
    else if (ok)
        printf("check: matches the known count for N=%d\n", n);
    else
        printf("check: FAILED, the known count for N=%d is %lld\n", n, known_counts[n]);
    printf("solutions: %lld\n", total);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, nranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);

    long pace;
    int n = parse_args(argc, argv, &pace);
    if (n < 0) {
        if (rank == 0)
            fprintf(stderr, "usage: nqueens [--pace US] N  (1 <= N <= %d)\n", MAX_N);
        MPI_Finalize();
        return 2;
    }
    shoal_or_die(shoal_init(MPI_COMM_WORLD), "shoal_init");
    int restarted = shoal_status() == 1;

    task_list tasks = {0};
    task *round = NULL;
    if (rank == 0) {
        task t = {0};
        int depth = n < PLACED_ROWS ? n : PLACED_ROWS;
        list_tasks(&tasks, &t, depth, (1u << n) - 1, 0, 0, 0);
        round = malloc(sizeof(task) * nranks);
        printf("nqueens: N=%d, %d boards with %d queens placed, %d ranks\n", n, tasks.count,
               depth, nranks);
    }
    int ntasks = tasks.count;
    MPI_Bcast(&ntasks, 1, MPI_INT, 0, MPI_COMM_WORLD);

    /* Every rank keeps the same cursor, so all agree on the number of rounds. */
    int cursor = 0;
    long long total = 0;
    shoal_or_die(shoal_protect(ID_CURSOR, &cursor, 1, MPI_INT), "shoal_protect");
    shoal_or_die(shoal_protect(ID_TOTAL, &total, 1, MPI_LONG_LONG), "shoal_protect");
    while (cursor < ntasks) {
        double round_start = MPI_Wtime();
        shoal_or_die(shoal_snapshot(), "shoal_snapshot");
        if (restarted && rank == 0)
            printf("nqueens: resumed at board %d of %d\n", cursor, ntasks);
        restarted = 0;

        if (rank == 0)
            fill_round(&tasks, cursor, nranks, round);
        task mine;
        MPI_Scatter(round, sizeof(task), MPI_BYTE, &mine, sizeof(task), MPI_BYTE, 0,
                    MPI_COMM_WORLD);
        long long found = mine.placed > 0 ? count_task(n, &mine) : 0, round_total = 0;
        MPI_Reduce(&found, &round_total, 1, MPI_LONG_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
        total += round_total;
        cursor += nranks;
        shoal_progress(cursor < ntasks ? (double)cursor / ntasks : 1.0);
        pace_wait(round_start, pace);
    }

    shoal_or_die(shoal_finalize(), "shoal_finalize");
    int status = rank == 0 ? report(n, total) : 0;
    free(tasks.items);
    free(round);
    MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return status;
}
