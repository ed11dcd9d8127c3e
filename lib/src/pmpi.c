/*
 * pmpi.c - who talks to whom. libshoal defines the MPI point-to-point calls itself and
 * forwards each to its PMPI_ name (the MPI standard's profiling interface), so that a
 * program linked with libshoal has its sends counted, per destination rank of
 * MPI_COMM_WORLD: bytes (count × MPI_Type_size) and messages. It also estimates the
 * time spent in point-to-point calls, so that an interval splits into computing and
 * communicating. Collectives are not counted: the messages they send are the MPI
 * library's algorithm, not the program's pattern. docs/traffic.md has the rest.
 *
 * Counting runs between shoal_init and shoal_finalize. Cost per send: a load to see that
 * counting is on, the datatype's size (from a table for the predefined types), two
 * additions (atomic ones only under MPI_THREAD_MULTIPLE) and, for communicators other
 * than MPI_COMM_WORLD, a cached look-up of the communicator's world ranks.
 *
 * The time is sampled, not clocked: two clock reads around each call cost about 56 ns
 * here, on calls that take 150 ns for a small message over shared memory (they made a
 * ping-pong of small messages 1.35 times as slow). So one call in N is timed, N chosen
 * from the rate of calls so that about one call in 100 µs is, at most one in 64 (N = 1
 * for a program that calls rarely), and each timed call stands for the N around it.
 * The fast path is a decrement. An earlier design had a thread in every rank look whether the
 * rank was inside a call 100 times a second; on the testbed its wake-ups made a job of six
 * ranks on two 2-core hosts take 21 to 54 s where it took 12 s without (docs/traffic.md).
 *
 * The calls themselves are listed in pmpi.list, with what each counts; their bodies are
 * generated from it (pmpi_wrappers.inc).
 */
#if defined(__linux__)
#define _GNU_SOURCE /* dladdr1, dlinfo: which object a symbol comes from */
#include <dlfcn.h>
#include <link.h>
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* About one call is timed per SAMPLE_NS; N, the calls between two timed ones, stays in
 * [1, SAMPLE_N_MAX]. */
#define SAMPLE_NS    100000
#define SAMPLE_N_MAX 64

/* The world ranks of a communicator's group (its remote group for an
 * intercommunicator), kept as the communicator's attribute; -1: not in
 * MPI_COMM_WORLD (a spawned or connected process). */
struct comm_ranks {
    int size;
    int world[];
};

/* A persistent send request and what each MPI_Start of it sends. */
struct persistent {
    MPI_Request request;
    int world;
    uint64_t bytes;
};

static struct {
    /* NULL while not counting; set last by traffic_start, so that a call that sees
     * it sees everything else set. */
    struct traffic_peer *peers;
    int nranks;
    int multiple;    /* MPI_THREAD_MULTIPLE: counters are updated atomically */
    double started;  /* when counting started (shoal_now) */

    /* Timing one call in n: calls left before the next timed one, the n it was drawn
     * from (the weight of that call), when the last timed call started, the generator
     * of the draws, and the sum of timed calls' nanoseconds × their weights. Under
     * MPI_THREAD_MULTIPLE left is decremented atomically and the rest may race, which
     * only blurs the estimate. */
    uint32_t left;
    uint32_t n;
    uint32_t rng;
    uint64_t last_ns;
    uint64_t mpi_ns;

    int keyval; /* of struct comm_ranks; created once, at the first traffic_start */
    pthread_mutex_t build_mu;
    /* The last communicator looked up, without MPI_THREAD_MULTIPLE; the attribute's
     * delete callback clears it before the handle can name another communicator. */
    MPI_Comm last_comm;
    struct comm_ranks *last_ranks;

    /* Persistent send requests made while counting, an open-addressing table. */
    struct persistent *requests;
    size_t requests_cap; /* a power of 2, or 0 */
    size_t nrequests;
    pthread_mutex_t requests_mu;
} tr = {.keyval = MPI_KEYVAL_INVALID,
        .build_mu = PTHREAD_MUTEX_INITIALIZER,
        .requests_mu = PTHREAD_MUTEX_INITIALIZER};

