/*
 * mg - multigrid V-cycles for a 3-D Poisson problem, after the NAS MG benchmark.
 *
 * On a periodic N^3 grid, v is zero except +1 at the ten points where a NAS random field is
 * largest and -1 at the ten where it is smallest. Each iteration computes the residual
 * r = v - A u and improves u with one V-cycle: restrict r down to the 2^3 grid, smooth there,
 * then interpolate the correction up level by level, smoothing on each (NAS's operators A, P,
 * Q and S, coefficients included).
 *
 * Ranks form a px x py x pz grid of boxes; every operator ends by refreshing the one-point
 * ghost layer from the up to 6 face neighbours (x faces first, then y, then z, so edges and
 * corners arrive too). Below the level where a box would be thinner than 2 points, the
 * residual is gathered and the coarse levels are solved on every rank alike. None of this
 * changes a single operation of the serial algorithm, so only the norms (Allreduce) depend
 * on the number of ranks.
 *
 * Verification: the residual's L2 norm against the value NAS publishes (relative 1e-8).
 * Shoal: the iteration counter and u (this rank's box with its ghosts) are protected; v is
 * made again at start-up and r is recomputed from u at the start of every iteration.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel.h"

enum { MAX_LEVELS = 12, SPIKES = 10 };
enum { ID_ITER = 1, ID_U = 2 };

typedef struct {
    char problem;
    int log_n, iterations;
    int solves;      /* times the whole problem is solved, from u = 0 */
    int smoother_b;  /* NAS B and larger smooth with S(b), the others with S(a) */
    double rnm2;     /* published residual norm after `iterations` V-cycles */
    const char *nas; /* the NAS class of the same size */
} mg_class;

/* W and A solve their NAS problem more than once, to run long enough (W: to measure
 * checkpoints at a 10 s interval; A: about a minute, like the other kernels). Every
 * solve starts from u = 0 and ends with the same norm. */
static const mg_class classes[] = {
    {'S', 8, 4, 1, 0, 0.2433365309069e-05, "A"},
    {'W', 8, 20, 6, 1, 0.1800564401355e-05, "B, solved 6 times"},
    {'A', 9, 20, 2, 1, 0.5706732285740e-06, "C, solved twice"},
};

static const mg_class *find_class(char problem)
{
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (classes[i].problem == problem)
            return &classes[i];
    return NULL;
}

/* A grid of one level as this rank stores it: axis 0 (x) varies fastest. */
typedef struct {
    int n[3];       /* interior points per axis */
    int m[3];       /* n + 2: with the ghost layers */
    int off[3];     /* global index of the first interior point */
    int replicated; /* the whole grid, the same on every rank */
} level;

typedef struct {
    int lt, kd;        /* finest level; coarsest level split across ranks */
    int p[3], me[3];   /* rank grid and this rank's place in it */
    int nbr[3][2];     /* neighbour ranks along each axis: minus, plus */
    double a[4], s[4]; /* coefficients of A and of the smoother S */
    level dist[MAX_LEVELS + 1], rep[MAX_LEVELS + 1];
    double *u[MAX_LEVELS + 1], *r[MAX_LEVELS + 1];   /* split levels kd..lt */
    double *ur[MAX_LEVELS + 1], *rr[MAX_LEVELS + 1]; /* replicated levels 1..kd */
    double *v;
    double *send, *recv; /* a face, or a whole level kd for the gather */
} mg;

static size_t points(const level *l)
{
    return (size_t)l->m[0] * l->m[1] * l->m[2];
}

#define AT(l, i1, i2, i3) (((size_t)(i3) * (l)->m[1] + (i2)) * (l)->m[0] + (i1))

/* --- ghost layers --- */

/* Copies the plane `at` of axis `axis` to (to_buf) or from buf. Along an axis refreshed
 * earlier the plane includes the ghosts, so edges and corners travel on. */
