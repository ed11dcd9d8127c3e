/*
 * is - integer sort by buckets, after the NAS IS benchmark.
 *
 * 2^K keys in [0, 2^B), each the mean of four NAS random numbers scaled to the key range (so
 * they pile up in the middle), are spread over the ranks. Every iteration changes two keys and
 * ranks them all: the key range is cut into 1024 buckets, the global bucket sizes (Allreduce)
 * decide which rank takes which buckets so each gets about the same number of keys, the keys
 * move there (Alltoall of the counts, Alltoallv of the keys), and each rank ranks its keys by
 * counting.
 *
 * Verification, after the last iteration: every rank places its keys by the ranks it found and
 * checks that they are in order, that the ranks together are in order, that no key was lost
 * (the count) and that the sorted keys are the ones the problem defines: an order-independent
 * hash of them against one of the keys generated afresh, with every iteration's two changes.
 * Shoal: the iteration counter and this rank's keys are protected.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel.h"

enum { LOG_BUCKETS = 10, BUCKETS = 1 << LOG_BUCKETS };
enum { ID_ITER = 1, ID_KEYS = 2 };

typedef struct {
    char problem;
    int log_keys, log_max_key, iterations;
    const char *nas; /* the NAS class of the same size */
} is_class;

/* NAS IS ranks its keys 10 times; ours more often, so that each class runs about as long
 * as it promises (S a second, W long enough for checkpoints at 10 s, A a minute). */
static const is_class classes[] = {
    {'S', 23, 19, 40, "A"},
    {'W', 25, 21, 250, "B"},
    {'A', 27, 23, 150, "C"},
};

static const is_class *find_class(char problem)
{
    for (size_t i = 0; i < sizeof classes / sizeof classes[0]; i++)
        if (classes[i].problem == problem)
            return &classes[i];
    return NULL;
}

/* This rank's share of the work, and the buffers the ranking reuses every iteration. */
typedef struct {
    int nranks, rank;
    int max_key, shift;      /* bucket of a key: key >> shift */
    int nkeys;               /* keys on this rank */
    int *keys;               /* the protected state */
    int *by_bucket;          /* this rank's keys ordered by bucket, ready to send */
    int *received;           /* keys of this rank's buckets, from every rank */
    int nreceived, capacity; /* of received */
    int *count;              /* per key value in [lo, hi): how many received keys */
    int lo, hi;              /* key values this rank ranks */
    int *send_counts, *send_displs, *recv_counts, *recv_displs;
} sorter;

/* Keys first .. first+count-1 of the global sequence: key i uses random numbers 4i+1..4i+4. */
static void generate_keys(int *keys, long first, int count, int max_key)
{
    double seed = NAS_SEED;
    randlc(&seed, nas_power(NAS_MULTIPLIER, 4 * (uint64_t)first));
    int scale = max_key / 4;
    for (int i = 0; i < count; i++) {
        double x = randlc(&seed, NAS_MULTIPLIER);
        x += randlc(&seed, NAS_MULTIPLIER);
        x += randlc(&seed, NAS_MULTIPLIER);
        x += randlc(&seed, NAS_MULTIPLIER);
        keys[i] = (int)(scale * x);
    }
}

/* The two keys NAS IS changes in iteration iter (from 0), at the start of rank 0's keys. */
static void change_keys(int *keys, int iter, int niter, int max_key)
{
    keys[iter + 1] = iter + 1;
    keys[iter + 1 + niter] = max_key - (iter + 1);
}

/* Gives rank r the buckets first[r] .. first[r+1]-1: each rank takes buckets until the keys
 * taken so far reach its share of the total. */
static void split_buckets(const int *bucket_total, int nranks, long total, int *first)
{
    long taken = 0;
    int r = 0;
    first[0] = 0;
    for (int b = 0; b < BUCKETS && r < nranks - 1; b++) {
        taken += bucket_total[b];
        if (taken >= (r + 1) * (total / nranks))
            first[++r] = b + 1;
    }
    while (r < nranks - 1)
        first[++r] = BUCKETS;
    first[nranks] = BUCKETS;
}

