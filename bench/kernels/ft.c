/*
 * ft - a 3-D PDE solved with FFTs, after the NAS FT benchmark.
 *
 * A complex nx x ny x nz array of NAS random numbers is transformed forward once. Every
 * iteration multiplies the spectrum by exp(-4 alpha pi^2 |k|^2) (one more time step of the
 * heat equation), transforms it back, and takes a checksum of 1024 fixed elements.
 *
 * Layouts: in space each rank holds a slab of z planes, [z][y][x] with x fastest; in
 * frequency it holds a slab of y rows, [z][y][x] again but with all z. Going between them is
 * one Alltoall: in frequency, the block a rank sends to rank d is its z range of d, which is
 * contiguous; in space the received blocks are unpacked row by row. The FFTs are our own
 * radix-2 Stockham transforms over blocks of lines copied into a contiguous scratch array.
 *
 * Verification: every iteration's checksum against the values NAS publishes (relative error
 * 1e-12 in both parts), and, after the timed iterations, a round trip: the initial field
 * transformed forward and back (both Alltoalls, every 1-D FFT) must come back, divided by the
 * element count, within ROUND_TRIP_BOUND of itself in every element (it is in [0, 1), and the
 * error is rounding, about 1e-15). Shoal: the iteration counter, the evolving spectrum and
 * the checksums so far are protected.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel.h"

enum { MAX_ITERATIONS = 20, LINES_PER_BLOCK = 16 };
enum { ID_ITER = 1, ID_SPECTRUM = 2, ID_SUMS = 3 };

#define ALPHA            1.0e-6
#define PI               3.141592653589793238
#define ROUND_TRIP_BOUND 1e-13

typedef struct {
    double re, im;
} dcomplex;

typedef struct {
    char problem;
    int nx, ny, nz, iterations;
    const char *nas;      /* the NAS class of the same size */
    const dcomplex *sums; /* its published checksums, one per iteration */
} ft_class;

static const dcomplex nas_a_sums[] = {
    {5.046735008193e+02, 5.114047905510e+02}, {5.059412319734e+02, 5.098809666433e+02},
    {5.069376896287e+02, 5.098144042213e+02}, {5.077892868474e+02, 5.101336130759e+02},
    {5.085233095391e+02, 5.104914655194e+02}, {5.091487099959e+02, 5.107917842803e+02},
};

static const dcomplex nas_b_sums[] = {
    {5.177643571579e+02, 5.077803458597e+02}, {5.154521291263e+02, 5.088249431599e+02},
    {5.146409228649e+02, 5.096208912659e+02}, {5.142378756213e+02, 5.101023387619e+02},
    {5.139626667737e+02, 5.103976610617e+02}, {5.137423460082e+02, 5.105948019802e+02},
    {5.135547056878e+02, 5.107404165783e+02}, {5.133910925466e+02, 5.108576573661e+02},
    {5.132470705390e+02, 5.109577278523e+02}, {5.131197729984e+02, 5.110460304483e+02},
    {5.130070319283e+02, 5.111252433800e+02}, {5.129070537032e+02, 5.111968077718e+02},
    {5.128182883502e+02, 5.112616233064e+02}, {5.127393733383e+02, 5.113203605551e+02},
    {5.126691062020e+02, 5.113735928093e+02}, {5.126064276004e+02, 5.114218460548e+02},
    {5.125504076570e+02, 5.114656139760e+02}, {5.125002331720e+02, 5.115053595966e+02},
    {5.124551951846e+02, 5.115415130407e+02}, {5.124146770029e+02, 5.115744692211e+02},
};

