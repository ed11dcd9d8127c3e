/*
 * transfer.c - moving pieces of old shards into a new rank's memory after a change of
 * the rank count (docs/libshoal.md, "Changing the rank count"). A piece whose old shard
 * is in the rank's own checkpoint directory is read from the file straight into place;
 * any other is read by a rank that has the shard in its directory and sent with MPI:
 * the ranks first tell each other what they need (MPI_Alltoallv of the pieces'
 * descriptions), then the bytes go in rounds of MPI_Alltoallv in which no rank sends or
 * receives more than the chunk (SHOAL_RESTORE_CHUNK), so that the memory a restore takes
 * stays the chunk's, however large the state. Each byte a rank needs is moved once.
 *
 * Below resize.c; it knows nothing of the library's context: the caller says which
 * files hold the old shards (checked to be the very files verified) and where each
 * piece's bytes lie at both ends (layout.c's runs).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

/* The description of a piece a rank asks another to read: old rank, bytes, then the
 * source runs (base, run_bytes, nruns, nouter, then ext and stride of each outer
 * dimension), as 64-bit words. */
#define REQ_FIXED 6

/* The old shard's file, opened on first use and checked to be the one verified. */
static int shard_fd(struct xfer_job *j, int *fds, int old_rank)
{
    if (fds[old_rank] >= 0)
        return fds[old_rank];
    char path[PATH_MAX];
    if (jobdir_path(path, sizeof path, j->jobdir, JOBDIR_SHARD, j->epoch, old_rank) != 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    fds[old_rank] = store_open_shard(path, &j->ids[old_rank]);
    return fds[old_rank];
}

static void fail(struct xfer_job *j, int old_rank, int err)
{
    if (j->msg[0] != 0)
        return;
    char text[128];
    snprintf(j->msg, sizeof j->msg,
             "rank %d: reading old shard e%08lld/r%06d.shard failed: %s", j->rank, j->epoch,
             old_rank,
             err == ESTALE ? "it changed since it was verified"
                           : shoal_errno_text(err, text, sizeof text));
}

/* Reads bytes [pos, pos + n) of a piece's stream from its shard into out. */
static int read_stream(int fd, const struct layout_runs *src, uint64_t pos, uint64_t n,
                       unsigned char *out)
{
    while (n > 0) {
        uint64_t k = pos / src->run_bytes, in = pos % src->run_bytes;
        uint64_t len = src->run_bytes - in < n ? src->run_bytes - in : n;
        int err = store_pread(fd, out, (size_t)len, layout_run_offset(src, k) + in);
        if (err)
            return err;
        out += len;
        pos += len;
        n -= len;
    }
    return 0;
}

/* Copies bytes [pos, pos + n) of a piece's stream from in to where they go. */
static void scatter(const struct xfer_piece *p, uint64_t pos, uint64_t n, const unsigned char *in)
{
    const struct layout_runs *r = &p->dst_runs;
    while (n > 0) {
        uint64_t k = pos / r->run_bytes, at = pos % r->run_bytes;
        uint64_t len = r->run_bytes - at < n ? r->run_bytes - at : n;
        memcpy(p->dst + layout_run_offset(r, k) + at, in, (size_t)len);
        in += len;
        pos += len;
        n -= len;
    }
}

/* A piece from this rank's own directory: each stretch that is contiguous at both ends
 * read from the file into place. */
static int read_local(int fd, const struct xfer_piece *p)
{
    const struct layout_runs *s = &p->src, *d = &p->dst_runs;
    for (uint64_t pos = 0; pos < p->bytes;) {
        uint64_t ks = pos / s->run_bytes, is = pos % s->run_bytes;
        uint64_t kd = pos / d->run_bytes, id = pos % d->run_bytes;
        uint64_t len = p->bytes - pos;
        if (s->run_bytes - is < len)
            len = s->run_bytes - is;
        if (d->run_bytes - id < len)
            len = d->run_bytes - id;
        int err = store_pread(fd, p->dst + layout_run_offset(d, kd) + id, (size_t)len,
                              layout_run_offset(s, ks) + is);
        if (err)
            return err;
        pos += len;
    }
    return 0;
}

static size_t request_words(const struct layout_runs *r)
{
    return REQ_FIXED + 2 * (size_t)r->nouter;
}

static uint64_t *put_request(uint64_t *w, const struct xfer_piece *p)
{
    *w++ = (uint64_t)p->old_rank;
    *w++ = p->bytes;
    *w++ = p->src.base;
    *w++ = p->src.run_bytes;
    *w++ = p->src.nruns;
    *w++ = p->src.nouter;
    for (uint32_t i = 0; i < p->src.nouter; i++) {
        *w++ = p->src.ext[i];
        *w++ = p->src.stride[i];
    }
    return w;
}

/* Parses one request at w (left words of them); NULL when malformed. */
static const uint64_t *get_request(const uint64_t *w, size_t left, struct xfer_piece *p,
                                   int nold)
{
    if (left < REQ_FIXED || w[0] >= (uint64_t)nold || w[5] > SHARD_MAX_DIMS ||
        left < REQ_FIXED + 2 * w[5] || w[3] == 0)
        return NULL;
    memset(p, 0, sizeof *p);
    p->old_rank = (int)w[0];
    p->bytes = w[1];
    p->src.base = w[2];
    p->src.run_bytes = w[3];
    p->src.nruns = w[4];
    p->src.nouter = (uint32_t)w[5];
    for (uint32_t i = 0; i < p->src.nouter; i++) {
        p->src.ext[i] = w[REQ_FIXED + 2 * i];
        p->src.stride[i] = w[REQ_FIXED + 2 * i + 1];
    }
    return w + REQ_FIXED + 2 * p->src.nouter;
}

/* A stream between this rank and one peer: pieces in order, and how far it has gone. */
struct stream {
    int *piece; /* indexes into the piece array */
    int n;
    uint64_t len, done;
    int at;          /* the piece being moved */
    uint64_t within; /* bytes of it moved */
};

/* Moves the next n bytes of stream s: reads them from the shards into buf (send), or
 * scatters them from buf into place (receive). */
static void advance(struct xfer_job *j, struct stream *s, struct xfer_piece *pieces, uint64_t n,
                    unsigned char *buf, int send, int *fds)
{
    while (n > 0) {
        struct xfer_piece *p = &pieces[s->piece[s->at]];
        uint64_t k = p->bytes - s->within < n ? p->bytes - s->within : n;
        if (send) {
            int fd = shard_fd(j, fds, p->old_rank);
            int err = fd < 0 ? errno : read_stream(fd, &p->src, s->within, k, buf);
            if (err)
                fail(j, p->old_rank, err); /* the round goes on: the error is agreed later */
        } else {
            scatter(p, s->within, k, buf);
        }
        buf += k;
        n -= k;
        s->done += k;
        s->within += k;
        if (s->within == p->bytes) {
            s->at++;
            s->within = 0;
        }
    }
}

static void free_streams(struct stream *s, int n)
{
    if (s == NULL)
        return;
    for (int i = 0; i < n; i++)
        free(s[i].piece);
    free(s);
}

/* Builds the streams of pieces by peer (peer_of) in their order; 0 or -1 (memory). */
static int make_streams(struct stream *s, int npeers, const struct xfer_piece *pieces, int n,
                        int (*peer_of)(const struct xfer_piece *))
{
    for (int i = 0; i < n; i++) {
        int peer = peer_of(&pieces[i]);
        if (peer >= 0 && pieces[i].bytes > 0)
            s[peer].n++;
    }
    for (int r = 0; r < npeers; r++) {
        s[r].piece = malloc(sizeof *s[r].piece * (size_t)(s[r].n > 0 ? s[r].n : 1));
        if (s[r].piece == NULL)
            return -1;
        s[r].n = 0;
    }
    for (int i = 0; i < n; i++) {
        int peer = peer_of(&pieces[i]);
        if (peer >= 0 && pieces[i].bytes > 0) {
            s[peer].piece[s[peer].n++] = i;
            s[peer].len += pieces[i].bytes;
        }
    }
    return 0;
}

static int server_of(const struct xfer_piece *p)
{
    return p->server;
}

/* 1 on every rank when ok is 1 on every rank. */
static int all_ok(struct xfer_job *j, int ok, int *mrc)
{
    int all = 0;
    *mrc = MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, j->comm);
    return *mrc == MPI_SUCCESS && all;
}