static struct traffic_peer *counting(void)
{
    return __atomic_load_n(&tr.peers, __ATOMIC_ACQUIRE);
}

/* ---- time in calls ---- */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A call being made: when it started, the calls it stands for (0: not timed) and the
 * microseconds since the last timed call started (16 bytes: returned in registers). */
struct timed {
    uint64_t start;
    uint32_t weight;
    uint32_t since_us;
};

/* The rare path of enter(): times this call and draws the next to time. */
__attribute__((noinline)) static struct timed timed_start(void)
{
    uint64_t start = now_ns();
    /* The next n: the calls since the last timed one over the time they took, scaled to
     * SAMPLE_NS; the countdown is drawn uniformly from [1, 2n - 1], mean n, so that the
     * timed calls do not keep step with a periodic program. */
    uint64_t since = start - tr.last_ns;
    uint64_t n = since > 0 ? (uint64_t)tr.n * SAMPLE_NS / since : SAMPLE_N_MAX;
    n = n < 1 ? 1 : n > SAMPLE_N_MAX ? SAMPLE_N_MAX : n;
    uint32_t x = tr.rng;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    tr.rng = x;
    tr.last_ns = start;
    /* This call stands for the n of its own draw. */
    uint64_t us = since / 1000;
    struct timed t = {start, tr.n, us > UINT32_MAX ? UINT32_MAX : (uint32_t)us};
    tr.n = (uint32_t)n;
    __atomic_store_n(&tr.left, 1 + x % (uint32_t)(2 * n - 1), __ATOMIC_RELAXED);
    return t;
}

/* The rare path of leave(): adds the timed call's time. */
__attribute__((noinline)) static void timed_end(struct timed t)
{
    uint64_t end = now_ns(), took = end > t.start ? end - t.start : 0;
    /* The calls it stands for were made since the last timed one: a long wait after
     * quick calls (a weight of 64) counts once, not 64 times. */
    uint64_t ns = took * t.weight, most = took + (uint64_t)t.since_us * 1000;
    if (ns > most)
        ns = most;
    if (tr.multiple)
        __atomic_fetch_add(&tr.mpi_ns, ns, __ATOMIC_RELAXED);
    else
        tr.mpi_ns += ns;
}

static inline struct timed enter(void)
{
    struct timed t = {0, 0, 0};
    if (counting() == NULL)
        return t;
    uint32_t left;
    if (tr.multiple)
        left = __atomic_sub_fetch(&tr.left, 1, __ATOMIC_RELAXED);
    else
        left = --tr.left;
    if (__builtin_expect(left != 0, 1))
        return t;
    return timed_start();
}

static inline void leave(struct timed t)
{
    if (__builtin_expect(t.weight != 0, 0))
        timed_end(t);
}

/* ---- world ranks of a communicator ---- */

static int delete_comm_ranks(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm, (void)keyval, (void)extra;
    if (tr.last_ranks == value) {
        tr.last_comm = MPI_COMM_NULL;
        tr.last_ranks = NULL;
    }
    free(value);
    return MPI_SUCCESS;
}

static struct comm_ranks *build_comm_ranks(MPI_Comm comm)
{
    struct comm_ranks *r = NULL;
    int *index = NULL;
    MPI_Group group = MPI_GROUP_NULL, world = MPI_GROUP_NULL;
    /* Two threads sending on a new communicator must not both set the attribute: the
     * second would delete the first one's table while it is in use. */
    pthread_mutex_lock(&tr.build_mu);
    void *value;
    int flag = 0, inter = 0, size = 0;
    if (PMPI_Comm_get_attr(comm, tr.keyval, &value, &flag) == MPI_SUCCESS && flag) {
        r = value;
        goto out;
    }
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS ||
        (inter ? PMPI_Comm_remote_group(comm, &group) : PMPI_Comm_group(comm, &group)) !=
            MPI_SUCCESS ||
        PMPI_Comm_group(MPI_COMM_WORLD, &world) != MPI_SUCCESS ||
        PMPI_Group_size(group, &size) != MPI_SUCCESS || size <= 0)
        goto out;
    r = malloc(sizeof *r + sizeof r->world[0] * (size_t)size);
    index = malloc(sizeof *index * (size_t)size);
    if (r == NULL || index == NULL)
        goto fail;
    r->size = size;
    for (int i = 0; i < size; i++)
        index[i] = i;
    if (PMPI_Group_translate_ranks(group, size, index, world, r->world) != MPI_SUCCESS)
        goto fail;
    for (int i = 0; i < size; i++)
        if (r->world[i] == MPI_UNDEFINED || r->world[i] < 0 || r->world[i] >= tr.nranks)
            r->world[i] = -1;
    if (PMPI_Comm_set_attr(comm, tr.keyval, r) != MPI_SUCCESS)
        goto fail;
    goto out;