static const dcomplex nas_c_sums[] = {
    {5.195078707457e+02, 5.149019699238e+02}, {5.155422171134e+02, 5.127578201997e+02},
    {5.144678022222e+02, 5.122251847514e+02}, {5.140150594328e+02, 5.121090289018e+02},
    {5.137550426810e+02, 5.121143685824e+02}, {5.135811056728e+02, 5.121496764568e+02},
    {5.134569343165e+02, 5.121870921893e+02}, {5.133651975661e+02, 5.122193250322e+02},
    {5.132955192805e+02, 5.122454735794e+02}, {5.132410471738e+02, 5.122663649603e+02},
    {5.131971141679e+02, 5.122830879827e+02}, {5.131605205716e+02, 5.122965869718e+02},
    {5.131290734194e+02, 5.123075927445e+02}, {5.131012720314e+02, 5.123166486553e+02},
    {5.130760908195e+02, 5.123241541685e+02}, {5.130528295923e+02, 5.123304037599e+02},
    {5.130310107773e+02, 5.123356167976e+02}, {5.130103090133e+02, 5.123399592211e+02},
    {5.129905029333e+02, 5.123435588985e+02}, {5.129714421109e+02, 5.123465164008e+02},
};

static const ft_class classes[] = {
    {'S', 256, 256, 128, 6, "A", nas_a_sums},
    {'W', 512, 256, 256, 20, "B", nas_b_sums},
    {'A', 512, 512, 512, 20, "C", nas_c_sums},
};

static const ft_class *find_class(char problem)
{
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (classes[i].problem == problem)
            return &classes[i];
    return NULL;
}

/* --- 1-D FFTs on blocks of lines --- */

/* Roots of unity for every radix-2 stage: roots[len + i] = exp(i pi i / len), 0 <= i < len,
 * for len = 1, 2, 4, ... < n. */
typedef struct {
    int n, log_n;
    dcomplex *roots;
} fft_plan;

static fft_plan make_plan(const kernel *k, int n)
{
    fft_plan p = {n, 0, kernel_alloc(k, sizeof(dcomplex) * n)};
    while ((1 << p.log_n) < n)
        p.log_n++;
    for (int len = 1; len < n; len *= 2)
        for (int i = 0; i < len; i++)
            p.roots[len + i] = (dcomplex){cos(PI * i / len), sin(PI * i / len)};
    return p;
}

/* One Stockham stage on `lines` interleaved transforms: x[point][line] -> y[point][line].
 * Stage `stage` (1-based) combines pairs half a transform apart with twiddles of span li. */
static void stockham_stage(const fft_plan *p, int sign, int stage, int lines, const dcomplex *x,
                           dcomplex *y)
{
    int half = p->n / 2, lk = 1 << (stage - 1), li = 1 << (p->log_n - stage);
    for (int i = 0; i < li; i++) {
        dcomplex w = p->roots[li + i];
        w.im *= sign;
        for (int k = 0; k < lk; k++) {
            const dcomplex *a = x + (size_t)(i * lk + k) * lines;
            const dcomplex *b = x + (size_t)(i * lk + k + half) * lines;
            dcomplex *sum = y + (size_t)(2 * i * lk + k) * lines;
            dcomplex *diff = y + (size_t)(2 * i * lk + k + lk) * lines;
            for (int j = 0; j < lines; j++) {
                double dr = a[j].re - b[j].re, di = a[j].im - b[j].im;
                sum[j].re = a[j].re + b[j].re;
                sum[j].im = a[j].im + b[j].im;
                diff[j].re = w.re * dr - w.im * di;
                diff[j].im = w.re * di + w.im * dr;
            }
        }
    }
}

/* Transforms `count` lines of p->n points: line j starts at data + first(j), its points are
 * `stride` apart. sign +1 is NAS's forward direction (exp(+i...)), -1 the inverse; neither
 * scales. */
typedef size_t (*line_start)(size_t j, const void *ctx);

