/*
 * shoal_f.c - the two calls the Fortran module cannot make through ISO_C_BINDING alone:
 * MPI handles are opaque C types that differ between MPIs (a pointer in Open MPI, an int
 * in MPICH), so the communicator arrives as a Fortran handle and the element type as its
 * size. Built into libshoalf with the module, so that libshoal exports only shoal.h.
 */
#include <shoal.h>

SHOAL_EXPORT int shoal_f_init(MPI_Fint comm);
SHOAL_EXPORT int shoal_f_protect(int id, void *ptr, size_t count, int elem_size);

int shoal_f_init(MPI_Fint comm)
{
    return shoal_init(MPI_Comm_f2c(comm));
}

/* A shard records only each region's element size and count, so any hole-free type of
 * the right size stores the same bytes as the C program's MPI_DOUBLE, MPI_INT... would. */
int shoal_f_protect(int id, void *ptr, size_t count, int elem_size)
{
    MPI_Datatype type;
    switch (elem_size) {
    case 1: type = MPI_INT8_T; break;
    case 2: type = MPI_INT16_T; break;
    case 4: type = MPI_INT32_T; break;
    case 8: type = MPI_INT64_T; break;
    case 16: type = MPI_C_DOUBLE_COMPLEX; break;
    default: return SHOAL_ERR_ARG;
    }
    return shoal_protect(id, ptr, count, type);
}