fail:
    free(r);
    r = NULL;
out:
    free(index);
    if (group != MPI_GROUP_NULL)
        PMPI_Group_free(&group);
    if (world != MPI_GROUP_NULL)
        PMPI_Group_free(&world);
    pthread_mutex_unlock(&tr.build_mu);
    return r;
}

static const struct comm_ranks *comm_ranks(MPI_Comm comm)
{
    if (!tr.multiple && comm == tr.last_comm)
        return tr.last_ranks;
    void *value;
    int flag = 0;
    if (PMPI_Comm_get_attr(comm, tr.keyval, &value, &flag) != MPI_SUCCESS)
        return NULL;
    struct comm_ranks *r = flag ? value : build_comm_ranks(comm);
    if (r != NULL && !tr.multiple) {
        tr.last_comm = comm;
        tr.last_ranks = r;
    }
    return r;
}

/* The world rank of rank dest of comm; -1 for MPI_PROC_NULL and anything else not
 * counted. */
static int world_rank(MPI_Comm comm, int dest)
{
    if (dest == MPI_PROC_NULL || dest < 0)
        return -1;
    if (comm == MPI_COMM_WORLD)
        return dest < tr.nranks ? dest : -1;
    const struct comm_ranks *r = comm_ranks(comm);
    return (r != NULL && dest < r->size) ? r->world[dest] : -1;
}

/* ---- counting ---- */

static void add(struct traffic_peer *p, uint64_t bytes, uint64_t messages)
{
    if (tr.multiple) {
        __atomic_fetch_add(&p->bytes, bytes, __ATOMIC_RELAXED);
        __atomic_fetch_add(&p->messages, messages, __ATOMIC_RELAXED);
    } else {
        p->bytes += bytes;
        p->messages += messages;
    }
}

/* ---- sizes of the predefined datatypes ---- */

/* MPI_Type_size took a third of counting's time per message (4 to 6 ns of 15), so the
 * predefined types' sizes are looked up here: a table filled at traffic_start and never
 * changed while counting (so threads read it without a lock), open addressing on the
 * handle. Derived types, which a program may free and whose handles may then name
 * another type, are asked of MPI every time. */
#define TYPE_SLOTS 128 /* a power of 2, over twice the types below */

static struct {
    MPI_Datatype type;
    int size; /* 0: empty slot */
} type_sizes[TYPE_SLOTS];

static size_t type_slot(MPI_Datatype type)
{
    /* A pointer in Open MPI, an int in MPICH. */
    uint64_t h = (uint64_t)(uintptr_t)type * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 40) & (TYPE_SLOTS - 1);
}