static void fft_lines(const fft_plan *p, int sign, dcomplex *data, size_t count, size_t stride,
                      line_start first, const void *ctx, dcomplex *scratch)
{
    dcomplex *x = scratch, *y = scratch + (size_t)p->n * LINES_PER_BLOCK;
    for (size_t j0 = 0; j0 < count; j0 += LINES_PER_BLOCK) {
        int lines = count - j0 < LINES_PER_BLOCK ? (int)(count - j0) : LINES_PER_BLOCK;
        size_t start[LINES_PER_BLOCK];
        for (int j = 0; j < lines; j++)
            start[j] = first(j0 + j, ctx);
        /* Point-major copies: for y and z lines, neighbouring lines are neighbours in memory.
         */
        for (int i = 0; i < p->n; i++)
            for (int j = 0; j < lines; j++)
                x[(size_t)i * lines + j] = data[start[j] + i * stride];
        for (int stage = 1; stage <= p->log_n; stage += 2) {
            stockham_stage(p, sign, stage, lines, x, y);
            if (stage == p->log_n) {
                memcpy(x, y, sizeof(dcomplex) * p->n * lines);
                break;
            }
            stockham_stage(p, sign, stage + 1, lines, y, x);
        }
        for (int i = 0; i < p->n; i++)
            for (int j = 0; j < lines; j++)
                data[start[j] + i * stride] = x[(size_t)i * lines + j];
    }
}

/* --- the distributed 3-D transform --- */

typedef struct {
    int nx, ny, nz, nranks, rank;
    int nzl, nyl; /* z planes in space, y rows in frequency, per rank */
    size_t local; /* elements per rank in either layout */
    fft_plan px, py, pz;
    dcomplex *scratch;
} fft3d;

/* Line starts: x lines are rows; y lines run down a plane; z lines cross the planes. */
static size_t x_line(size_t j, const void *ctx)
{
    return j * ((const fft3d *)ctx)->nx;
}
static size_t y_line(size_t j, const void *ctx)
{ /* j = plane * nx + x */
    const fft3d *f = ctx;
    return j / f->nx * (size_t)f->nx * f->ny + j % f->nx;
}
static size_t z_line(size_t j, const void *ctx)
{ /* j = row * nx + x, within one z plane */
    (void)ctx;
    return j;
}

static void space_ffts(fft3d *f, int sign, dcomplex *s)
{
    if (sign > 0) {
        fft_lines(&f->px, sign, s, (size_t)f->nzl * f->ny, 1, x_line, f, f->scratch);
        fft_lines(&f->py, sign, s, (size_t)f->nzl * f->nx, f->nx, y_line, f, f->scratch);
    } else {
        fft_lines(&f->py, sign, s, (size_t)f->nzl * f->nx, f->nx, y_line, f, f->scratch);
        fft_lines(&f->px, sign, s, (size_t)f->nzl * f->ny, 1, x_line, f, f->scratch);
    }
}

static void frequency_ffts(fft3d *f, int sign, dcomplex *t)
{
    fft_lines(&f->pz, sign, t, (size_t)f->nyl * f->nx, (size_t)f->nyl * f->nx, z_line, f,
              f->scratch);
}

/* Space slab -> frequency slab: pack by destination y range, then one Alltoall. */
static void to_frequency(fft3d *f, const dcomplex *s, dcomplex *packed, dcomplex *t)
{
    size_t row = f->nx, block = (size_t)f->nzl * f->nyl * row, k = 0;
    for (int d = 0; d < f->nranks; d++)
        for (int z = 0; z < f->nzl; z++)
            for (int y = d * f->nyl; y < (d + 1) * f->nyl; y++, k += row)
                memcpy(packed + k, s + ((size_t)z * f->ny + y) * row, sizeof(dcomplex) * row);
    MPI_Alltoall(packed, (int)(2 * block), MPI_DOUBLE, t, (int)(2 * block), MPI_DOUBLE,
                 MPI_COMM_WORLD);
}

