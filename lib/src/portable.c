/*
 * portable.c - whether a region written on one machine restores on another
 * (docs/shard-format.md, "Portability"). A version 3 shard records its writer's
 * instruction set and long double format; every instruction set it names is
 * little-endian LP64 with the same sizes, alignments and representations of every
 * basic datatype but long double, so a region's bytes mean the same on a reader of
 * another of them unless they hold long double (x87's 80-bit extended format on amd64,
 * IEEE binary128 on arm64) or were laid out by the writer's compiler (a struct's
 * padding). Those are refused, each in one line; everything else restores bit for bit.
 */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct shard_abi portable_this_abi(void)
{
    struct shard_abi a = {SHARD_ISA_UNKNOWN, SHARD_LD_UNKNOWN};
#if defined(__x86_64__) && defined(__LP64__)
    a.isa = SHARD_ISA_AMD64;
#elif defined(__aarch64__) && defined(__LP64__) && defined(__ORDER_LITTLE_ENDIAN__) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    a.isa = SHARD_ISA_ARM64;
#endif
#if LDBL_MANT_DIG == 64
    a.long_double = SHARD_LD_X87;
#elif LDBL_MANT_DIG == 113
    a.long_double = SHARD_LD_BINARY128;
#elif LDBL_MANT_DIG == 53
    a.long_double = SHARD_LD_BINARY64;
#elif LDBL_MANT_DIG == 106
    a.long_double = SHARD_LD_DOUBLE_DOUBLE;
#endif
    return a;
}

const char *portable_isa_name(uint8_t isa)
{
    switch (isa) {
    case SHARD_ISA_AMD64:
        return "amd64";
    case SHARD_ISA_ARM64:
        return "arm64";
    default:
        return "unknown";
    }
}

const char *portable_long_double_name(uint8_t ld)
{
    switch (ld) {
    case SHARD_LD_X87:
        return "x87 80-bit";
    case SHARD_LD_BINARY128:
        return "IEEE binary128";
    case SHARD_LD_BINARY64:
        return "IEEE binary64";
    case SHARD_LD_DOUBLE_DOUBLE:
        return "double-double";
    default:
        return "unknown";
    }
}

const char *portable_datatype_name(uint16_t dtype)
{
    static const char *const names[] = {
        "bytes", "MPI_CHAR", "MPI_SIGNED_CHAR", "MPI_UNSIGNED_CHAR", "MPI_BYTE", "MPI_SHORT",
        "MPI_UNSIGNED_SHORT", "MPI_INT", "MPI_UNSIGNED", "MPI_LONG", "MPI_UNSIGNED_LONG",
        "MPI_LONG_LONG", "MPI_UNSIGNED_LONG_LONG", "MPI_FLOAT", "MPI_DOUBLE", "MPI_LONG_DOUBLE",
        "MPI_WCHAR", "MPI_C_BOOL", "MPI_INT8_T", "MPI_INT16_T", "MPI_INT32_T", "MPI_INT64_T",
        "MPI_UINT8_T", "MPI_UINT16_T", "MPI_UINT32_T", "MPI_UINT64_T", "MPI_C_FLOAT_COMPLEX",
        "MPI_C_DOUBLE_COMPLEX", "MPI_C_LONG_DOUBLE_COMPLEX", "MPI_AINT", "MPI_OFFSET",
        "MPI_COUNT", "MPI_INTEGER", "MPI_REAL", "MPI_DOUBLE_PRECISION", "MPI_COMPLEX",
        "MPI_DOUBLE_COMPLEX", "MPI_LOGICAL", "MPI_CHARACTER", "MPI_INTEGER1", "MPI_INTEGER2",
        "MPI_INTEGER4", "MPI_INTEGER8", "MPI_REAL4", "MPI_REAL8", "MPI_COMPLEX8",
        "MPI_COMPLEX16",
    };
    return dtype < sizeof names / sizeof names[0] ? names[dtype] : "an unknown datatype";
}

/* Whether a named (predefined) datatype holds long double. */
static int named_long_double(MPI_Datatype t)
{
    return t == MPI_LONG_DOUBLE || t == MPI_C_LONG_DOUBLE_COMPLEX || t == MPI_LONG_DOUBLE_INT;
}

/* SHARD_FLAG_LONG_DOUBLE when the type map of t holds long double; a type whose
 * contents cannot be had (or nested too deep) counts as holding it, so that it is never
 * restored wrong. */
