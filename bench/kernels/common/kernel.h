/*
 * kernel.h - what the benchmark kernels (cg, mg, ft, is, ep) share: start-up and the
 * --class argument, Shoal calls with error checks, the NAS random number generator, and the
 * lines every kernel ends with.
 *
 * Output contract (other tools parse it): rank 0 prints, last of all,
 *     time: <seconds> s
 *     verification: passed|failed <what>=<value> ...
 * where <seconds> covers the iterations only (set-up and verification excluded).
 */
#ifndef KERNEL_H
#define KERNEL_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "shoal_off.h"

typedef struct {
    const char *name; /* "cg", ... */
    char problem;     /* 'S', 'W' or 'A', from --class */
    int rank, nranks;
    int restarted;  /* a checkpoint waits to be recovered by the first snapshot */
    double start;   /* MPI_Wtime when the iterations began */
    double seconds; /* time the iterations took, set by kernel_stop_timer */
    int fault;      /* SHOAL_KERNEL_FAULT=1 on rank 0: the test hook, see kernel_fault_at */
} kernel;

/* MPI_Init, --class S|W|A, SHOAL_KERNEL_FAULT, shoal_init. Bad arguments end the program
 * (exit status 2). */
void kernel_init(kernel *k, const char *name, int *argc, char ***argv);

/* Unless ok, prints the message and ends the whole job (MPI_Abort): for what a run cannot
 * recover from, such as running out of memory or a rank count the kernel cannot use. */
void kernel_require(const kernel *k, int ok, const char *fmt, ...);

int kernel_is_power_of_two(int n);

/* shoal_protect with the error check. */
void kernel_protect(int id, void *ptr, size_t count, MPI_Datatype type);

/* Call once per iteration, at a point with no message in flight, with the iteration counter
 * that the kernel protected. Checkpoints when one is due; after a restart, the first call
 * restores the protected state (*iter included) and says so. */
void kernel_snapshot(kernel *k, const int *iter, int niter);

/*
 * Test hook: a way to see that verification catches a wrong answer. With SHOAL_KERNEL_FAULT=1
 * in rank 0's environment, returns `at`, the iteration at which the kernel must spoil one
 * element of its protected state (`what`, which rank 0 names on stdout); otherwise -1, which
 * no iteration equals. Kernels test `iter == fault_iter` right after kernel_snapshot, so an
 * ordinary run pays one never-taken branch per iteration.
 */
int kernel_fault_at(const kernel *k, int at, const char *what);

/* Brackets the timed iterations. */
void kernel_start_timer(kernel *k);
void kernel_stop_timer(kernel *k);

/* Collective. Rank 0 prints `time:` and the verification line (value_fmt and its arguments
 * name the checked value), then shoal_finalize and MPI_Finalize. Returns the exit status:
 * 0 when rank 0 says passed, 1 otherwise. */
int kernel_finish(kernel *k, int passed, const char *value_fmt, ...);

/* Relative difference |got - want| / |want| (or |got| when want is 0). */
double kernel_rel_error(double got, double want);

/* malloc that ends the job with a message when memory runs out. */
void *kernel_alloc(const kernel *k, size_t bytes);

/*
 * The NAS Parallel Benchmarks' random numbers: x_{k+1} = a * x_k mod 2^46, returned as
 * x_{k+1} / 2^46, with the seed and multiplier held in doubles (the NAS interface). The
 * arithmetic is exact in 64-bit integers, so the values are the ones every NAS code draws.
 */
#define NAS_MULTIPLIER 1220703125.0 /* 5^13 */
#define NAS_SEED       314159265.0

double randlc(double *x, double a);
void vranlc(size_t n, double *x, double a, double *y); /* y[0..n-1], advances *x */
double nas_power(double a, uint64_t n);                /* a^n mod 2^46 */

#endif /* KERNEL_H */
