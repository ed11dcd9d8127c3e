/*
 * resize.h - declarations of the modules that restore a checkpoint written by another
 * number of ranks (docs/libshoal.md, "Changing the rank count"), included by internal.h
 * at its end: layout.c (where regions lie, no I/O), transfer.c (moving pieces of old
 * shards, below the context), resize.c (finding, verifying and sharing the old shards)
 * and pieces.c (the restore and shoal_read_old), the last two over the context.
 */
#ifndef SHOAL_RESIZE_H
#define SHOAL_RESIZE_H

/* ---- layout.c: where regions lie in their global arrays, and what a new rank needs
 * of the old ranks' regions after a change of the rank count; no I/O ---- */

/* The stable code of an MPI basic datatype (docs/shard-format.md), 0 for any other. */
uint16_t layout_datatype_code(MPI_Datatype type);
/* "per-rank", "block", "subarray", "replicated". */
const char *layout_kind_name(int kind);
/* Fills l (kind, ndims, order, sizes) from MPI_Type_create_subarray's arguments, order
 * a LAYOUT_ORDER_*, and its element count in *count: 0, or -1 with a message in msg. */
int layout_subarray(struct region_layout *l, int ndims, const int sizes[], const int subsizes[],
                    const int starts[], int order, uint64_t *count, char *msg, size_t len);
/* 1 when a and b are distributed regions of the same global array (kind, global size,
 * dimensions and order); layout_same_place: also the same part of it. */
int layout_same_array(const struct region_layout *a, const struct region_layout *b);
int layout_same_place(const struct region_layout *a, const struct region_layout *b);
/* "elements 10 to 20 of 100", "a C-order box 0+4, 2+3 of 8, 6", for messages. */
void layout_describe(char *out, size_t len, const struct region_layout *l, uint64_t count);
/* 1 when the boxes of subarrays a and b meet, their intersection in [lo, hi). */
int layout_intersect(const struct region_layout *a, const struct region_layout *b, uint64_t lo[],
                     uint64_t hi[]);
uint64_t layout_volume(uint32_t ndims, const uint64_t lo[], const uint64_t hi[]);

/* A piece's bytes as they lie in one buffer: nruns runs of run_bytes, run k at
 * layout_run_offset(k) from the buffer's start. The pieces' bytes are in the order of
 * the global array's elements, each end cutting them into its own runs. */
struct layout_runs {
    uint64_t base, run_bytes, nruns;
    uint32_t nouter;
    uint64_t ext[SHARD_MAX_DIMS], stride[SHARD_MAX_DIMS];
};
/* The runs of the box [lo, hi) (global coordinates) in the buffer of subarray box, of
 * elements of elem_size bytes; layout_runs_bytes: len bytes at offset, as one run. */
void layout_runs(const struct region_layout *box, uint64_t elem_size, const uint64_t lo[],
                 const uint64_t hi[], struct layout_runs *r);
void layout_runs_bytes(uint64_t offset, uint64_t len, struct layout_runs *r);
uint64_t layout_run_offset(const struct layout_runs *r, uint64_t k);

/* An old rank's part of a distributed region, and a piece of it that a new one needs:
 * for a block, elements [lo[0], hi[0]); for a subarray, the box [lo, hi). */
struct layout_part {
    int old_rank;
    const struct region_layout *layout;
    uint64_t count;
};
struct layout_piece {
    int old_rank;
    int part; /* index in the parts given to layout_plan */
    uint64_t lo[SHARD_MAX_DIMS], hi[SHARD_MAX_DIMS];
};
enum { LAYOUT_OK, LAYOUT_GAP, LAYOUT_OVERLAP };
struct layout_problem {
    int kind;           /* LAYOUT_GAP: no part holds element at (a block) or at
                           elements (a subarray: how many are missing); LAYOUT_OVERLAP:
                           two parts share elements */
    int old_rank[2];
    uint64_t at;
};
/* The pieces of parts (sorted here) that make up need (count elements): their number,
 * at most nparts, or -1 with why. */
int layout_plan(const struct region_layout *need, uint64_t need_count, struct layout_part *parts,
                int nparts, struct layout_piece *pieces, struct layout_problem *why);

