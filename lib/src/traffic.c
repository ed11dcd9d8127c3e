/*
 * traffic.c - the traffic file of a rank (docs/traffic.md): what it sent to each peer
 * up to a checkpoint, as text, written beside the job's shards by the writer thread.
 * No MPI here; the counting is pmpi.c's.
 *
 *   $SHOAL_DIR/$SHOAL_JOB/traffic/<rank>
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/* The longest header and peer line; their numbers are printed from ints, long longs,
 * uint64s and doubles below 1e15 seconds. */
#define HEADER_MAX    256
#define PEER_LINE_MAX 64

int traffic_format(const struct traffic_snapshot *s, char **text, size_t *len)
{
    size_t lines = 0;
    for (int i = 0; i < s->nranks; i++)
        if (s->peers[i].messages > 0)
            lines++;
    size_t cap = HEADER_MAX + lines * PEER_LINE_MAX;
    char *buf = malloc(cap);
    if (buf == NULL)
        return ENOMEM;
    /* A clock or an estimate out of range must not make a line the reader rejects. */
    double mpi = s->seconds_mpi >= 0 && s->seconds_mpi < 1e15 ? s->seconds_mpi : 0;
    double total = s->seconds_total >= 0 && s->seconds_total < 1e15 ? s->seconds_total : 0;
    int n = snprintf(buf, cap,
                     "shoal-traffic 1 rank %d nranks %d epoch %lld first_epoch %lld "
                     "seconds_mpi %.6f seconds_total %.6f\n",
                     s->rank, s->nranks, s->epoch, s->first_epoch, mpi, total);
    if (n < 0 || n >= HEADER_MAX) {
        free(buf);
        return EINVAL;
    }
    size_t off = (size_t)n;
    for (int i = 0; i < s->nranks; i++) {
        const struct traffic_peer *p = &s->peers[i];
        if (p->messages == 0)
            continue;
        n = snprintf(buf + off, cap - off, "%d %llu %llu\n", i, (unsigned long long)p->bytes,
                     (unsigned long long)p->messages);
        if (n < 0 || (size_t)n >= cap - off) {
            free(buf);
            return EINVAL;
        }
        off += (size_t)n;
    }
    *text = buf;
    *len = off;
    return 0;
}

int traffic_write(const char *jobdir, const struct traffic_snapshot *s, char *failed_path,
                  size_t failed_len)
{
    char dir[PATH_MAX], path[PATH_MAX];
    if (jobdir_path(dir, sizeof dir, jobdir, JOBDIR_TRAFFIC_DIR, 0, s->rank) != 0 ||
        jobdir_path(path, sizeof path, jobdir, JOBDIR_TRAFFIC, 0, s->rank) != 0) {
        (void)jobdir_path(failed_path, failed_len, jobdir, JOBDIR_TRAFFIC_DIR, 0, s->rank);
        return ENAMETOOLONG;
    }
    snprintf(failed_path, failed_len, "%s", dir);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return errno;
    char *text;
    size_t len;
    snprintf(failed_path, failed_len, "%s", path);
    int err = traffic_format(s, &text, &len);
    if (err)
        return err;
    /* Not fsynced: a file lost in a crash only delays what the coordinator learns. */
    err = store_write_atomic(path, text, len, 0);
    free(text);
    return err;
}
