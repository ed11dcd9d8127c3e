/*
 * abi_shard.c - the machine-written test vectors of docs/shard-format.md ("Portability"),
 * and their restore on another machine. One rank, no runner:
 *
 *   abi_shard write DIR   writes, through libshoal, a shard of job abi-<isa> with one
 *                         plain region of every MPI basic datatype of the format
 *                         (region id = the datatype's code), 3 known values each, into
 *                         DIR/abi-<isa>/e00000001/r000000.shard
 *   abi_shard restore DIR JOB
 *                         restores epoch 1 of JOB from DIR (a shard another machine
 *                         wrote, copied there), and checks that every region is the
 *                         known values bit for bit, or, where the two machines' long
 *                         double differ, that shoal_recover refuses with
 *                         SHOAL_ERR_PORTABLE and restores the rest once the long double
 *                         regions are unprotected. Prints one line per check, exits 1 on
 *                         a failure.
 *
 * The values are written in the machine's own representation (int64_t, float, long
 * double...), which is what the vectors record; internal/shard/vectors_test.go states the
 * bytes they must be independently.
 */
#include <complex.h>
#include <float.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shoal.h"

enum cat { SIGNED, UNSIGNED, BOOL, REAL, CPLX };

struct dt {
    int code;
    MPI_Datatype type;
    int size; /* of one element: of a complex, both parts */
    enum cat cat;
};

#define N 3 /* elements of each region */

static const struct dt *types(int *n)
{
    static struct dt t[64];
    const struct dt all[] = {
        {1, MPI_CHAR, 1, SIGNED},
        {2, MPI_SIGNED_CHAR, 1, SIGNED},
        {3, MPI_UNSIGNED_CHAR, 1, UNSIGNED},
        {4, MPI_BYTE, 1, UNSIGNED},
        {5, MPI_SHORT, 2, SIGNED},
        {6, MPI_UNSIGNED_SHORT, 2, UNSIGNED},
        {7, MPI_INT, 4, SIGNED},
        {8, MPI_UNSIGNED, 4, UNSIGNED},
        {9, MPI_LONG, 8, SIGNED},
        {10, MPI_UNSIGNED_LONG, 8, UNSIGNED},
        {11, MPI_LONG_LONG, 8, SIGNED},
        {12, MPI_UNSIGNED_LONG_LONG, 8, UNSIGNED},
        {13, MPI_FLOAT, 4, REAL},
        {14, MPI_DOUBLE, 8, REAL},
        {15, MPI_LONG_DOUBLE, 16, REAL},
        {16, MPI_WCHAR, 4, SIGNED},
        {17, MPI_C_BOOL, 1, BOOL},
        {18, MPI_INT8_T, 1, SIGNED},
        {19, MPI_INT16_T, 2, SIGNED},
        {20, MPI_INT32_T, 4, SIGNED},
        {21, MPI_INT64_T, 8, SIGNED},
        {22, MPI_UINT8_T, 1, UNSIGNED},
        {23, MPI_UINT16_T, 2, UNSIGNED},
        {24, MPI_UINT32_T, 4, UNSIGNED},
        {25, MPI_UINT64_T, 8, UNSIGNED},
        {26, MPI_C_FLOAT_COMPLEX, 8, CPLX},
        {27, MPI_C_DOUBLE_COMPLEX, 16, CPLX},
        {28, MPI_C_LONG_DOUBLE_COMPLEX, 32, CPLX},
        {29, MPI_AINT, 8, SIGNED},
        {30, MPI_OFFSET, 8, SIGNED},
        {31, MPI_COUNT, 8, SIGNED},
        {32, MPI_INTEGER, 4, SIGNED},
        {33, MPI_REAL, 4, REAL},
        {34, MPI_DOUBLE_PRECISION, 8, REAL},
        {35, MPI_COMPLEX, 8, CPLX},
        {36, MPI_DOUBLE_COMPLEX, 16, CPLX},
        {37, MPI_LOGICAL, 4, BOOL},
        {38, MPI_CHARACTER, 1, SIGNED},
        {39, MPI_INTEGER1, 1, SIGNED},
        {40, MPI_INTEGER2, 2, SIGNED},
        {41, MPI_INTEGER4, 4, SIGNED},
        {42, MPI_INTEGER8, 8, SIGNED},
        {43, MPI_REAL4, 4, REAL},
        {44, MPI_REAL8, 8, REAL},
        {45, MPI_COMPLEX8, 8, CPLX},
        {46, MPI_COMPLEX16, 16, CPLX},
    };
    *n = (int)(sizeof all / sizeof all[0]);
    memcpy(t, all, sizeof all);
    return t;
}

/* The known values: integers 1, -2, 100 (as unsigned: the same bits); logicals 1, 0,
 * 1; reals 1.5, -2.25, 1024; complex numbers 1.5 - 2.25i, 1024 + 0.5i, -1 + 3i. */
/* A long double's bytes at p: those of its value only, its padding (x87's 6 bytes of
 * 16) left 0, since a variable's padding is whatever the stack held. */
static void put_ld(unsigned char *p, long double v)
{
    memcpy(p, &v, LDBL_MANT_DIG == 64 ? 10 : sizeof v);
}

