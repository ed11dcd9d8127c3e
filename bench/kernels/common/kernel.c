/* kernel.c - see kernel.h. */
#include "kernel.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage_exit(const kernel *k, const char *why)
{
    if (k->rank == 0)
        fprintf(stderr, "%s: %s\nusage: %s [--class S|W|A]\n", k->name, why, k->name);
    MPI_Finalize();
    exit(2);
}

static char parse_class(const kernel *k, const char *value)
{
    if (strlen(value) == 1 && strchr("SWA", value[0]) != NULL)
        return value[0];
    usage_exit(k, "the class must be S, W or A");
    return 0;
}

void kernel_init(kernel *k, const char *name, int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    memset(k, 0, sizeof *k);
    k->name = name;
    k->problem = 'S';
    MPI_Comm_rank(MPI_COMM_WORLD, &k->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &k->nranks);

    char **av = *argv;
    for (int i = 1; i < *argc; i++) {
        if (strcmp(av[i], "--class") == 0 && i + 1 < *argc)
            k->problem = parse_class(k, av[++i]);
        else if (strncmp(av[i], "--class=", 8) == 0)
            k->problem = parse_class(k, av[i] + 8);
        else
            usage_exit(k, strcmp(av[i], "--class") == 0 ? "--class needs a value"
                                                        : "unknown argument");
    }

    /* Rank 0 decides, so that every rank agrees even where mpirun passed no environment. */
    const char *fault = getenv("SHOAL_KERNEL_FAULT");
    int hook[2] = {0, 0}; /* on, bad value */
    if (k->rank == 0 && fault != NULL && *fault != '\0') {
        hook[0] = strcmp(fault, "1") == 0;
        hook[1] = !hook[0] && strcmp(fault, "0") != 0;
    }
    MPI_Bcast(hook, 2, MPI_INT, 0, MPI_COMM_WORLD);
    if (hook[1])
        usage_exit(k, "SHOAL_KERNEL_FAULT must be 0 or 1");
    k->fault = hook[0];

    shoal_or_die(shoal_init(MPI_COMM_WORLD), "shoal_init");
    k->restarted = shoal_status() == 1;
}

void kernel_require(const kernel *k, int ok, const char *fmt, ...)
{
    if (ok)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", k->name);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int kernel_is_power_of_two(int n)
{
    return n > 0 && (n & (n - 1)) == 0;
}

void kernel_protect(int id, void *ptr, size_t count, MPI_Datatype type)
{
    shoal_or_die(shoal_protect(id, ptr, count, type), "shoal_protect");
}

void kernel_snapshot(kernel *k, const int *iter, int niter)
{
    shoal_or_die(shoal_snapshot(), "shoal_snapshot");
    if (k->restarted) {
        if (k->rank == 0)
            printf("%s: resumed from a checkpoint at iteration %d of %d\n", k->name, *iter,
                   niter);
        k->restarted = 0;
    }
    shoal_progress(niter > 0 ? (double)*iter / niter : 1.0);
}

int kernel_fault_at(const kernel *k, int at, const char *what)
{
    if (!k->fault)
        return -1;
    if (k->rank == 0)
        printf("%s: SHOAL_KERNEL_FAULT=1: %s will be spoiled at iteration %d\n", k->name, what,
               at);
    return at;
}

void kernel_start_timer(kernel *k)
{
    MPI_Barrier(MPI_COMM_WORLD);
    k->start = MPI_Wtime();
}

void kernel_stop_timer(kernel *k)
{
    MPI_Barrier(MPI_COMM_WORLD);
    k->seconds = MPI_Wtime() - k->start;
}

int kernel_finish(kernel *k, int passed, const char *value_fmt, ...)
{
    MPI_Bcast(&passed, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (k->rank == 0) {
        char value[512];
        va_list ap;
        va_start(ap, value_fmt);
        vsnprintf(value, sizeof value, value_fmt, ap);
        va_end(ap);
        printf("time: %.3f s\n", k->seconds);
        printf("verification: %s %s\n", passed ? "passed" : "failed", value);
        fflush(stdout);
    }
    shoal_or_die(shoal_finalize(), "shoal_finalize");
    MPI_Finalize();
    return passed ? 0 : 1;
}

double kernel_rel_error(double got, double want)
{
    return want != 0.0 ? fabs((got - want) / want) : fabs(got);
}

void *kernel_alloc(const kernel *k, size_t bytes)
{
    void *p = malloc(bytes > 0 ? bytes : 1);
    kernel_require(k, p != NULL, "out of memory (%zu bytes)", bytes);
    return p;
}

/* --- NAS random numbers --- */

#define MASK46          ((UINT64_C(1) << 46) - 1)
#define TWO_TO_MINUS_46 (1.0 / 70368744177664.0)

/* Both factors are below 2^46, so their product modulo 2^64, which unsigned arithmetic
 * gives exactly, has the right low 46 bits. */
static uint64_t mulmod46(uint64_t a, uint64_t x)
{
    return (a * x) & MASK46;
}

double randlc(double *x, double a)
{
    uint64_t v = mulmod46((uint64_t)a, (uint64_t)*x);
    *x = (double)v;
    return (double)v * TWO_TO_MINUS_46;
}

void vranlc(size_t n, double *x, double a, double *y)
{
    uint64_t v = (uint64_t)*x, m = (uint64_t)a;
    for (size_t i = 0; i < n; i++) {
        v = mulmod46(m, v);
        y[i] = (double)v * TWO_TO_MINUS_46;
    }
    *x = (double)v;
}

double nas_power(double a, uint64_t n)
{
    uint64_t result = 1, base = (uint64_t)a;
    for (; n > 0; n >>= 1) {
        if (n & 1)
            result = mulmod46(result, base);
        base = mulmod46(base, base);
    }
    return (double)result;
}