/* Frequency slab -> space slab: the blocks go out as they lie, then are unpacked. */
static void to_space(fft3d *f, const dcomplex *t, dcomplex *received, dcomplex *s)
{
    size_t row = f->nx, block = (size_t)f->nzl * f->nyl * row, k = 0;
    MPI_Alltoall(t, (int)(2 * block), MPI_DOUBLE, received, (int)(2 * block), MPI_DOUBLE,
                 MPI_COMM_WORLD);
    for (int src = 0; src < f->nranks; src++)
        for (int z = 0; z < f->nzl; z++)
            for (int y = src * f->nyl; y < (src + 1) * f->nyl; y++, k += row)
                memcpy(s + ((size_t)z * f->ny + y) * row, received + k, sizeof(dcomplex) * row);
}

/* --- the benchmark's steps --- */

/* NAS initial conditions: element L of the global array (x fastest) is the pair of random
 * numbers 2L+1, 2L+2. */
static void initial_conditions(const fft3d *f, dcomplex *s)
{
    size_t plane = (size_t)f->nx * f->ny;
    double x = NAS_SEED;
    randlc(&x, nas_power(NAS_MULTIPLIER, 2 * plane * (uint64_t)(f->rank * f->nzl)));
    vranlc(2 * plane * f->nzl, &x, NAS_MULTIPLIER, (double *)s);
}

/* exp(-4 alpha pi^2 |k|^2) for every element of the frequency slab; frequencies above n/2
 * count as negative. */
static void make_twiddle(const fft3d *f, double *tw)
{
    double ap = -4.0 * ALPHA * PI * PI;
    size_t k = 0;
    for (int z = 0; z < f->nz; z++) {
        int kz = (z + f->nz / 2) % f->nz - f->nz / 2;
        for (int yl = 0; yl < f->nyl; yl++) {
            int y = f->rank * f->nyl + yl, ky = (y + f->ny / 2) % f->ny - f->ny / 2;
            for (int x = 0; x < f->nx; x++) {
                int kx = (x + f->nx / 2) % f->nx - f->nx / 2;
                tw[k++] = exp(ap * (double)(kx * kx + ky * ky + kz * kz));
            }
        }
    }
}

