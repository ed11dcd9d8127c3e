/*
 * ep - embarrassingly parallel: Gaussian random pairs, after the NAS EP benchmark.
 *
 * 2^(M+1) uniform numbers from the NAS generator (seed 271828183) become pairs (x, y) in
 * [-1, 1]^2; the pairs inside the unit circle become Gaussian deviates by the Marsaglia polar
 * method, are summed, and are counted in square annuli. The numbers are drawn in batches of
 * 2^16 pairs; a batch's first seed is found by jumping ahead, so any rank can draw any batch.
 * Each rank draws a contiguous block of batches and the sums meet in one reduction at the end.
 *
 * Verification: the sums against the values the NAS benchmark publishes for this M.
 * Shoal: one iteration is one batch; the batch counter, the sums and the counts are protected.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/kernel.h"

enum { LOG_PAIRS_PER_BATCH = 16, ANNULI = 10 };
enum { ID_ITER = 1, ID_SUMS = 2, ID_COUNTS = 3 };

#define EP_SEED 271828183.0

typedef struct {
    char problem;
    int m;           /* 2^m pairs */
    double sx, sy;   /* published sums */
    const char *nas; /* the NAS class of the same size */
} ep_class;

static const ep_class classes[] = {
    {'S', 25, -2.863319731645753e3, -6.320053679109499e3, "W"},
    {'W', 30, 4.033815542441498e4, -2.660669192809235e4, "B"},
    {'A', 32, 4.764367927995374e4, -8.084072988043731e4, "C"},
};

static const ep_class *find_class(char problem)
{
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (classes[i].problem == problem)
            return &classes[i];
    return NULL;
}

/* Draws batch number `batch` (counted from 0) and adds its deviates to sums and counts. */
static void draw_batch(uint64_t batch, double *uniform, double sums[2], double counts[ANNULI])
{
    const uint64_t pairs = UINT64_C(1) << LOG_PAIRS_PER_BATCH;
    double seed = EP_SEED;
    randlc(&seed, nas_power(NAS_MULTIPLIER, 2 * pairs * batch));
    vranlc(2 * pairs, &seed, NAS_MULTIPLIER, uniform);
    for (uint64_t i = 0; i < pairs; i++) {
        double x = 2.0 * uniform[2 * i] - 1.0, y = 2.0 * uniform[2 * i + 1] - 1.0;
        double r2 = x * x + y * y;
        if (r2 <= 1.0) {
            double f = sqrt(-2.0 * log(r2) / r2), gx = x * f, gy = y * f;
            double m = fmax(fabs(gx), fabs(gy));
            counts[(int)m] += 1.0;
            sums[0] += gx;
            sums[1] += gy;
        }
    }
}

int main(int argc, char **argv)
{
    kernel k;
    kernel_init(&k, "ep", &argc, &argv);
    const ep_class *c = find_class(k.problem);

    /* Contiguous blocks of batches; every rank runs max_per_rank iterations, so that all
     * call kernel_snapshot equally often, and skips the ones past its own block. */
    int batches = 1 << (c->m - LOG_PAIRS_PER_BATCH);
    int base = batches / k.nranks, extra = batches % k.nranks;
    int mine = base + (k.rank < extra);
    int first = k.rank * base + (k.rank < extra ? k.rank : extra);
    int max_per_rank = base + (extra > 0);
    if (k.rank == 0)
        printf("ep: class %c (2^%d random pairs, NAS class %s), %d ranks\n", c->problem, c->m,
               c->nas, k.nranks);

    double *uniform = kernel_alloc(&k, sizeof(double) << (LOG_PAIRS_PER_BATCH + 1));
    double sums[2] = {0.0, 0.0}, counts[ANNULI] = {0.0};
    int iter = 0;
    kernel_protect(ID_ITER, &iter, 1, MPI_INT);
    kernel_protect(ID_SUMS, sums, 2, MPI_DOUBLE);
    kernel_protect(ID_COUNTS, counts, ANNULI, MPI_DOUBLE);

    int fault_iter = kernel_fault_at(&k, max_per_rank / 2, "rank 0's sum of x");
    kernel_start_timer(&k);
    for (; iter < max_per_rank; iter++) {
        kernel_snapshot(&k, &iter, max_per_rank);
        if (iter == fault_iter && k.rank == 0)
            sums[0] += 1.0;
        if (iter < mine)
            draw_batch((uint64_t)(first + iter), uniform, sums, counts);
    }
    double total_sums[2], total_counts[ANNULI];
    MPI_Allreduce(sums, total_sums, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(counts, total_counts, ANNULI, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    kernel_stop_timer(&k);

    double accepted = 0.0;
    for (int i = 0; i < ANNULI; i++)
        accepted += total_counts[i];
    if (k.rank == 0) {
        printf("gaussian pairs: %.0f\n", accepted);
        for (int i = 0; i < ANNULI; i++)
            printf("  annulus %d: %.0f\n", i, total_counts[i]);
    }
    int passed = kernel_rel_error(total_sums[0], c->sx) <= 1e-8 &&
                 kernel_rel_error(total_sums[1], c->sy) <= 1e-8;
    free(uniform);
    return kernel_finish(&k, passed, "sx=%.15e sy=%.15e (reference %.15e %.15e)", total_sums[0],
                         total_sums[1], c->sx, c->sy);
}