/* Exchanges the requests: each rank learns the pieces it reads for each other one, in
 * *served (*nserved of them; a piece's server is the rank it is for). Collective; the
 * same code on every rank. */
static int exchange_requests(struct xfer_job *j, const struct xfer_piece *pieces, int n,
                             struct xfer_piece **served, int *nserved)
{
    int size = j->nranks, mrc;
    int *c = calloc(4 * (size_t)size, sizeof(int));
    int *scount = c, *sdispl = c + size, *rcount = c + 2 * size, *rdispl = c + 3 * size;
    uint64_t *sbuf = NULL, *rbuf = NULL;
    *served = NULL;
    *nserved = 0;
    size_t words = 0, rwords = 0;
    for (int i = 0; c != NULL && i < n; i++)
        if (pieces[i].server >= 0 && pieces[i].bytes > 0) {
            scount[pieces[i].server] += (int)request_words(&pieces[i].src);
            words += request_words(&pieces[i].src);
        }
    int ok = c != NULL && words <= INT_MAX &&
             (sbuf = malloc(sizeof *sbuf * (words > 0 ? words : 1))) != NULL;
    if (ok) {
        for (int r = 1; r < size; r++)
            sdispl[r] = sdispl[r - 1] + scount[r - 1];
        /* Each server's requests in the order of the pieces: the order of its stream. */
        for (int r = 0; r < size; r++) {
            uint64_t *w = sbuf + sdispl[r];
            for (int i = 0; i < n; i++)
                if (pieces[i].server == r && pieces[i].bytes > 0)
                    w = put_request(w, &pieces[i]);
        }
    }
    int rc = SHOAL_ERR_MPI;
    if (!all_ok(j, ok, &mrc)) {
        rc = mrc == MPI_SUCCESS ? SHOAL_ERR_NOMEM : SHOAL_ERR_MPI;
        goto out;
    }
    if (MPI_Alltoall(scount, 1, MPI_INT, rcount, 1, MPI_INT, j->comm) != MPI_SUCCESS)
        goto out;
    for (int r = 0; r < size; r++) {
        rdispl[r] = (int)(rwords < INT_MAX ? rwords : INT_MAX);
        rwords += (size_t)rcount[r];
    }
    /* At most one piece per REQ_FIXED words. */
    ok = rwords <= INT_MAX && (rbuf = malloc(sizeof *rbuf * (rwords > 0 ? rwords : 1))) != NULL &&
         (*served = malloc(sizeof **served * (rwords / REQ_FIXED + 1))) != NULL;
    if (!all_ok(j, ok, &mrc)) {
        rc = mrc == MPI_SUCCESS ? SHOAL_ERR_NOMEM : SHOAL_ERR_MPI;
        goto out;
    }
    if (MPI_Alltoallv(sbuf, scount, sdispl, MPI_UINT64_T, rbuf, rcount, rdispl, MPI_UINT64_T,
                      j->comm) != MPI_SUCCESS)
        goto out;
    rc = SHOAL_SUCCESS;
    for (int r = 0; r < size && rc == SHOAL_SUCCESS; r++) {
        const uint64_t *w = rbuf + rdispl[r], *end = w + rcount[r];
        while (w < end) {
            struct xfer_piece *p = &(*served)[*nserved];
            w = get_request(w, (size_t)(end - w), p, j->nold);
            if (w == NULL) {
                snprintf(j->msg, sizeof j->msg, "rank %d: a malformed request from rank %d",
                         j->rank, r);
                rc = SHOAL_ERR_IO;
                break;
            }
            p->server = r;
            (*nserved)++;
        }
    }
out:
    free(c);
    free(sbuf);
    free(rbuf);
    if (rc != SHOAL_SUCCESS) {
        free(*served);
        *served = NULL;
        *nserved = 0;
    }
    return rc;
}