static void fill_type_sizes(void)
{
    /* The C types a program sends, and the pairs of MPI_MINLOC/MAXLOC. */
    const MPI_Datatype types[] = {MPI_CHAR,
                                  MPI_SIGNED_CHAR,
                                  MPI_UNSIGNED_CHAR,
                                  MPI_BYTE,
                                  MPI_SHORT,
                                  MPI_UNSIGNED_SHORT,
                                  MPI_INT,
                                  MPI_UNSIGNED,
                                  MPI_LONG,
                                  MPI_UNSIGNED_LONG,
                                  MPI_LONG_LONG,
                                  MPI_UNSIGNED_LONG_LONG,
                                  MPI_FLOAT,
                                  MPI_DOUBLE,
                                  MPI_LONG_DOUBLE,
                                  MPI_WCHAR,
                                  MPI_C_BOOL,
                                  MPI_INT8_T,
                                  MPI_INT16_T,
                                  MPI_INT32_T,
                                  MPI_INT64_T,
                                  MPI_UINT8_T,
                                  MPI_UINT16_T,
                                  MPI_UINT32_T,
                                  MPI_UINT64_T,
                                  MPI_C_FLOAT_COMPLEX,
                                  MPI_C_DOUBLE_COMPLEX,
                                  MPI_AINT,
                                  MPI_OFFSET,
                                  MPI_COUNT,
                                  MPI_PACKED,
                                  MPI_2INT,
                                  MPI_FLOAT_INT,
                                  MPI_DOUBLE_INT,
                                  MPI_LONG_INT,
                                  MPI_SHORT_INT,
                                  MPI_LONG_DOUBLE_INT};
    static int filled; /* the sizes never change; and a thread may be reading them */
    if (filled)
        return;
    filled = 1;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        int size;
        if (types[k] == MPI_DATATYPE_NULL || PMPI_Type_size(types[k], &size) != MPI_SUCCESS ||
            size <= 0)
            continue;
        size_t i = type_slot(types[k]);
        while (type_sizes[i].size != 0 && type_sizes[i].type != types[k])
            i = (i + 1) & (TYPE_SLOTS - 1);
        type_sizes[i].type = types[k];
        type_sizes[i].size = size;
    }
}

/* Bytes of count elements of type; 0 for anything MPI would not send. */
static uint64_t message_bytes(int count, MPI_Datatype type)
{
    if (count <= 0)
        return 0;
    for (size_t i = type_slot(type); type_sizes[i].size != 0; i = (i + 1) & (TYPE_SLOTS - 1))
        if (type_sizes[i].type == type)
            return (uint64_t)count * (uint64_t)type_sizes[i].size;
    int size;
    if (PMPI_Type_size(type, &size) != MPI_SUCCESS || size <= 0)
        return 0;
    return (uint64_t)count * (uint64_t)size;
}

/* Counts one message sent, once the call that sends it succeeded. */
static void count_send(int rc, int count, MPI_Datatype type, int dest, MPI_Comm comm)
{
    struct traffic_peer *peers = counting();
    if (peers == NULL || rc != MPI_SUCCESS)
        return;
    int world = world_rank(comm, dest);
    if (world >= 0)
        add(&peers[world], message_bytes(count, type), 1);
}

/* ---- persistent requests: remembered at *_init, counted at each MPI_Start ---- */

static size_t request_slot(MPI_Request request)
{
    /* A pointer in Open MPI, an int in MPICH. */
    uint64_t h = (uint64_t)(uintptr_t)request * 0x9e3779b97f4a7c15ull;
    return (size_t)(h >> 32) & (tr.requests_cap - 1);
}

static void requests_lock(void)
{
    if (tr.multiple)
        pthread_mutex_lock(&tr.requests_mu);
}

static void requests_unlock(void)
{
    if (tr.multiple)
        pthread_mutex_unlock(&tr.requests_mu);
}

static int requests_grow(void)
{
    size_t cap = tr.requests_cap ? 2 * tr.requests_cap : 64;
    struct persistent *old = tr.requests, *grown = malloc(sizeof *grown * cap);
    if (grown == NULL)
        return -1;
    for (size_t i = 0; i < cap; i++)
        grown[i].request = MPI_REQUEST_NULL;
    size_t old_cap = tr.requests_cap;
    tr.requests = grown;
    tr.requests_cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].request == MPI_REQUEST_NULL)
            continue;
        size_t j = request_slot(old[i].request);
        while (grown[j].request != MPI_REQUEST_NULL)
            j = (j + 1) & (cap - 1);
        grown[j] = old[i];
    }
    free(old);
    return 0;
}

static void remember_request(int rc, MPI_Request *request, int count, MPI_Datatype type,
                             int dest, MPI_Comm comm)
{
    if (counting() == NULL || rc != MPI_SUCCESS)
        return;
    int world = world_rank(comm, dest);
    if (world < 0)
        return;
    struct persistent p = {*request, world, message_bytes(count, type)};
    requests_lock();
    /* At most half full, so that probes stay short. */
    if (2 * (tr.nrequests + 1) > tr.requests_cap && requests_grow() != 0) {
        requests_unlock();
        return;
    }
    size_t i = request_slot(p.request);
    while (tr.requests[i].request != MPI_REQUEST_NULL && tr.requests[i].request != p.request)
        i = (i + 1) & (tr.requests_cap - 1);
    if (tr.requests[i].request == MPI_REQUEST_NULL)
        tr.nrequests++;
    tr.requests[i] = p;
    requests_unlock();
}

