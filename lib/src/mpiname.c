/*
 * mpiname.c - which MPI this library was built for, and which one the program runs.
 *
 * A program built with one MPI (mpicc.mpich) and linked with a libshoal built for the
 * other (Open MPI's) loads both libraries: its MPI calls go to its own MPI, while this
 * library was compiled against the other's mpi.h, whose handles mean nothing to it. The
 * first call that passes a handle fails obscurely (MPICH: "Invalid errhandler") or
 * worse. shoal_init asks the MPI that answers, before passing it any handle, through the
 * one call whose signature the two share and which needs no handle,
 * MPI_Get_library_version, and refuses a mismatch in one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *mpiname_built(void)
{
#if defined(OMPI_MAJOR_VERSION)
    return MPINAME_OPENMPI;
#elif defined(MPICH_VERSION)
    return MPINAME_MPICH;
#else
    return NULL;
#endif
}

const char *mpiname_of(const char *library_version)
{
    if (strncmp(library_version, "Open MPI", 8) == 0)
        return MPINAME_OPENMPI;
    if (strncmp(library_version, "MPICH", 5) == 0)
        return MPINAME_MPICH;
    return NULL;
}

int mpiname_check(char *msg, size_t len)
{
    /* Big enough for either MPI's MPI_MAX_LIBRARY_VERSION_STRING (Open MPI's is 256,
     * MPICH's 8192): the MPI that answers may be the other one. */
    static char version[8192 + 1];
    int n = 0;
    memset(version, 0, sizeof version);
    if (MPI_Get_library_version(version, &n) != MPI_SUCCESS)
        return 0;
    const char *built = mpiname_built(), *runs = mpiname_of(version);
    if (built == NULL || runs == NULL || strcmp(built, runs) == 0)
        return 0;
    char first[128];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(version, ",\n"), version);
    for (char *p = first; *p; p++)
        if (*p == '\t')
            *p = ' ';
    snprintf(msg, len,
             "this libshoal is built for %s, but the program runs %s (%s): build it with "
             "%s's compiler wrapper against the libshoal built for %s",
             built, runs, first, runs, runs);
    return 1;
}
