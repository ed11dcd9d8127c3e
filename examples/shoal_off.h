/*
 * shoal_off.h - one source, two programs: checkpointed with Shoal, or plain MPI.
 *
 * Include this instead of <shoal.h>, which it includes. Compiled with -DSHOAL_OFF instead,
 * every shoal_* function becomes an inline no-op that returns SHOAL_SUCCESS (and
 * shoal_status says "fresh start"), so the same source builds the plain MPI baseline that
 * measures what Shoal costs, without libshoal.
 */
#ifndef SHOAL_OFF_H
#define SHOAL_OFF_H

#include <mpi.h>
#include <stdio.h>

#ifndef SHOAL_OFF
#include <shoal.h>
#else
#include <stddef.h>
#include <stdint.h>

#define SHOAL_SUCCESS 0
#define SHOAL_FRESH   0

static inline int shoal_init(MPI_Comm comm)
{
    return (void)comm, SHOAL_SUCCESS;
}
static inline int shoal_protect(int id, void *ptr, size_t count, MPI_Datatype type)
{
    return (void)id, (void)ptr, (void)count, (void)type, SHOAL_SUCCESS;
}
static inline int shoal_protect_block(int id, void *ptr, size_t count, MPI_Datatype type,
                                      uint64_t global, uint64_t offset)
{
    return (void)id, (void)ptr, (void)count, (void)type, (void)global, (void)offset,
           SHOAL_SUCCESS;
}
static inline int shoal_protect_subarray(int id, void *ptr, int ndims, const int sizes[],
                                         const int subsizes[], const int starts[], int order,
                                         MPI_Datatype type)
{
    return (void)id, (void)ptr, (void)ndims, (void)sizes, (void)subsizes, (void)starts,
           (void)order, (void)type, SHOAL_SUCCESS;
}
static inline int shoal_protect_replicated(int id, void *ptr, size_t count, MPI_Datatype type)
{
    return (void)id, (void)ptr, (void)count, (void)type, SHOAL_SUCCESS;
}
static inline int shoal_unprotect(int id)
{
    return (void)id, SHOAL_SUCCESS;
}
static inline int shoal_status(void)
{
    return 0;
}
static inline int shoal_recover(void)
{
    return SHOAL_SUCCESS;
}
static inline int shoal_stored_count(int id, size_t *count)
{
    return (void)id, (void)count, SHOAL_SUCCESS;
}
static inline int shoal_restart_nranks(int *nranks)
{
    return (void)nranks, SHOAL_SUCCESS;
}
static inline int shoal_snapshot(void)
{
    return SHOAL_SUCCESS;
}
static inline int shoal_checkpoint(void)
{
    return SHOAL_SUCCESS;
}
static inline int shoal_progress(double fraction)
{
    return (void)fraction, SHOAL_SUCCESS;
}
static inline int shoal_finalize(void)
{
    return SHOAL_SUCCESS;
}
static inline const char *shoal_strerror(int code)
{
    return (void)code, "success (Shoal compiled out)";
}
static inline int shoal_version_number(void)
{
    return 0;
}
#endif

/* Ends the whole job when a Shoal call fails: a program that cannot checkpoint or restore
 * its state must not go on and print a result that looks right. */
static inline void shoal_or_die(int code, const char *call)
{
    if (code != SHOAL_SUCCESS) {
        fprintf(stderr, "%s: %s\n", call, shoal_strerror(code));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

#endif /* SHOAL_OFF_H */