/* Sum of elements (j, 3j, 5j) modulo the sizes, j = 1..1024, divided by the element count. */
static dcomplex checksum(const fft3d *f, const dcomplex *s)
{
    double local[2] = {0.0, 0.0}, total[2];
    for (int j = 1; j <= 1024; j++) {
        int x = j % f->nx, y = 3 * j % f->ny, z = 5 * j % f->nz - f->rank * f->nzl;
        if (z >= 0 && z < f->nzl) {
            const dcomplex *e = s + ((size_t)z * f->ny + y) * f->nx + x;
            local[0] += e->re;
            local[1] += e->im;
        }
    }
    MPI_Allreduce(local, total, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double n = (double)f->nx * f->ny * f->nz;
    return (dcomplex){total[0] / n, total[1] / n};
}

/* The largest error, over every element, of the initial field transformed forward and back.
 * Overwrites all three slabs. */
static double round_trip_error(fft3d *f, dcomplex *field, dcomplex *t, dcomplex *buffer)
{
    initial_conditions(f, field);
    space_ffts(f, 1, field);
    to_frequency(f, field, buffer, t);
    frequency_ffts(f, 1, t);
    frequency_ffts(f, -1, t);
    to_space(f, t, buffer, field);
    space_ffts(f, -1, field);
    initial_conditions(f, buffer);
    double n = (double)f->nx * f->ny * f->nz, local = 0.0, global;
    for (size_t i = 0; i < f->local; i++) {
        local = fmax(local, fabs(field[i].re / n - buffer[i].re));
        local = fmax(local, fabs(field[i].im / n - buffer[i].im));
    }
    MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return global;
}

static int verify(const ft_class *c, const dcomplex *sums)
{
    int ok = 1;
    for (int i = 0; i < c->iterations; i++)
        ok &= kernel_rel_error(sums[i].re, c->sums[i].re) <= 1e-12 &&
              kernel_rel_error(sums[i].im, c->sums[i].im) <= 1e-12;
    return ok;
}

int main(int argc, char **argv)
{
    kernel k;
    kernel_init(&k, "ft", &argc, &argv);
    const ft_class *c = find_class(k.problem);
    kernel_require(
        &k, kernel_is_power_of_two(k.nranks) && k.nranks <= c->ny && k.nranks <= c->nz,
        "needs a power-of-two number of ranks up to %d", c->ny < c->nz ? c->ny : c->nz);
    if (k.rank == 0)
        printf("ft: class %c (%d x %d x %d, %d iterations, NAS class %s), %d ranks\n",
               c->problem, c->nx, c->ny, c->nz, c->iterations, c->nas, k.nranks);

    fft3d f = {.nx = c->nx, .ny = c->ny, .nz = c->nz, .nranks = k.nranks, .rank = k.rank};
    f.nzl = c->nz / k.nranks;
    f.nyl = c->ny / k.nranks;
    f.local = (size_t)c->nx * c->ny * c->nz / k.nranks;
    f.px = make_plan(&k, c->nx);
    f.py = make_plan(&k, c->ny);
    f.pz = make_plan(&k, c->nz);
    int longest = c->nx > c->ny ? c->nx : c->ny;
    longest = longest > c->nz ? longest : c->nz;
    f.scratch = kernel_alloc(&k, sizeof(dcomplex) * 2 * LINES_PER_BLOCK * longest);
    dcomplex *spectrum = kernel_alloc(&k, sizeof(dcomplex) * f.local);
    dcomplex *work = kernel_alloc(&k, sizeof(dcomplex) * f.local);
    dcomplex *buffer = kernel_alloc(&k, sizeof(dcomplex) * f.local);
    double *twiddle = kernel_alloc(&k, sizeof(double) * f.local);

    make_twiddle(&f, twiddle);
    initial_conditions(&f, work);
    space_ffts(&f, 1, work);
    to_frequency(&f, work, buffer, spectrum);
    frequency_ffts(&f, 1, spectrum);

    int iter = 0;
    dcomplex sums[MAX_ITERATIONS];
    memset(sums, 0, sizeof sums);
    kernel_protect(ID_ITER, &iter, 1, MPI_INT);
    kernel_protect(ID_SPECTRUM, spectrum, 2 * f.local, MPI_DOUBLE);
    kernel_protect(ID_SUMS, sums, 2 * MAX_ITERATIONS, MPI_DOUBLE);

    int fault_iter = kernel_fault_at(&k, c->iterations / 2, "the spectrum's constant term");
    kernel_start_timer(&k);
    for (; iter < c->iterations; iter++) {
        kernel_snapshot(&k, &iter, c->iterations);
        if (iter == fault_iter && k.rank == 0)
            spectrum[0].re += 1.0;
        for (size_t i = 0; i < f.local; i++) {
            spectrum[i].re *= twiddle[i];
            spectrum[i].im *= twiddle[i];
        }
        memcpy(work, spectrum, sizeof(dcomplex) * f.local);
        frequency_ffts(&f, -1, work);
        to_space(&f, work, buffer, work);
        space_ffts(&f, -1, work);
        sums[iter] = checksum(&f, work);
        if (k.rank == 0)
            printf("  iteration %2d  checksum %.12e %.12e\n", iter + 1, sums[iter].re,
                   sums[iter].im);
    }
    kernel_stop_timer(&k);

    dcomplex last = sums[c->iterations - 1];
    double round_trip = round_trip_error(&f, work, spectrum, buffer);
    int passed = verify(c, sums) && round_trip <= ROUND_TRIP_BOUND;
    return kernel_finish(&k, passed,
                         "checksum=%.12e,%.12e (all %d iterations checked) round-trip=%.3e "
                         "(bound %.0e)",
                         last.re, last.im, c->iterations, round_trip, ROUND_TRIP_BOUND);
}