/* Index of request in the table, or -1. Called with the table locked. */
static long find_request(MPI_Request request)
{
    if (tr.nrequests == 0)
        return -1;
    size_t i = request_slot(request);
    while (tr.requests[i].request != MPI_REQUEST_NULL) {
        if (tr.requests[i].request == request)
            return (long)i;
        i = (i + 1) & (tr.requests_cap - 1);
    }
    return -1;
}

static void count_start(int rc, const MPI_Request *requests, int n)
{
    struct traffic_peer *peers = counting();
    if (peers == NULL || rc != MPI_SUCCESS || tr.nrequests == 0)
        return;
    requests_lock();
    for (int k = 0; k < n; k++) {
        long i = find_request(requests[k]);
        if (i >= 0)
            add(&peers[tr.requests[i].world], tr.requests[i].bytes, 1);
    }
    requests_unlock();
}

static void forget_request(MPI_Request request)
{
    if (tr.nrequests == 0)
        return;
    requests_lock();
    long found = find_request(request);
    if (found >= 0) {
        /* Backward-shift deletion keeps every probe sequence unbroken. */
        size_t mask = tr.requests_cap - 1, hole = (size_t)found, i = hole;
        for (;;) {
            i = (i + 1) & mask;
            if (tr.requests[i].request == MPI_REQUEST_NULL)
                break;
            size_t home = request_slot(tr.requests[i].request);
            /* Entry i may fill the hole when its home is not in (hole, i]. */
            if (((i - home) & mask) >= ((i - hole) & mask)) {
                tr.requests[hole] = tr.requests[i];
                hole = i;
            }
        }
        tr.requests[hole].request = MPI_REQUEST_NULL;
        tr.nrequests--;
    }
    requests_unlock();
}

/* ---- the library's side ---- */

/* Where the program's calls to MPI go, which decides whether they can be counted. */
enum reach {
    REACH_HERE,     /* to the functions below */
    REACH_HIDDEN,   /* libshoal was loaded privately (Python's ctypes): its MPI_Send is
                       nobody's */
    REACH_ELSEWHERE /* to an object loaded before libshoal: libmpi, when the program was
                       linked with -lmpi before -lshoal, or another PMPI tool */
};

static enum reach reach(const char **elsewhere)
{
#if defined(__GLIBC__)
    /* dlsym on the program's handle looks where the program's own calls are resolved:
     * the program, then the global scope in load order. */
    void *program = dlopen(NULL, RTLD_LAZY);
    if (program == NULL)
        return REACH_HERE; /* cannot tell */
    struct link_map *main_map = NULL, *mine = NULL, *theirs = NULL;
    Dl_info info;
    enum reach r = REACH_HERE;
    void *first = dlsym(program, "MPI_Send");
    if (dlinfo(program, RTLD_DI_LINKMAP, &main_map) != 0 ||
        dladdr1((void *)traffic_start, &info, (void **)&mine, RTLD_DL_LINKMAP) == 0 ||
        mine == main_map) {
        /* Linked into the program (libshoal.a): its calls were bound here at link time. */
    } else if (dlsym(program, "shoal_init") == NULL) {
        r = REACH_HIDDEN;
    } else if (first != NULL && dladdr1(first, &info, (void **)&theirs, RTLD_DL_LINKMAP) != 0 &&
               theirs != mine) {
        *elsewhere = info.dli_fname;
        r = REACH_ELSEWHERE;
    }
    dlclose(program);
    return r;
#else
    (void)elsewhere;
    return REACH_HERE;
#endif
}