static size_t plane(const level *l, double *u, int axis, int at, double *buf, int to_buf)
{
    int b = axis == 0 ? 1 : 0, c = axis == 2 ? 1 : 2;
    int b0 = b < axis ? 0 : 1, b1 = b < axis ? l->m[b] : l->m[b] - 1;
    int c0 = c < axis ? 0 : 1, c1 = c < axis ? l->m[c] : l->m[c] - 1;
    size_t count = 0;
    for (int j = c0; j < c1; j++)
        for (int i = b0; i < b1; i++) {
            int idx[3];
            idx[axis] = at;
            idx[b] = i;
            idx[c] = j;
            size_t where = AT(l, idx[0], idx[1], idx[2]);
            if (to_buf)
                buf[count++] = u[where];
            else
                u[where] = buf[count++];
        }
    return count;
}

static void comm3(mg *g, const level *l, double *u)
{
    for (int axis = 0; axis < 3; axis++) {
        int last = l->m[axis] - 2;              /* the last interior plane */
        if (l->replicated || g->p[axis] == 1) { /* periodic: the grid wraps onto itself */
            plane(l, u, axis, last, g->send, 1);
            plane(l, u, axis, 0, g->send, 0);
            plane(l, u, axis, 1, g->send, 1);
            plane(l, u, axis, last + 1, g->send, 0);
            continue;
        }
        int minus = g->nbr[axis][0], plus = g->nbr[axis][1];
        size_t n = plane(l, u, axis, 1, g->send, 1);
        MPI_Sendrecv(g->send, (int)n, MPI_DOUBLE, minus, 10 + axis, g->recv, (int)n, MPI_DOUBLE,
                     plus, 10 + axis, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        plane(l, u, axis, last + 1, g->recv, 0);
        plane(l, u, axis, last, g->send, 1);
        MPI_Sendrecv(g->send, (int)n, MPI_DOUBLE, plus, 20 + axis, g->recv, (int)n, MPI_DOUBLE,
                     minus, 20 + axis, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        plane(l, u, axis, 0, g->recv, 0);
    }
}

/* --- NAS MG operators --- */

/* r = v - A u */
static void resid(mg *g, const level *l, const double *u, const double *v, double *r)
{
    int m1 = l->m[0];
    double u1[m1], u2[m1];
    for (int i3 = 1; i3 < l->m[2] - 1; i3++)
        for (int i2 = 1; i2 < l->m[1] - 1; i2++) {
            for (int i1 = 0; i1 < m1; i1++) {
                u1[i1] = u[AT(l, i1, i2 - 1, i3)] + u[AT(l, i1, i2 + 1, i3)] +
                         u[AT(l, i1, i2, i3 - 1)] + u[AT(l, i1, i2, i3 + 1)];
                u2[i1] = u[AT(l, i1, i2 - 1, i3 - 1)] + u[AT(l, i1, i2 + 1, i3 - 1)] +
                         u[AT(l, i1, i2 - 1, i3 + 1)] + u[AT(l, i1, i2 + 1, i3 + 1)];
            }
            size_t row = AT(l, 0, i2, i3);
            for (int i1 = 1; i1 < m1 - 1; i1++)
                r[row + i1] = v[row + i1] - g->a[0] * u[row + i1] -
                              g->a[2] * (u2[i1] + u1[i1 - 1] + u1[i1 + 1]) -
                              g->a[3] * (u2[i1 - 1] + u2[i1 + 1]);
        }
    comm3(g, l, r);
}

/* u = u + S r, the smoother */
static void psinv(mg *g, const level *l, const double *r, double *u)
{
    int m1 = l->m[0];
    double r1[m1], r2[m1];
    for (int i3 = 1; i3 < l->m[2] - 1; i3++)
        for (int i2 = 1; i2 < l->m[1] - 1; i2++) {
            for (int i1 = 0; i1 < m1; i1++) {
                r1[i1] = r[AT(l, i1, i2 - 1, i3)] + r[AT(l, i1, i2 + 1, i3)] +
                         r[AT(l, i1, i2, i3 - 1)] + r[AT(l, i1, i2, i3 + 1)];
                r2[i1] = r[AT(l, i1, i2 - 1, i3 - 1)] + r[AT(l, i1, i2 + 1, i3 - 1)] +
                         r[AT(l, i1, i2 - 1, i3 + 1)] + r[AT(l, i1, i2 + 1, i3 + 1)];
            }
            size_t row = AT(l, 0, i2, i3);
            for (int i1 = 1; i1 < m1 - 1; i1++)
                u[row + i1] += g->s[0] * r[row + i1] +
                               g->s[1] * (r[row + i1 - 1] + r[row + i1 + 1] + r1[i1]) +
                               g->s[2] * (r2[i1] + r1[i1 - 1] + r1[i1 + 1]);
        }
    comm3(g, l, u);
}

/* s = P r: restriction from fine level lf to coarse level lc */
static void rprj3(mg *g, const level *lf, const double *r, const level *lc, double *s)
{
    int m1j = lc->m[0];
    double x1[lf->m[0]], y1[lf->m[0]];
    for (int j3 = 1; j3 < lc->m[2] - 1; j3++) {
        int i3 = 2 * j3 - 1;
        for (int j2 = 1; j2 < lc->m[1] - 1; j2++) {
            int i2 = 2 * j2 - 1;
            for (int j1 = 1; j1 < m1j; j1++) {
                int i1 = 2 * j1 - 1;
                x1[i1] = r[AT(lf, i1, i2, i3 + 1)] + r[AT(lf, i1, i2 + 2, i3 + 1)] +
                         r[AT(lf, i1, i2 + 1, i3)] + r[AT(lf, i1, i2 + 1, i3 + 2)];
                y1[i1] = r[AT(lf, i1, i2, i3)] + r[AT(lf, i1, i2, i3 + 2)] +
                         r[AT(lf, i1, i2 + 2, i3)] + r[AT(lf, i1, i2 + 2, i3 + 2)];
            }
            for (int j1 = 1; j1 < m1j - 1; j1++) {
                int i1 = 2 * j1 - 1;
                double y2 = r[AT(lf, i1 + 1, i2, i3)] + r[AT(lf, i1 + 1, i2, i3 + 2)] +
                            r[AT(lf, i1 + 1, i2 + 2, i3)] + r[AT(lf, i1 + 1, i2 + 2, i3 + 2)];
                double x2 = r[AT(lf, i1 + 1, i2, i3 + 1)] + r[AT(lf, i1 + 1, i2 + 2, i3 + 1)] +
                            r[AT(lf, i1 + 1, i2 + 1, i3)] + r[AT(lf, i1 + 1, i2 + 1, i3 + 2)];
                s[AT(lc, j1, j2, j3)] = 0.5 * r[AT(lf, i1 + 1, i2 + 1, i3 + 1)] +
                                        0.25 * (r[AT(lf, i1, i2 + 1, i3 + 1)] +
                                                r[AT(lf, i1 + 2, i2 + 1, i3 + 1)] + x2) +
                                        0.125 * (x1[i1] + x1[i1 + 2] + y2) +
                                        0.0625 * (y1[i1] + y1[i1 + 2]);
            }
        }
    }
    comm3(g, lc, s);
}

/* u = u + Q z: trilinear interpolation from coarse level lc to fine level lf. The ghosts of
 * u come out right without an exchange, since those of z are. */
static void interp(const level *lc, const double *z, const level *lf, double *u)
{
    int mm1 = lc->m[0];
    double z1[mm1], z2[mm1], z3[mm1];
    for (int i3 = 0; i3 < lc->m[2] - 1; i3++)
        for (int i2 = 0; i2 < lc->m[1] - 1; i2++) {
            for (int i1 = 0; i1 < mm1; i1++) {
                z1[i1] = z[AT(lc, i1, i2 + 1, i3)] + z[AT(lc, i1, i2, i3)];
                z2[i1] = z[AT(lc, i1, i2, i3 + 1)] + z[AT(lc, i1, i2, i3)];
                z3[i1] = z[AT(lc, i1, i2 + 1, i3 + 1)] + z[AT(lc, i1, i2, i3 + 1)] + z1[i1];
            }
            const double *zr = z + AT(lc, 0, i2, i3);
            double *u00 = u + AT(lf, 0, 2 * i2, 2 * i3),
                   *u10 = u + AT(lf, 0, 2 * i2 + 1, 2 * i3);
            double *u01 = u + AT(lf, 0, 2 * i2, 2 * i3 + 1);
            double *u11 = u + AT(lf, 0, 2 * i2 + 1, 2 * i3 + 1);
            for (int i1 = 0; i1 < mm1 - 1; i1++) {
                u00[2 * i1] += zr[i1];
                u00[2 * i1 + 1] += 0.5 * (zr[i1 + 1] + zr[i1]);
                u10[2 * i1] += 0.5 * z1[i1];
                u10[2 * i1 + 1] += 0.25 * (z1[i1] + z1[i1 + 1]);
                u01[2 * i1] += 0.5 * z2[i1];
                u01[2 * i1 + 1] += 0.25 * (z2[i1] + z2[i1 + 1]);
                u11[2 * i1] += 0.25 * z3[i1];
                u11[2 * i1 + 1] += 0.125 * (z3[i1] + z3[i1 + 1]);
            }
        }
}

/* The L2 norm NAS reports: sqrt(sum r^2 / N^3) over the whole grid. */
static double norm2(const mg *g, const level *l, const double *r)
{
    double s = 0.0, total;
    for (int i3 = 1; i3 < l->m[2] - 1; i3++)
        for (int i2 = 1; i2 < l->m[1] - 1; i2++)
            for (int i1 = 1; i1 < l->m[0] - 1; i1++) {
                double x = r[AT(l, i1, i2, i3)];
                s += x * x;
            }
    MPI_Allreduce(&s, &total, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double n = (double)(1 << g->lt);
    return sqrt(total / (n * n * n));
}

/* --- between split and replicated levels --- */

static void rank_coords(const mg *g, int rank, int c[3])
{
    c[0] = rank % g->p[0];
    c[1] = rank / g->p[0] % g->p[1];
    c[2] = rank / (g->p[0] * g->p[1]);
}

/* Every rank's interior of split level kd, assembled into the replicated grid. */
static void gather(mg *g, const double *r, double *full)
{
    const level *l = &g->dist[g->kd], *f = &g->rep[g->kd];
    size_t n = (size_t)l->n[0] * l->n[1] * l->n[2], k = 0;
    for (int i3 = 1; i3 <= l->n[2]; i3++)
        for (int i2 = 1; i2 <= l->n[1]; i2++)
            for (int i1 = 1; i1 <= l->n[0]; i1++)
                g->send[k++] = r[AT(l, i1, i2, i3)];
    MPI_Allgather(g->send, (int)n, MPI_DOUBLE, g->recv, (int)n, MPI_DOUBLE, MPI_COMM_WORLD);
    for (int rank = 0; rank < g->p[0] * g->p[1] * g->p[2]; rank++) {
        int c[3];
        rank_coords(g, rank, c);
        const double *src = g->recv + n * rank;
        for (int i3 = 0; i3 < l->n[2]; i3++)
            for (int i2 = 0; i2 < l->n[1]; i2++)
                for (int i1 = 0; i1 < l->n[0]; i1++)
                    full[AT(f, 1 + c[0] * l->n[0] + i1, 1 + c[1] * l->n[1] + i2,
                            1 + c[2] * l->n[2] + i3)] = *src++;
    }
    comm3(g, f, full);
}

/* This rank's box of the replicated level kd, ghosts included. */
static void scatter(mg *g, const double *full, double *u)
{
    const level *l = &g->dist[g->kd], *f = &g->rep[g->kd];
    for (int i3 = 0; i3 < l->m[2]; i3++)
        for (int i2 = 0; i2 < l->m[1]; i2++)
            for (int i1 = 0; i1 < l->m[0]; i1++)
                u[AT(l, i1, i2, i3)] =
                    full[AT(f, l->off[0] + i1, l->off[1] + i2, l->off[2] + i3)];
}

/* --- the V-cycle --- */

/* One level on the way up: u = Q u_coarse, r = r - A u, u = u + S r. */
static void correct(mg *g, const level *lc, const double *uc, const level *l, double *u,
                    double *r)
{
    memset(u, 0, sizeof(double) * points(l));
    interp(lc, uc, l, u);
    resid(g, l, u, r, r);
    psinv(g, l, r, u);
}

static void v_cycle(mg *g)
{
    int lt = g->lt, kd = g->kd;
    for (int k = lt; k > kd; k--)
        rprj3(g, &g->dist[k], g->r[k], &g->dist[k - 1], g->r[k - 1]);
    gather(g, g->r[kd], g->rr[kd]);
    for (int k = kd; k > 1; k--)
        rprj3(g, &g->rep[k], g->rr[k], &g->rep[k - 1], g->rr[k - 1]);
    memset(g->ur[1], 0, sizeof(double) * points(&g->rep[1]));
    psinv(g, &g->rep[1], g->rr[1], g->ur[1]);
    for (int k = 2; k <= kd; k++)
        correct(g, &g->rep[k - 1], g->ur[k - 1], &g->rep[k], g->ur[k], g->rr[k]);
    scatter(g, g->ur[kd], g->u[kd]);
    for (int k = kd + 1; k < lt; k++)
        correct(g, &g->dist[k - 1], g->u[k - 1], &g->dist[k], g->u[k], g->r[k]);
    interp(&g->dist[lt - 1], g->u[lt - 1], &g->dist[lt], g->u[lt]);
    resid(g, &g->dist[lt], g->u[lt], g->v, g->r[lt]);
    psinv(g, &g->dist[lt], g->r[lt], g->u[lt]);
}

/* --- set-up --- */

typedef struct {
    double value;
    long index; /* global, x fastest */
} spike;

static int by_value(const void *a, const void *b)
{
    const spike *x = a, *y = b;
    if (x->value != y->value)
        return x->value < y->value ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Keeps the SPIKES largest (sign 1) or smallest (sign -1) values seen. */
static void keep_best(spike *best, int sign, double value, long index)
{
    if (sign * value <= sign * best[0].value)
        return;
    best[0] = (spike){value, index};
    for (int i = 0; i + 1 < SPIKES && sign * best[i].value > sign * best[i + 1].value; i++) {
        spike t = best[i];
        best[i] = best[i + 1];
        best[i + 1] = t;
    }
}

/* NAS zran3: v = +1 at the 10 largest values of the random field, -1 at the 10 smallest.
 * Value number L (x fastest, from 0) of the field is the (L+1)-th NAS random number. */
static void make_rhs(mg *g, const kernel *k)
{
    const level *l = &g->dist[g->lt];
    long n = 1L << g->lt;
    spike best[2][SPIKES];
    for (int i = 0; i < SPIKES; i++) {
        best[0][i] = (spike){1.0, -1};
        best[1][i] = (spike){0.0, -1};
    }
    double *row = kernel_alloc(k, sizeof(double) * l->n[0]);
    for (int i3 = 0; i3 < l->n[2]; i3++)
        for (int i2 = 0; i2 < l->n[1]; i2++) {
            long first = ((l->off[2] + i3) * n + l->off[1] + i2) * n + l->off[0];
            double x = NAS_SEED;
            randlc(&x, nas_power(NAS_MULTIPLIER, (uint64_t)first));
            vranlc(l->n[0], &x, NAS_MULTIPLIER, row);
            for (int i1 = 0; i1 < l->n[0]; i1++) {
                keep_best(best[0], -1, row[i1], first + i1);
                keep_best(best[1], 1, row[i1], first + i1);
            }
        }
    free(row);

    /* Every rank's candidates; the globally smallest and largest SPIKES win. Slots a rank
     * could not fill (index -1) drop out. */
    int offered = 2 * SPIKES * k->nranks, count = 0;
    spike *all = kernel_alloc(k, sizeof(spike) * offered);
    MPI_Allgather(best, (int)sizeof best, MPI_BYTE, all, (int)sizeof best, MPI_BYTE,
                  MPI_COMM_WORLD);
    for (int i = 0; i < offered; i++)
        if (all[i].index >= 0)
            all[count++] = all[i];
    kernel_require(k, count >= 2 * SPIKES, "grid too small for %d spikes", 2 * SPIKES);
    qsort(all, count, sizeof(spike), by_value);
    memset(g->v, 0, sizeof(double) * points(l));
    for (int i = 0; i < 2 * SPIKES; i++) {
        long index = i < SPIKES ? all[i].index : all[count - 1 - (i - SPIKES)].index;
        int lx = (int)(index % n) - l->off[0], ly = (int)(index / n % n) - l->off[1];
        int lz = (int)(index / n / n) - l->off[2];
        if (lx >= 0 && lx < l->n[0] && ly >= 0 && ly < l->n[1] && lz >= 0 && lz < l->n[2])
            g->v[AT(l, lx + 1, ly + 1, lz + 1)] = i < SPIKES ? -1.0 : 1.0;
    }
    free(all);
    comm3(g, l, g->v);
}

static size_t max_face(const level *l, size_t largest)
{
    for (int axis = 0; axis < 3; axis++)
        if (points(l) / l->m[axis] > largest)
            largest = points(l) / l->m[axis];
    return largest;
}

static void make_levels(mg *g, const kernel *k)
{
    /* Split the ranks (a power of two) over z, then y, then x. */
    g->p[0] = g->p[1] = g->p[2] = 1;
    for (int left = k->nranks, axis = 2; left > 1; left /= 2, axis = (axis + 2) % 3)
        g->p[axis] *= 2;
    rank_coords(g, k->rank, g->me);
    for (int axis = 0; axis < 3; axis++)
        for (int side = 0; side < 2; side++) {
            int c[3] = {g->me[0], g->me[1], g->me[2]};
            c[axis] = (c[axis] + (side ? 1 : g->p[axis] - 1)) % g->p[axis];
            g->nbr[axis][side] = (c[2] * g->p[1] + c[1]) * g->p[0] + c[0];
        }
    int widest = g->p[0] > g->p[1] ? g->p[0] : g->p[1];
    widest = widest > g->p[2] ? widest : g->p[2];
    for (g->kd = 1; (1 << g->kd) < 2 * widest; g->kd++)
        ;
    kernel_require(k, g->kd < g->lt, "too many ranks for a %d^3 grid", 1 << g->lt);

    size_t largest_face = 0;
    for (int lev = 1; lev <= g->lt; lev++) {
        level *d = &g->dist[lev], *r = &g->rep[lev];
        for (int axis = 0; axis < 3; axis++) {
            d->n[axis] = (1 << lev) / g->p[axis];
            d->off[axis] = g->me[axis] * d->n[axis];
            r->n[axis] = 1 << lev;
            r->off[axis] = 0;
            d->m[axis] = d->n[axis] + 2;
            r->m[axis] = r->n[axis] + 2;
        }
        r->replicated = 1;
        d->replicated = 0;
        if (lev >= g->kd) {
            g->u[lev] = kernel_alloc(k, sizeof(double) * points(d));
            g->r[lev] = kernel_alloc(k, sizeof(double) * points(d));
            largest_face = max_face(d, largest_face);
        }
        if (lev <= g->kd) {
            g->ur[lev] = kernel_alloc(k, sizeof(double) * points(r));
            g->rr[lev] = kernel_alloc(k, sizeof(double) * points(r));
            largest_face = max_face(r, largest_face);
        }
    }
    size_t gathered = points(&g->rep[g->kd]); /* >= every rank's interior of level kd */
    size_t buffer = largest_face > gathered ? largest_face : gathered;
    g->send = kernel_alloc(k, sizeof(double) * buffer);
    g->recv = kernel_alloc(k, sizeof(double) * buffer);
    g->v = kernel_alloc(k, sizeof(double) * points(&g->dist[g->lt]));
}

static void setup(mg *g, const kernel *k, const mg_class *c)
{
    memset(g, 0, sizeof *g);
    g->lt = c->log_n;
    g->a[0] = -8.0 / 3.0;
    g->a[1] = 0.0;
    g->a[2] = 1.0 / 6.0;
    g->a[3] = 1.0 / 12.0;
    g->s[0] = c->smoother_b ? -3.0 / 17.0 : -3.0 / 8.0;
    g->s[1] = c->smoother_b ? 1.0 / 33.0 : 1.0 / 32.0;
    g->s[2] = c->smoother_b ? -1.0 / 61.0 : -1.0 / 64.0;
    g->s[3] = 0.0;
    make_levels(g, k);
    make_rhs(g, k);
    memset(g->u[g->lt], 0, sizeof(double) * points(&g->dist[g->lt]));
}

int main(int argc, char **argv)
{
    kernel k;
    kernel_init(&k, "mg", &argc, &argv);
    const mg_class *c = find_class(k.problem);
    kernel_require(&k, kernel_is_power_of_two(k.nranks),
                   "needs a power-of-two number of ranks, not %d", k.nranks);
    mg g;
    setup(&g, &k, c);
    if (k.rank == 0)
        printf(
            "mg: class %c (%d^3 grid, %d x %d iterations, NAS class %s), %d x %d x %d ranks\n",
            c->problem, 1 << c->log_n, c->solves, c->iterations, c->nas, g.p[0], g.p[1],
            g.p[2]);

    const level *top = &g.dist[g.lt];
    int iter = 0;
    kernel_protect(ID_ITER, &iter, 1, MPI_INT);
    kernel_protect(ID_U, g.u[g.lt], points(top), MPI_DOUBLE);

    int total = c->solves * c->iterations;
    /* Halfway through the last solve: earlier solves start again from u = 0. */
    int fault_iter =
        kernel_fault_at(&k, total - c->iterations / 2, "u at rank 0's first point");
    kernel_start_timer(&k);
    for (; iter < total; iter++) {
        kernel_snapshot(&k, &iter, total);
        if (iter % c->iterations == 0) /* a new solve */
            memset(g.u[g.lt], 0, sizeof(double) * points(top));
        if (iter == fault_iter) {
            if (k.rank == 0)
                g.u[g.lt][AT(top, 1, 1, 1)] += 1.0;
            comm3(&g, top, g.u[g.lt]);
        }
        resid(&g, top, g.u[g.lt], g.v, g.r[g.lt]);
        v_cycle(&g);
    }
    resid(&g, top, g.u[g.lt], g.v, g.r[g.lt]);
    double rnm2 = norm2(&g, top, g.r[g.lt]);
    kernel_stop_timer(&k);

    int passed = kernel_rel_error(rnm2, c->rnm2) <= 1e-8;
    return kernel_finish(&k, passed, "rnm2=%.13e (reference %.13e)", rnm2, c->rnm2);
}