/* The rounds of MPI_Alltoallv that move the served pieces' bytes (send[r] for rank r)
 * and the remote pieces' (recv[r] from rank r). Collective. */
static int move_rounds(struct xfer_job *j, struct stream *send, struct xfer_piece *served,
                       struct stream *recv, struct xfer_piece *pieces, int *fds)
{
    int size = j->nranks;
    int peers[2] = {0, 0};
    for (int r = 0; r < size; r++) {
        peers[0] += send[r].len > 0;
        peers[1] += recv[r].len > 0;
    }
    /* The widest rank sets every pair's share of a round: no rank sends or receives
     * more than the chunk in one. */
    int width = peers[0] > peers[1] ? peers[0] : peers[1], widest;
    if (MPI_Allreduce(&width, &widest, 1, MPI_INT, MPI_MAX, j->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    if (widest == 0)
        return SHOAL_SUCCESS; /* nothing to send anywhere */
    uint64_t cap = j->chunk / (uint64_t)widest;
    if (cap == 0)
        cap = 1;
    if (cap > INT_MAX / (uint64_t)widest)
        cap = INT_MAX / (uint64_t)widest;
    long long rounds = 0, all;
    for (int r = 0; r < size; r++) {
        long long a = (long long)((send[r].len + cap - 1) / cap);
        long long b = (long long)((recv[r].len + cap - 1) / cap);
        rounds = a > rounds ? a : rounds;
        rounds = b > rounds ? b : rounds;
    }
    if (MPI_Allreduce(&rounds, &all, 1, MPI_LONG_LONG, MPI_MAX, j->comm) != MPI_SUCCESS)
        return SHOAL_ERR_MPI;
    int *c = calloc(4 * (size_t)size, sizeof(int));
    unsigned char *sbuf = malloc((size_t)cap * (size_t)(peers[0] > 0 ? peers[0] : 1));
    unsigned char *rbuf = malloc((size_t)cap * (size_t)(peers[1] > 0 ? peers[1] : 1));
    int mrc, rc = SHOAL_SUCCESS;
    if (!all_ok(j, c != NULL && sbuf != NULL && rbuf != NULL, &mrc))
        rc = mrc == MPI_SUCCESS ? SHOAL_ERR_NOMEM : SHOAL_ERR_MPI;
    int *scount = c, *sdispl = c + size, *rcount = c + 2 * size, *rdispl = c + 3 * size;
    for (long long round = 0; rc == SHOAL_SUCCESS && round < all; round++) {
        int soff = 0, roff = 0;
        for (int r = 0; r < size; r++) {
            uint64_t left = send[r].len - send[r].done, k = left < cap ? left : cap;
            scount[r] = (int)k;
            sdispl[r] = soff;
            advance(j, &send[r], served, k, sbuf + soff, 1, fds);
            soff += (int)k;
            left = recv[r].len - recv[r].done;
            rcount[r] = (int)(left < cap ? left : cap);
            rdispl[r] = roff;
            roff += rcount[r];
        }
        if (MPI_Alltoallv(sbuf, scount, sdispl, MPI_BYTE, rbuf, rcount, rdispl, MPI_BYTE,
                          j->comm) != MPI_SUCCESS) {
            rc = SHOAL_ERR_MPI;
            break;
        }
        j->sent_bytes += (uint64_t)soff;
        j->recv_bytes += (uint64_t)roff;
        for (int r = 0; r < size; r++)
            if (rcount[r] > 0)
                advance(j, &recv[r], pieces, (uint64_t)rcount[r], rbuf + rdispl[r], 0, fds);
    }
    free(c);
    free(sbuf);
    free(rbuf);
    return rc;
}

int transfer_run(struct xfer_job *j, struct xfer_piece *pieces, int n)
{
    j->msg[0] = 0;
    int size = j->nranks, mrc, rc;
    int *fds = malloc(sizeof *fds * (size_t)(j->nold > 0 ? j->nold : 1));
    struct stream *send = calloc((size_t)size, sizeof *send);
    struct stream *recv = calloc((size_t)size, sizeof *recv);
    struct xfer_piece *served = NULL;
    int nserved = 0;
    for (int o = 0; fds != NULL && o < j->nold; o++)
        fds[o] = -1;
    if (!all_ok(j, fds != NULL && send != NULL && recv != NULL, &mrc)) {
        rc = mrc == MPI_SUCCESS ? SHOAL_ERR_NOMEM : SHOAL_ERR_MPI;
        goto out;
    }
    rc = exchange_requests(j, pieces, n, &served, &nserved);
    if (rc != SHOAL_SUCCESS)
        goto out; /* the same on every rank */
    int ok = make_streams(send, size, served, nserved, server_of) == 0 &&
             make_streams(recv, size, pieces, n, server_of) == 0;
    if (!all_ok(j, ok, &mrc)) {
        rc = mrc == MPI_SUCCESS ? SHOAL_ERR_NOMEM : SHOAL_ERR_MPI;
        goto out;
    }
    /* The pieces in this rank's own directory first, straight into place. */
    for (int i = 0; i < n; i++) {
        if (pieces[i].server >= 0 || pieces[i].bytes == 0)
            continue;
        int fd = shard_fd(j, fds, pieces[i].old_rank);
        int err = fd < 0 ? errno : read_local(fd, &pieces[i]);
        if (err)
            fail(j, pieces[i].old_rank, err);
        else
            j->local_bytes += pieces[i].bytes;
    }
    rc = move_rounds(j, send, served, recv, pieces, fds);
    if (rc == SHOAL_SUCCESS && j->msg[0] != 0)
        rc = SHOAL_ERR_IO;
out:
    for (int o = 0; fds != NULL && o < j->nold; o++)
        if (fds[o] >= 0)
            close(fds[o]);
    free(fds);
    free_streams(send, send != NULL ? size : 0);
    free_streams(recv, recv != NULL ? size : 0);
    free(served);
    return rc;
}