static void fill(const struct dt *t, unsigned char *buf)
{
    static const long long ints[N] = {1, -2, 100};
    static const int bools[N] = {1, 0, 1};
    static const double reals[N] = {1.5, -2.25, 1024};
    static const double cplx[N][2] = {{1.5, -2.25}, {1024, 0.5}, {-1, 3}};
    memset(buf, 0, (size_t)t->size * N); /* a long double's padding too */
    for (int i = 0; i < N; i++) {
        unsigned char *p = buf + (size_t)t->size * i;
        if (t->cat == SIGNED || t->cat == UNSIGNED || t->cat == BOOL) {
            long long v = t->cat == BOOL ? bools[i] : ints[i];
            int8_t v1 = (int8_t)v;
            int16_t v2 = (int16_t)v;
            int32_t v4 = (int32_t)v;
            int64_t v8 = (int64_t)v;
            memcpy(p, t->size == 1 ? (void *)&v1 : t->size == 2 ? (void *)&v2 : t->size == 4 ? (void *)&v4 : (void *)&v8,
                   (size_t)t->size);
        } else if (t->cat == REAL) {
            float f = (float)reals[i];
            double d = reals[i];
            if (t->size == 4)
                memcpy(p, &f, 4);
            else if (t->size == 8)
                memcpy(p, &d, 8);
            else
                put_ld(p, reals[i]);
        } else {
            float complex f = (float)cplx[i][0] + (float)cplx[i][1] * I;
            double complex d = cplx[i][0] + cplx[i][1] * I;
            if (t->size == 8) {
                memcpy(p, &f, 8);
            } else if (t->size == 16) {
                memcpy(p, &d, 16);
            } else {
                put_ld(p, cplx[i][0]);
                put_ld(p + 16, cplx[i][1]);
            }
        }
    }
}

static int failures;

static void check(int ok, const char *what)
{
    printf("%s: %s\n", ok ? "ok" : "FAIL", what);
    failures += !ok;
}

static int is_long_double(const struct dt *t)
{
    return t->code == 15 || t->code == 28;
}

int main(int argc, char **argv)
{
    if (argc < 3 || (strcmp(argv[1], "write") != 0 && (strcmp(argv[1], "restore") != 0 || argc < 4))) {
        fprintf(stderr, "usage: abi_shard write DIR | abi_shard restore DIR JOB\n");
        return 2;
    }
    int writing = strcmp(argv[1], "write") == 0;
#if defined(__x86_64__)
    const char *isa = "amd64";
#elif defined(__aarch64__)
    const char *isa = "arm64";
#else
    const char *isa = "unknown";
#endif
    char job[64];
    snprintf(job, sizeof job, "abi-%s", isa);
    setenv("SHOAL_DIR", argv[2], 1);
    setenv("SHOAL_JOB", writing ? job : argv[3], 1);
    setenv("SHOAL_CKPT_INTERVAL", "0", 1);
    setenv("SHOAL_TRAFFIC", "0", 1);
    setenv("SHOAL_RESTART_EPOCH", writing ? "0" : "1", 1);
    MPI_Init(&argc, &argv);
    int n;
    const struct dt *t = types(&n);
    unsigned char *want[64], *got[64];
    for (int i = 0; i < n; i++) {
        int size;
        MPI_Type_size(t[i].type, &size);
        if (size != t[i].size) {
            fprintf(stderr, "abi_shard: datatype %d has %d bytes here, not %d\n", t[i].code, size,
                    t[i].size);
            return 1;
        }
        want[i] = malloc((size_t)t[i].size * N);
        got[i] = calloc(N, (size_t)t[i].size);
        fill(&t[i], want[i]);
    }
    int rc = shoal_init(MPI_COMM_WORLD);
    if (rc != SHOAL_SUCCESS) {
        fprintf(stderr, "abi_shard: shoal_init: %s\n", shoal_strerror(rc));
        return 1;
    }
    if (writing) {
        for (int i = 0; i < n && rc == SHOAL_SUCCESS; i++)
            rc = shoal_protect(t[i].code, want[i], N, t[i].type);
        if (rc == SHOAL_SUCCESS)
            rc = shoal_checkpoint();
        check(rc == SHOAL_SUCCESS, "a shard with a region of every basic datatype written");
    } else {
        check(shoal_status() == SHOAL_RESTARTED, "restarting from epoch 1");
        for (int i = 0; i < n; i++)
            shoal_protect(t[i].code, got[i], N, t[i].type);
        int same_ld = strcmp(argv[3], job) == 0; /* this program wrote it: no refusal */
        rc = shoal_recover();
        if (same_ld) {
            check(rc == SHOAL_SUCCESS, "every region restored on the machine that wrote it");
        } else {
            char line[160];
            snprintf(line, sizeof line, "shoal_recover refuses the long double regions (%s)",
                     shoal_strerror(rc));
            check(rc == SHOAL_ERR_PORTABLE, line);
            for (int i = 0; i < n; i++)
                if (is_long_double(&t[i]))
                    shoal_unprotect(t[i].code);
            rc = shoal_recover();
            check(rc == SHOAL_SUCCESS, "the other regions restored without them");
        }
        for (int i = 0; i < n; i++) {
            if (!same_ld && is_long_double(&t[i]))
                continue;
            char what[96];
            snprintf(what, sizeof what, "region %d restored bit for bit", t[i].code);
            check(memcmp(got[i], want[i], (size_t)t[i].size * N) == 0, what);
        }
    }
    shoal_finalize();
    MPI_Finalize();
    return failures > 0 || rc != SHOAL_SUCCESS;
}
