/* testutil.c - see testutil.h. */
#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "check.h"
#include "internal.h"
#include "testutil.h"

int t_rank, t_nranks;
char t_base[256];

void t_setup(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &t_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &t_nranks);
    snprintf(check_prefix, sizeof check_prefix, "rank %d: ", t_rank);
    if (t_rank == 0) {
        const char *tmp = getenv("TMPDIR");
        snprintf(t_base, sizeof t_base, "%s/shoal-test-XXXXXX", tmp ? tmp : "/tmp");
        if (mkdtemp(t_base) == NULL) {
            perror("mkdtemp");
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    MPI_Bcast(t_base, sizeof t_base, MPI_CHAR, 0, MPI_COMM_WORLD);
}

int t_finish(void)
{
    int local[2] = {check_passed, check_failed}, total[2];
    MPI_Allreduce(local, total, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    int status = total[1] == 0 && total[0] > 0 ? 0 : 1;
    if (t_rank == 0) {
        if (getenv("SHOAL_TEST_KEEP") == NULL) {
            char cmd[300];
            snprintf(cmd, sizeof cmd, "rm -rf '%s'", t_base);
            if (system(cmd) != 0)
                fprintf(stderr, "could not remove %s\n", t_base);
        }
        printf("(%d ranks) ", t_nranks);
        check_summary(total[0], total[1]);
    }
    MPI_Finalize();
    return status;
}

void t_env(const char *job)
{
    for (const char *const *v = config_env_vars; *v != NULL; v++)
        unsetenv(*v);
    setenv("SHOAL_DIR", t_base, 1);
    setenv("SHOAL_JOB", job, 1);
}

void t_barrier(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
}

void t_unfinish(const char *job)
{
    char path[512];
    t_barrier();
    if (t_rank == 0) {
        t_job_path(path, sizeof path, job, "finished");
        unlink(path);
    }
    t_barrier();
}

void t_job_path(char *out, size_t len, const char *job, const char *name)
{
    snprintf(out, len, "%s/%s/%s", t_base, job, name);
}

void t_shard_path(char *out, size_t len, const char *job, long long epoch, int rank)
{
    snprintf(out, len, "%s/%s/e%08lld/r%06d.shard", t_base, job, epoch, rank);
}

int t_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

long long t_file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

void t_read_text(const char *path, char *buf, size_t len)
{
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = 0;
    fclose(f);
}

int t_write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc(size > 0 ? (size_t)size : 1);
    if (buf != NULL && fread(buf, 1, (size_t)size, f) != (size_t)size) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)size;
    return buf;
}

static int spill(const char *path, const unsigned char *buf, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t n = fwrite(buf, 1, len, f);
    return (fclose(f) == 0 && n == len) ? 0 : -1;
}

int t_copy(const char *src, const char *dst)
{
    size_t len;
    unsigned char *buf = slurp(src, &len);
    if (buf == NULL)
        return -1;
    int rc = spill(dst, buf, len);
    free(buf);
    return rc;
}

int t_flip_byte(const char *path, long long off)
{
    size_t len;
    unsigned char *buf = slurp(path, &len);
    if (buf == NULL)
        return -1;
    if (off < 0)
        off += (long long)len;
    int rc = -1;
    if (off >= 0 && off < (long long)len) {
        buf[off] ^= 0x5a;
        rc = spill(path, buf, len);
    }
    free(buf);
    return rc;
}

int t_truncate(const char *path, long long size)
{
    return truncate(path, (off_t)size);
}

int t_patch_u32_resealed(const char *path, long long off, uint32_t value)
{
    size_t len;
    unsigned char *buf = slurp(path, &len);
    if (buf == NULL || len < 136 || off + 4 > (long long)len - 8) {
        free(buf);
        return -1;
    }
    for (int i = 0; i < 4; i++)
        buf[off + i] = (unsigned char)(value >> (8 * i));
    uint64_t sum = XXH3_64bits(buf, len - 8);
    for (int i = 0; i < 8; i++)
        buf[len - 8 + i] = (unsigned char)(sum >> (8 * i));
    int rc = spill(path, buf, len);
    free(buf);
    return rc;
}

void t_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Writes request-checkpoint as the runner does: whole, then renamed into place. */
int t_write_request(const char *job, const char *content)
{
    char tmp[512], path[512];
    t_job_path(tmp, sizeof tmp, job, "request-checkpoint.tmp");
    t_job_path(path, sizeof path, job, "request-checkpoint");
    return t_write_text(tmp, content) == 0 && rename(tmp, path) == 0 ? 0 : -1;
}
