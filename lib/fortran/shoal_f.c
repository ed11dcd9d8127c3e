/*
 * shoal_f.c - the calls the Fortran module cannot make through ISO_C_BINDING alone: MPI
 * handles are opaque C types that differ between MPIs (a pointer in Open MPI, an int in
 * MPICH), so the communicator arrives as a Fortran handle and the element type as a code
 * of the module's (generate.sh: 1 real(4), 2 real(8), 3 integer(4), 4 integer(8), 5
 * complex(8), 6 logical) with its size. Each gets the MPI datatype of the C type of the
 * same representation, so that a Fortran program's shards are a C program's
 * (docs/shard-format.md, "Datatype codes"). Built into libshoalf with the module, so that
 * libshoal exports only shoal.h.
 */
#include <shoal.h>

SHOAL_EXPORT int shoal_f_init(MPI_Fint comm);
SHOAL_EXPORT int shoal_f_protect(int id, void *ptr, size_t count, int elem_size, int ftype);
SHOAL_EXPORT int shoal_f_protect_block(int id, void *ptr, size_t count, int elem_size, int ftype,
                                       int64_t global, int64_t offset);
SHOAL_EXPORT int shoal_f_protect_subarray(int id, void *ptr, int ndims, const int *sizes,
                                          const int *subsizes, const int *starts, int elem_size,
                                          int ftype);
SHOAL_EXPORT int shoal_f_protect_replicated(int id, void *ptr, size_t count, int elem_size,
                                            int ftype);

int shoal_f_init(MPI_Fint comm)
{
    return shoal_init(MPI_Comm_f2c(comm));
}

/* The datatype of the module's type ftype of elem_size bytes: the C type of the same
 * representation; for a kind of another size, an integer type of that size (a shard
 * keeps the element size and count, so the bytes are the same); MPI_DATATYPE_NULL if
 * none. */
static MPI_Datatype type_of(int ftype, int elem_size)
{
    MPI_Datatype t = MPI_DATATYPE_NULL;
    switch (ftype) {
    case 1: t = MPI_FLOAT; break;
    case 2: t = MPI_DOUBLE; break;
    case 3: t = MPI_INT; break;
    case 4: t = MPI_INT64_T; break;
    case 5: t = MPI_C_DOUBLE_COMPLEX; break;
    case 6: t = MPI_LOGICAL; break;
    }
    int size = 0;
    if (t != MPI_DATATYPE_NULL && MPI_Type_size(t, &size) == MPI_SUCCESS && size == elem_size)
        return t;
    switch (elem_size) {
    case 1: return MPI_INT8_T;
    case 2: return MPI_INT16_T;
    case 4: return MPI_INT32_T;
    case 8: return MPI_INT64_T;
    case 16: return MPI_C_DOUBLE_COMPLEX;
    default: return MPI_DATATYPE_NULL;
    }
}

int shoal_f_protect(int id, void *ptr, size_t count, int elem_size, int ftype)
{
    MPI_Datatype t = type_of(ftype, elem_size);
    return t == MPI_DATATYPE_NULL ? SHOAL_ERR_ARG : shoal_protect(id, ptr, count, t);
}

int shoal_f_protect_block(int id, void *ptr, size_t count, int elem_size, int ftype,
                          int64_t global, int64_t offset)
{
    MPI_Datatype t = type_of(ftype, elem_size);
    if (t == MPI_DATATYPE_NULL || global < 0 || offset < 0)
        return SHOAL_ERR_ARG;
    return shoal_protect_block(id, ptr, count, t, (uint64_t)global, (uint64_t)offset);
}

int shoal_f_protect_subarray(int id, void *ptr, int ndims, const int *sizes, const int *subsizes,
                             const int *starts, int elem_size, int ftype)
{
    MPI_Datatype t = type_of(ftype, elem_size);
    if (t == MPI_DATATYPE_NULL)
        return SHOAL_ERR_ARG;
    return shoal_protect_subarray(id, ptr, ndims, sizes, subsizes, starts, MPI_ORDER_FORTRAN, t);
}

int shoal_f_protect_replicated(int id, void *ptr, size_t count, int elem_size, int ftype)
{
    MPI_Datatype t = type_of(ftype, elem_size);
    return t == MPI_DATATYPE_NULL ? SHOAL_ERR_ARG : shoal_protect_replicated(id, ptr, count, t);
}