/* Moves every key to the rank that owns its bucket. */
static void exchange_keys(const kernel *k, sorter *s, long total)
{
    int local[BUCKETS] = {0}, global[BUCKETS], start[BUCKETS], first[s->nranks + 1];
    for (int i = 0; i < s->nkeys; i++)
        local[s->keys[i] >> s->shift]++;
    MPI_Allreduce(local, global, BUCKETS, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    split_buckets(global, s->nranks, total, first);

    for (int b = 0, offset = 0; b < BUCKETS; b++) {
        start[b] = offset;
        offset += local[b];
    }
    for (int i = 0; i < s->nkeys; i++)
        s->by_bucket[start[s->keys[i] >> s->shift]++] = s->keys[i];
    for (int r = 0; r < s->nranks; r++) {
        s->send_counts[r] = 0;
        for (int b = first[r]; b < first[r + 1]; b++)
            s->send_counts[r] += local[b];
        s->send_displs[r] = r == 0 ? 0 : s->send_displs[r - 1] + s->send_counts[r - 1];
    }
    MPI_Alltoall(s->send_counts, 1, MPI_INT, s->recv_counts, 1, MPI_INT, MPI_COMM_WORLD);
    s->nreceived = 0;
    for (int r = 0; r < s->nranks; r++) {
        s->recv_displs[r] = s->nreceived;
        s->nreceived += s->recv_counts[r];
    }
    if (s->nreceived > s->capacity) {
        free(s->received);
        s->capacity = s->nreceived + s->nreceived / 8;
        s->received = kernel_alloc(k, sizeof(int) * s->capacity);
    }
    MPI_Alltoallv(s->by_bucket, s->send_counts, s->send_displs, MPI_INT, s->received,
                  s->recv_counts, s->recv_displs, MPI_INT, MPI_COMM_WORLD);
    s->lo = first[s->rank] << s->shift;
    s->hi = first[s->rank + 1] << s->shift;
}

/* After it, count[v - lo] is the number of received keys <= v: the local rank, plus one, of
 * the last key equal to v. */
static void rank_keys(sorter *s)
{
    memset(s->count, 0, sizeof(int) * (s->hi - s->lo));
    for (int i = 0; i < s->nreceived; i++)
        s->count[s->received[i] - s->lo]++;
    for (int v = 1; v < s->hi - s->lo; v++)
        s->count[v] += s->count[v - 1];
}

/* Order-independent fingerprint of a multiset of keys, summed over all ranks. */
static uint64_t key_hash(const int *keys, int n)
{
    uint64_t local = 0, global;
    for (int i = 0; i < n; i++) {
        uint64_t z = (uint64_t)keys[i] + UINT64_C(0x9e3779b97f4a7c15);
        z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
        local += z ^ (z >> 31);
    }
    MPI_Allreduce(&local, &global, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return global;
}

/* Places the received keys at their ranks and checks the result is one sorted sequence of
 * the keys whose hash is want. */
static int full_verify(const kernel *k, sorter *s, long total, uint64_t want, uint64_t *hash)
{
    int *sorted = kernel_alloc(k, sizeof(int) * (s->nreceived > 0 ? s->nreceived : 1));
    for (int i = s->nreceived - 1; i >= 0; i--)
        sorted[--s->count[s->received[i] - s->lo]] = s->received[i];
    int ok = 1;
    for (int i = 1; i < s->nreceived; i++)
        ok &= sorted[i - 1] <= sorted[i];

    /* Each rank's (count, first key, last key), to check the order across ranks. */
    int mine[3] = {s->nreceived, s->nreceived ? sorted[0] : 0,
                   s->nreceived ? sorted[s->nreceived - 1] : 0};
    int *all = kernel_alloc(k, sizeof(int) * 3 * s->nranks);
    MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, MPI_COMM_WORLD);
    long count = 0;
    int last = -1;
    for (int r = 0; r < s->nranks; r++) {
        count += all[3 * r];
        if (all[3 * r] > 0) {
            ok &= last <= all[3 * r + 1];
            last = all[3 * r + 2];
        }
    }
    int all_ok;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    *hash = key_hash(sorted, s->nreceived);
    free(all);
    free(sorted);
    return all_ok && count == total && *hash == want;
}

/* The hash of all keys after niter iterations, from the problem definition alone. Uses
 * s->by_bucket. */
static uint64_t expected_hash(sorter *s, int niter)
{
    int *keys = s->by_bucket;
    generate_keys(keys, (long)s->rank * s->nkeys, s->nkeys, s->max_key);
    if (s->rank == 0)
        for (int iter = 0; iter < niter; iter++)
            change_keys(keys, iter, niter, s->max_key);
    return key_hash(keys, s->nkeys);
}

static void sorter_init(const kernel *k, sorter *s, const is_class *c)
{
    memset(s, 0, sizeof *s);
    s->nranks = k->nranks;
    s->rank = k->rank;
    s->max_key = 1 << c->log_max_key;
    s->shift = c->log_max_key - LOG_BUCKETS;
    long total = 1L << c->log_keys;
    s->nkeys = (int)(total / k->nranks);
    s->keys = kernel_alloc(k, sizeof(int) * s->nkeys);
    s->by_bucket = kernel_alloc(k, sizeof(int) * s->nkeys);
    s->count = kernel_alloc(k, sizeof(int) * s->max_key);
    s->send_counts = kernel_alloc(k, sizeof(int) * 4 * k->nranks);
    s->send_displs = s->send_counts + k->nranks;
    s->recv_counts = s->send_counts + 2 * k->nranks;
    s->recv_displs = s->send_counts + 3 * k->nranks;
    generate_keys(s->keys, (long)k->rank * s->nkeys, s->nkeys, s->max_key);
}

int main(int argc, char **argv)
{
    kernel k;
    kernel_init(&k, "is", &argc, &argv);
    const is_class *c = find_class(k.problem);
    long total = 1L << c->log_keys;
    kernel_require(&k, kernel_is_power_of_two(k.nranks) && total / k.nranks > 2 * c->iterations,
                   "needs a power-of-two number of ranks, not %d", k.nranks);
    if (k.rank == 0)
        printf("is: class %c (2^%d keys in [0, 2^%d), %d iterations, NAS class %s), %d ranks\n",
               c->problem, c->log_keys, c->log_max_key, c->iterations, c->nas, k.nranks);

    sorter s;
    sorter_init(&k, &s, c);
    int iter = 0;
    kernel_protect(ID_ITER, &iter, 1, MPI_INT);
    kernel_protect(ID_KEYS, s.keys, s.nkeys, MPI_INT);

    /* The last key, which no iteration changes. */
    int fault_iter = kernel_fault_at(&k, c->iterations / 2, "rank 0's last key");
    kernel_start_timer(&k);
    for (; iter < c->iterations; iter++) {
        kernel_snapshot(&k, &iter, c->iterations);
        if (iter == fault_iter && k.rank == 0)
            s.keys[s.nkeys - 1] = (s.keys[s.nkeys - 1] + 1) % s.max_key;
        if (k.rank == 0)
            change_keys(s.keys, iter, c->iterations, s.max_key);
        exchange_keys(&k, &s, total);
        rank_keys(&s);
    }
    kernel_stop_timer(&k);

    uint64_t hash, want = expected_hash(&s, c->iterations);
    int passed = full_verify(&k, &s, total, want, &hash);
    free(s.keys);
    free(s.by_bucket);
    free(s.received);
    free(s.count);
    free(s.send_counts);
    return kernel_finish(&k, passed, "keys=%ld hash=%016llx (expected %016llx)", total,
                         (unsigned long long)hash, (unsigned long long)want);
}