void traffic_start(struct traffic_snapshot *s, long long first_epoch, int enabled)
{
    memset(s, 0, sizeof *s);
    if (!enabled)
        return;
    int rank, nranks, level;
    if (PMPI_Comm_rank(MPI_COMM_WORLD, &rank) != MPI_SUCCESS ||
        PMPI_Comm_size(MPI_COMM_WORLD, &nranks) != MPI_SUCCESS ||
        PMPI_Query_thread(&level) != MPI_SUCCESS)
        return;
    const char *elsewhere = "";
    switch (reach(&elsewhere)) {
    case REACH_HERE:
        break;
    case REACH_HIDDEN:
        return; /* docs/traffic.md says so: a file of zeros would claim no traffic */
    case REACH_ELSEWHERE:
        if (rank == 0)
            shoal_log("traffic is not counted: the program's MPI calls go to %s, which comes "
                      "before libshoal; link with -lshoal before the MPI library, or set "
                      "SHOAL_TRAFFIC=0",
                      elsewhere);
        return;
    }
    if (nranks > TRAFFIC_MAX_RANKS) {
        if (rank == 0)
            shoal_log("%d ranks: traffic is counted for at most %d", nranks, TRAFFIC_MAX_RANKS);
        return;
    }
    if (tr.keyval == MPI_KEYVAL_INVALID &&
        PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_comm_ranks, &tr.keyval, NULL) !=
            MPI_SUCCESS) {
        tr.keyval = MPI_KEYVAL_INVALID;
        return;
    }
    /* The counters outlive shoal_finalize: a thread of the program may still be in a
     * send that read the pointer. A later shoal_init reuses them (the size of
     * MPI_COMM_WORLD never changes). */
    static struct traffic_peer *counters;
    if (counters == NULL)
        counters = calloc((size_t)nranks, sizeof *counters);
    s->peers = calloc((size_t)nranks, sizeof *s->peers);
    if (counters == NULL || s->peers == NULL) {
        if (rank == 0)
            shoal_log("out of memory for the traffic counters of %d ranks; not counting",
                      nranks);
        free(s->peers);
        s->peers = NULL;
        return;
    }
    memset(counters, 0, sizeof *counters * (size_t)nranks);

    tr.nranks = nranks;
    tr.last_comm = MPI_COMM_NULL;
    tr.last_ranks = NULL;
    tr.multiple = level == MPI_THREAD_MULTIPLE;
    fill_type_sizes();
    tr.started = shoal_now();
    tr.mpi_ns = 0;
    tr.n = 1;
    tr.left = 1;
    tr.last_ns = now_ns();
    tr.rng = 2463534242u ^ (uint32_t)rank;

    s->on = 1;
    s->rank = rank;
    s->nranks = nranks;
    s->first_epoch = first_epoch;
    __atomic_store_n(&tr.peers, counters, __ATOMIC_RELEASE);
}

void traffic_take(struct traffic_snapshot *s, long long epoch)
{
    struct traffic_peer *peers = counting();
    if (!s->on || peers == NULL)
        return;
    /* Relaxed loads: other threads may be adding under MPI_THREAD_MULTIPLE. */
    for (int i = 0; i < s->nranks; i++) {
        s->peers[i].bytes = __atomic_load_n(&peers[i].bytes, __ATOMIC_RELAXED);
        s->peers[i].messages = __atomic_load_n(&peers[i].messages, __ATOMIC_RELAXED);
    }
    s->epoch = epoch;
    s->seconds_total = shoal_now() - tr.started;
    s->seconds_mpi = (double)__atomic_load_n(&tr.mpi_ns, __ATOMIC_RELAXED) * 1e-9;
    if (!tr.multiple && s->seconds_mpi > s->seconds_total)
        s->seconds_mpi = s->seconds_total; /* one thread in calls: an estimate above that is noise */
}

void traffic_stop(struct traffic_snapshot *s)
{
    __atomic_store_n(&tr.peers, NULL, __ATOMIC_RELEASE);
    free(s->peers);
    memset(s, 0, sizeof *s);
}

/* ---- the program's side: MPI calls, each forwarded to its PMPI_ name ---- */

/* Generated from pmpi.list by pmpi_generate.py: one wrapper per call, all of the same
 * few shapes. Here, in this file's translation unit, so that enter() and leave() are
 * inlined into each of them. */
#include "pmpi_wrappers.inc"