static uint8_t walk(MPI_Datatype t, int depth)
{
    int ni, na, nd, combiner;
    if (MPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS)
        return SHARD_FLAG_LONG_DOUBLE;
    if (combiner == MPI_COMBINER_NAMED)
        return named_long_double(t) ? SHARD_FLAG_LONG_DOUBLE : 0;
    if (depth > 16 || ni < 0 || na < 0 || nd < 0)
        return SHARD_FLAG_LONG_DOUBLE;
    int *ints = malloc(sizeof *ints * (size_t)(ni + 1));
    MPI_Aint *addrs = malloc(sizeof *addrs * (size_t)(na + 1));
    MPI_Datatype *types = malloc(sizeof *types * (size_t)(nd + 1));
    uint8_t flags = 0;
    if (ints == NULL || addrs == NULL || types == NULL ||
        MPI_Type_get_contents(t, ni, na, nd, ints, addrs, types) != MPI_SUCCESS) {
        flags = SHARD_FLAG_LONG_DOUBLE;
        nd = 0;
    }
    for (int i = 0; i < nd; i++) {
        flags |= walk(types[i], depth + 1);
        int n, a, d, comb;
        if (MPI_Type_get_envelope(types[i], &n, &a, &d, &comb) == MPI_SUCCESS &&
            comb != MPI_COMBINER_NAMED)
            MPI_Type_free(&types[i]);
    }
    free(ints);
    free(addrs);
    free(types);
    return flags;
}

uint8_t portable_type_flags(MPI_Datatype type)
{
    return walk(type, 0);
}

/* 1 with the line saying why in msg when region id is not portable from writer to
 * reader, else 0. */
static int refusal(struct shard_abi writer, struct shard_abi reader, int32_t id, uint16_t dtype,
                   uint8_t flags, char *msg, size_t len)
{
    const char *w = portable_isa_name(writer.isa), *r = portable_isa_name(reader.isa);
    if (writer.isa == SHARD_ISA_UNKNOWN || reader.isa == SHARD_ISA_UNKNOWN) {
        snprintf(msg, len,
                 "region %d (%s) was written on an %s machine; this machine is %s: not portable",
                 id, portable_datatype_name(dtype), w, r);
        return 1;
    }
    if (flags & SHARD_FLAG_ABI_BOUND) {
        snprintf(msg, len,
                 "region %d holds a derived datatype with holes (a struct's padding) laid out "
                 "on %s; this machine is %s: not portable",
                 id, w, r);
        return 1;
    }
    int ld = dtype == 15 || dtype == 28 || (flags & SHARD_FLAG_LONG_DOUBLE);
    if (ld && writer.long_double != reader.long_double) {
        snprintf(msg, len,
                 "region %d holds %s written on %s (%s); this %s machine's long double is %s: "
                 "not portable",
                 id, (flags & SHARD_FLAG_LONG_DOUBLE) ? "long double in a derived datatype"
                                                      : portable_datatype_name(dtype),
                 w, portable_long_double_name(writer.long_double), r,
                 portable_long_double_name(reader.long_double));
        return 1;
    }
    return 0;
}

int portable_region(uint32_t version, struct shard_abi writer, struct shard_abi reader,
                    int32_t id, uint16_t dtype, uint8_t flags, char *msg, size_t len)
{
    /* The same ABI, two machines of one unlisted kind among them, restore as before
     * version 3 did. */
    if (version < 3 || (writer.isa == reader.isa && writer.long_double == reader.long_double))
        return 1;
    return !refusal(writer, reader, id, dtype, flags, msg, len);
}

void portable_note(struct portable_refusals *r, int32_t id, const char *why)
{
    if (r->n++ == 0) {
        snprintf(r->first, sizeof r->first, "%s", why);
        r->others[0] = 0;
        return;
    }
    size_t used = strlen(r->others);
    if (used < sizeof r->others)
        snprintf(r->others + used, sizeof r->others - used, "%s%d", used ? ", " : "", id);
}

int portable_verdict(const struct portable_refusals *r, char *msg, size_t len)
{
    if (r->n == 0)
        return SHOAL_SUCCESS;
    if (r->n == 1)
        snprintf(msg, len, "%s", r->first);
    else
        snprintf(msg, len, "%s; so %s %s", r->first, r->n == 2 ? "is region" : "are regions",
                 r->others);
    return SHOAL_ERR_PORTABLE;
}