/* ---- transfer.c: pieces of old shards into a new rank's memory (MPI) ---- */

/* A piece: bytes from old shard old_rank (src: runs in its file) to dst (dst_runs: runs
 * from dst), read by rank server for this one, or by this rank from its own directory
 * (server -1). */
struct xfer_piece {
    int old_rank;
    int server;
    uint64_t bytes;
    struct layout_runs src;
    unsigned char *dst;
    struct layout_runs dst_runs;
};
/* What the pieces are moved within: the ranks, the old shards' files (ids: each as this
 * rank's group verified it), the chunk a rank sends and receives per round at most; and
 * what was moved, and the first error. */
struct xfer_job {
    MPI_Comm comm;
    int rank, nranks, nold;
    const char *jobdir;
    long long epoch;
    const struct store_file_id *ids;
    uint64_t chunk;
    uint64_t local_bytes, recv_bytes, sent_bytes;
    char msg[256];
};
/* Collective: moves every rank's pieces. SHOAL_SUCCESS, or this rank's error (an I/O
 * error with j->msg naming the shard): the caller agrees on it. */
int transfer_run(struct xfer_job *j, struct xfer_piece *pieces, int n);

/* ---- resize.c: a restart from an epoch another rank count wrote ---- */

/* One shard of the restart epoch, as the ranks know it. */
struct old_shard {
    unsigned char *head; /* its header, region table and descriptors (verified) */
    struct shard_header h;
    uint64_t checksum;
    uint64_t *hashes;        /* XXH3-64 of each region's bytes where replicated, else 0 */
    struct store_file_id id; /* the file as this rank's group verified it; size 0: none */
};

struct resize {
    long long epoch;
    int nold;
    int own_only;           /* a restart on the same count: rank r holds old shard r */
    int group, ngroups;     /* this rank's group; resize_open's groups */
    int *group_of;          /* each rank's group */
    int *first;             /* ngroups + 1: where each group's ranks start in members */
    int *members;           /* the ranks by group, ascending */
    unsigned char *seen;    /* ngroups x nold: group g's directory holds shard o */
    struct old_shard *old;  /* nold */
};

/* 1 when group g's directory holds old shard o. */
int resize_holds(const struct resize *z, int g, int o);
/* The rank of group g that verifies and serves old shard o. */
int resize_verifier(const struct resize *z, int nranks, int g, int o);

/* Why the old shards cannot be restored from: a shard verdict (SHARD_MISSING: no group
 * holds it) of old_rank's shard, or RESIZE_PER_RANK: its region `region` is per-rank. */
enum { RESIZE_PER_RANK = SHARD_NVERDICTS };
struct resize_verdict {
    int verdict;
    int old_rank;
    int region;
};
/* Collective: finds, verifies and shares the tables of the nold shards of epoch; on
 * SHOAL_SUCCESS with v->verdict SHARD_OK they are kept (c->resize) for resize_recover.
 * The same code and verdict on every rank. */
int resize_open(struct shoal_ctx *c, long long epoch, int nold, struct resize_verdict *v);
/* Collective, after a restart on the same count: shares the tables of the ranks' own
 * shards (c->restart), so that shoal_read_old and shoal_old_bytes work there too. */
int resize_adopt(struct shoal_ctx *c);
void resize_release(struct shoal_ctx *c);

/* ---- pieces.c: the restore from the old shards, and shoal_read_old ---- */

/* Collective: fills every protected region from the old shards, or fails on every rank
 * (the failing rank says why). */
int resize_recover(struct shoal_ctx *c);
/* Collective: this rank's len bytes at offset of region id of old_rank into buf (len 0:
 * none). */
int resize_read_old(struct shoal_ctx *c, int old_rank, int id, size_t offset, void *buf,
                    size_t len);
/* Local: the bytes of region id of old_rank's shard. */
int resize_old_bytes(const struct shoal_ctx *c, int old_rank, int id, size_t *bytes);
/* Local: the element count of region id as a whole (a distributed region's global
 * count); SHOAL_ERR_PERRANK for a per-rank one. */
int resize_stored_count(const struct shoal_ctx *c, int id, uint64_t *count);

#endif /* SHOAL_RESIZE_H */
