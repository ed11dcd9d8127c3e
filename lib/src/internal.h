/*
 * internal.h - declarations shared by libshoal's source files. Nothing here is exported:
 * the library is built with -fvisibility=hidden and only SHOAL_EXPORT functions of
 * shoal.h are visible outside it.
 */
#ifndef SHOAL_INTERNAL_H
#define SHOAL_INTERNAL_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shoal.h"

#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

#include "shard.h"

/* ---- mpiname.c: the MPI this library is built for, and the one the program runs ---- */

#define MPINAME_OPENMPI "Open MPI"
#define MPINAME_MPICH "MPICH"

/* The MPI whose mpi.h this library was compiled with (NULL: neither of the two). */
const char *mpiname_built(void);
/* The MPI an MPI_Get_library_version string names (NULL: neither of the two). */
const char *mpiname_of(const char *library_version);
/* Whether the MPI the program runs is not the one this library was built for: 1, with
 * the line that says so in msg; 0 when they are the same or either is unknown. Calls
 * no MPI function that takes a handle. */
int mpiname_check(char *msg, size_t len);

/* ---- error.c ---- */

/* The message of a SHOAL_* code (shoal_strerror's). */
const char *error_text(int code);
/* One line on stderr, prefixed "shoal: ". */
void shoal_log(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
/* strerror that is safe to call from the writer thread. */
const char *shoal_errno_text(int err, char *buf, size_t len);
double shoal_now(void);       /* monotonic seconds */
uint64_t shoal_wall_ns(void); /* ns since the Unix epoch */

/* ---- memory.c: buffers and faults ---- */

/* Allocates a buffer of size bytes, freed with free(). A large one is aligned to
 * 2 MiB and marked for transparent huge pages (memory.c says why). */
void *buf_alloc(size_t size);
/* Faults in [p, p + len) for writing, in huge pages where they fit, ahead of a copy
 * that writes all of it. A hint: it changes no byte and may do nothing. */
void mem_prefault(void *p, size_t len);
/* Faults in every page of [p, p + len) and writes a zero to it (a new buffer). */
void mem_touch(void *p, size_t len);
/* Maps len bytes of the file fd read-only, its pages read in (MADV_POPULATE_READ), or
 * NULL with *err: EINVAL when this kernel or file cannot be mapped so, EFAULT when the
 * file is shorter than len, else the error. */
void *mem_map_read(int fd, size_t len, int *err);
/* Runs *result = fn(arg) with SIGBUS from an access to [p, p + len) (a mapped file cut
 * short under it) caught: -1 when that happened and fn was left where it faulted, 0
 * otherwise. Any other SIGBUS goes to the program's own disposition. Not reentrant:
 * one thread of the process at a time. */
int mem_guarded(int (*fn)(void *arg), void *arg, const void *p, size_t len, int *result);

/* ---- jobdir.c: the names of the files in a job's directory, no I/O ---- */

/* The files of $SHOAL_DIR/$SHOAL_JOB that libshoal names (testdata/jobdir/paths.tsv,
 * docs/shard-format.md); the _TMP kinds, PROBE, REQUEST_TAKEN and TRAFFIC_DIR are
 * libshoal's own and have no name there. */
enum jobdir_kind {
    JOBDIR_EPOCH,         /* eNNNNNNNN, the epoch's directory */
    JOBDIR_SHARD,         /* eNNNNNNNN/rNNNNNN.shard */
    JOBDIR_SHARD_TMP,     /* eNNNNNNNN/rNNNNNN.shard.tmp, a shard being written */
    JOBDIR_SUMS,          /* eNNNNNNNN/rNNNNNN.sums, the shard's block sums */
    JOBDIR_SUMS_TMP,      /* eNNNNNNNN/rNNNNNN.sums.tmp */
    JOBDIR_SPARE,         /* rNNNNNN.spare, a pruned shard kept to write the next over */
    JOBDIR_STAGE,         /* rNNNNNN.stage, the staging buffer's file on a tmpfs */
    JOBDIR_PROBE,         /* .probe-rNNNNNN.tmp, made and removed to test writing */
    JOBDIR_MANIFEST,      /* manifest, the complete epochs (rank 0) */
    JOBDIR_FINISHED,      /* finished, the last epoch of a run that ended (rank 0) */
    JOBDIR_PROGRESS,      /* progress, shoal_progress's fraction (rank 0) */
    JOBDIR_INTERVAL,      /* interval, the interval in use (rank 0) */
    JOBDIR_REQUEST,       /* request-checkpoint, the runner's request (rank 0 reads it) */
    JOBDIR_REQUEST_TAKEN, /* request-checkpoint.taken.tmp, where rank 0 moves it to read */
    JOBDIR_TRAFFIC_DIR,   /* traffic */
    JOBDIR_TRAFFIC,       /* traffic/RANK, the rank's traffic file (docs/traffic.md) */
    JOBDIR_ALIVE,         /* rNNNNNN.alive, the rank's last snapshot call (alive.c) */
    JOBDIR_NKINDS
};

/* The job directory of job under dir (dir/job). 0 or ENAMETOOLONG. */
int jobdir_of(char *out, size_t len, const char *dir, const char *job);
/* The path of the file of kind under jobdir, for epoch and rank where the kind has them
 * (ignored otherwise). 0 or ENAMETOOLONG. */
int jobdir_path(char *out, size_t len, const char *jobdir, enum jobdir_kind kind,
                long long epoch, int rank);
/* kind's name in testdata/jobdir/paths.tsv, or NULL; and the kind of such a name, or -1. */
const char *jobdir_kind_name(int kind);
int jobdir_kind_of(const char *name);
/* The epoch of an epoch directory's name, or -1 for any other name. */
long long jobdir_epoch_of(const char *name);
/* The rank of a shard file's name (rNNNNNN.shard, 6 digits), or -1 for any other. */
int jobdir_shard_rank_of(const char *name);
/* 1 for the name of a file being written (*.tmp). */
int jobdir_is_tmp(const char *name);

/* ---- store.c: crash-safe files under $SHOAL_DIR/$SHOAL_JOB ---- */

int store_mkdirs(const char *path);                  /* mkdir -p; 0 or errno */
int store_probe_writable(const char *dir, int rank); /* 0 or errno */
/* Writes path via path.tmp, optional fsync, rename, fsync of the directory. 0 or errno. */
int store_write_atomic(const char *path, const void *data, size_t len, int durable);
/* 1 if dir is on a tmpfs, where a mapped file costs what memory does. */
int store_is_tmpfs(const char *dir);
/* Maps the rank's stage file, cap bytes long, taking the rank's spare for it when
 * use_spare and there is one, else a stage file a killed run left, else a new one; its
 * descriptor in *fd. With fault_in its pages are made (store_stage_fault_in). NULL if
 * that cannot be done. */
unsigned char *store_stage_map(const char *jobdir, int rank, int use_spare, size_t cap,
                               int fault_in, int *fd);
/* Allocates the blocks of the stage file fd mapped at p, then faults its pages in; 0, or
 * errno (ENOSPC: nothing touched, which would raise SIGBUS). */
int store_stage_fault_in(unsigned char *p, size_t cap, int fd);
/* What store_write_reusing and store_stage_to_shard call as they make a file: before(arg,
 * off, n) before each piece [off, off + n) of the data is written, in order; written(arg,
 * fd) once the file holds all of it, before it is made durable and renamed into place;
 * renaming(arg) last, just before the rename that makes the file visible (it may end
 * the process: orphan_check). Any may be NULL. */
struct store_hooks {
    void (*before)(void *arg, size_t off, size_t n);
    void (*written)(void *arg, int fd);
    void (*renaming)(void *arg);
    void *arg;
};
/* Makes the stage file fd, whose first size bytes are a sealed shard, the shard at path:
 * cut to size, fsync, renamed to path, fsync of the directory; hooks->written is called
 * before the rename (hooks may be NULL). 0 or errno. */
int store_stage_to_shard(const char *jobdir, int rank, int fd, size_t size, const char *path,
                         const struct store_hooks *hooks);
/* store_write_atomic, writing over the file at reuse (moved to path.tmp) when there is
 * one, instead of a new file, and calling hooks (may be NULL) as it writes. */
int store_write_reusing(const char *path, const void *data, size_t len, int durable,
                        const char *reuse, const struct store_hooks *hooks);
int store_fsync_dir(const char *dir);
/* Epoch directories (e + 8 digits) of jobdir, ascending. 0 or errno (ENOENT: none). */
int store_list_epochs(const char *jobdir, long long **epochs, int *n);
/* Removes this rank's files from the epoch directories below epoch `below`, its shard
 * kept as its spare if keep_spare and no reader holds it, and each directory once
 * empty. If whole, also every other file there but the shards of the run's other ranks
 * (of nranks), which prune their own. */
void store_prune(const char *jobdir, long long below, int rank, int nranks, int whole,
                 int keep_spare);
/* Removes leftover *.tmp files in epoch directories below `below` (this rank's, or
 * every rank's if all) and, if all, the job directory's own. */
void store_remove_stale_tmp(const char *jobdir, long long below, int rank, int all);

/* A shard file in memory: mapped in place, read-only (the file's own pages, no copy
 * and no new memory to fault in), or read into a buffer from buf_alloc, STAGE_SLACK
 * bytes larger than the file and touched, where it cannot be mapped. */
struct shard_image {
    unsigned char *data;
    size_t size;
    int mapped;
};
/* Files from this size on are mapped; smaller ones are read, which costs less. */
#define STORE_MAP_MIN ((size_t)64 << 10)
/* Loads a whole shard file and verifies it. Returns a verdict; *img is set (release
 * with shard_image_free) only for SHARD_OK. A mapped image's pages were read in
 * (MADV_POPULATE_READ); an access to them can still raise SIGBUS if the file is cut
 * short later, so copies out of it go through mem_guarded. */
int store_load_shard(const char *path, struct shard_image *img, struct shard_header *h);
/* Which file a path named: it is the same file, unchanged, while all four agree. */
struct store_file_id {
    uint64_t dev, ino, size;
    int64_t mtime_ns;
};
/* store_load_shard, also saying which file it read (id may be NULL). */
int store_load_shard_id(const char *path, struct shard_image *img, struct shard_header *h,
                        struct store_file_id *id);
/* Opens the shard at path for reading, locked shared as store_load_shard locks it, if it
 * is still the file want names: its descriptor, or -1 with errno (ESTALE: another file
 * or a changed one). */
int store_open_shard(const char *path, const struct store_file_id *want);
/* Reads len bytes at off of fd: 0, or errno (EIO: the file ends before). */
int store_pread(int fd, void *buf, size_t len, uint64_t off);
void shard_image_free(struct shard_image *img);

/* ---- manifest.c: the list of complete epochs ---- */

struct manifest_entry {
    long long epoch;
    long long nranks;
    long long created_ns;
};

/* ---- binding.c: the program and arguments a standalone checkpoint belongs to ---- */

#define BINDING_SHOWN 201

struct run_binding {
    uint64_t program;           /* digest of the executable's path, size, mtime; 0: unknown */
    uint64_t args;              /* digest of the arguments after argv[0]; 0: unknown */
    char shown[BINDING_SHOWN];  /* the arguments, printable, for messages */
};

/* This process's binding, from /proc/self (unknown, all 0, where there is none). */
void binding_current(struct run_binding *b);
/* The binding of executable exe (st its stat) run with cmdline (argv NUL-separated). */
struct stat;
void binding_from(struct run_binding *b, const char *exe, const struct stat *st,
                  const char *cmdline, size_t len);

/* Reads jobdir/manifest, sorted by epoch; a missing file is an empty manifest.
 * Malformed lines are reported and skipped. The run line, if any, goes to bound
 * (all 0 without one: a manifest of a version that did not record it). 0 or errno. */
int manifest_read(const char *jobdir, struct manifest_entry **entries, int *n,
                  struct run_binding *bound);
/* Writes the entries and, when bound->program is known, its run line; hooks (may be
 * NULL) as store_write_reusing calls them. */
int manifest_write(const char *jobdir, const struct manifest_entry *entries, int n,
                   const struct run_binding *bound, const struct store_hooks *hooks);
/* jobdir/finished: the newest epoch of a run that ended with shoal_finalize; 0: none. */
long long manifest_read_finished(const char *jobdir);
int manifest_write_finished(const char *jobdir, long long epoch);

/* ---- env.c: configuration from the environment ---- */

struct shoal_config {
    char dir[PATH_MAX];
    char job[SHARD_JOB_MAX + 1];
    double interval_s;       /* 0: no interval checkpoints; with interval_auto, rank 0's
                                current interval_auto(cost, mtbf_s) */
    int interval_auto;       /* SHOAL_CKPT_INTERVAL=auto */
    double mtbf_s;           /* SHOAL_MTBF: the job's mean time between failures */
    long long restart_epoch; /* -1: not set; 0: fresh */
    long long epoch_base;    /* 0: not set */
    char stats[PATH_MAX];    /* "" : no statistics */
    double hold_timeout_s;   /* longest hold after a `hold` request; 0: never hold */
    double stage_wait_s;     /* how long a rank waits for its restart shard to arrive */
    int keep_epochs;         /* 1: never remove epochs (the runner removes them) */
    int spare;               /* 1: a pruned shard is kept for the next to write over */
    int traffic;             /* 0: no traffic counting (SHOAL_TRAFFIC=0) */
    int restart_nranks;      /* ranks that wrote restart_epoch; 0: not set (this run's) */
    int elastic;             /* 1: the rank count may change (SHOAL_ELASTIC=1) */
    uint64_t restore_chunk;  /* bytes a rank moves per round of a restore on another count */
};

/* Fills c; on error returns SHOAL_ERR_ARG and a one-line message in msg. */
int config_from_env(struct shoal_config *c, char *msg, size_t msglen);
/* The variables config_from_env reads, NULL-terminated (tests clear them). */
extern const char *const config_env_vars[];
/* Parses "30", "0.5", "500ms", "2m", "1m30s"... into seconds. 0 or -1. */
int config_parse_duration(const char *s, double *seconds);
int config_valid_job(const char *job);

/* ---- interval.c: the automatic interval (SHOAL_CKPT_INTERVAL=auto), no I/O ---- */

/* Seconds between checkpoints that cost cost_s each (0: not measured yet, a guess) in a
 * job that fails every mtbf_s on average: Daly's optimum, within [1 s, 600 s]. */
double interval_auto(double cost_s, double mtbf_s);
/* The mean cost after a checkpoint that cost newest_s (mean_s 0: none before). */
double interval_cost_mean(double mean_s, double newest_s);
/* The `interval` file's line (docs/launcher-protocol.md); snprintf's return value. */
int interval_line(char *line, size_t len, const struct shoal_config *cfg, double cost_s);

/* What a checkpoint costs the run, which is more than the time it blocks the caller:
 * the writer thread, the agent's copy of the shard to another node and the
 * coordinator's verification take cores the ranks would use. Rank 0 measures it at
 * its agreements (agree.c): the calls between two agreements take longer after a
 * checkpoint than away from checkpoints, and that excess over a settling window,
 * added to the blocking time, is the checkpoint's cost. */
struct slowdown {
    double base;    /* seconds per call away from checkpoints (a weighted mean); 0: none yet */
    double blocked; /* the checkpoint being measured: seconds it blocked */
    double excess;  /* and the seconds its calls took beyond base since */
    double until;   /* the end of its settling window; 0: none being measured */
};
/* A checkpoint that blocked blocked_s ended at now; its window lasts settle_s. When
 * one was still being measured, its cost (see slowdown_agreement), else -1. */
double slowdown_checkpoint(struct slowdown *s, double now, double blocked_s, double settle_s);
/* An agreement at now, after k calls that took took_s since the last one. When it
 * closes a checkpoint's window, that checkpoint's cost in seconds; else -1. */
double slowdown_agreement(struct slowdown *s, double now, int k, double took_s);
/* The settling window after a checkpoint, for an interval of interval_s. */
double slowdown_settle(double interval_s);

/* ---- traffic.c and pmpi.c: who sends how much to whom (docs/traffic.md) ---- */

/* Larger jobs are not counted: 16 bytes per rank of the job on every rank. */
#define TRAFFIC_MAX_RANKS 65536

struct traffic_peer {
    uint64_t bytes;
    uint64_t messages;
};

/* A rank's counts as of one checkpoint, copied while the caller blocks and written by
 * the writer thread. */
struct traffic_snapshot {
    int on;   /* 0: not counting, nothing to write */
    int rank; /* in MPI_COMM_WORLD, as are the peers */
    int nranks;
    long long epoch;            /* the checkpoint's; 0: none taken yet */
    long long first_epoch;      /* the first epoch this run could write: one per run */
    double seconds_mpi;         /* estimated seconds in point-to-point calls */
    double seconds_total;       /* seconds since counting started */
    struct traffic_peer *peers; /* nranks entries, indexed by destination rank */
};

/* traffic.c: the file format, no MPI. The text of s in a malloc'd buffer (caller
 * frees); 0 or errno. */
int traffic_format(const struct traffic_snapshot *s, char **text, size_t *len);
/* Writes jobdir/traffic/RANK (tmp + rename, not fsynced); on failure the path that
 * failed goes to failed_path. 0 or errno. */
int traffic_write(const char *jobdir, const struct traffic_snapshot *s, char *failed_path,
                  size_t failed_len);

/* pmpi.c: the counters. Starts counting (after MPI_Init; enabled 0 only clears s) and
 * sizes s. Local; failures turn counting off with one line on stderr. */
void traffic_start(struct traffic_snapshot *s, long long first_epoch, int enabled);
/* Copies the counters into s as those of epoch. */
void traffic_take(struct traffic_snapshot *s, long long epoch);
/* Stops counting and frees s's buffer (the writer must be stopped). */
void traffic_stop(struct traffic_snapshot *s);

/* ---- orphan.c: a rank whose launcher is gone writes no more epochs ---- */

/* 1 when a process manager started this process, as the environment says through
 * lookup (getenv): PMIX_RANK, PMI_RANK or OMPI_COMM_WORLD_RANK set. */
int orphan_launched(const char *(*lookup)(const char *name));
/* At shoal_init: records the parent as the launcher to watch when orphan_launched. */
void orphan_watch(void);
/* 1 when a launcher recorded as pid recorded (0: none watched) is no longer the
 * parent, which is now parent. */
int orphan_gone(pid_t recorded, pid_t parent);
/* Returns when the launcher recorded is still the parent (or none is watched);
 * otherwise prints one line (naming epoch, the one about to be written, when above 0)
 * and ends the process with _exit(1), from whichever thread calls it. */
void orphan_check(int rank, long long epoch);

/* ---- writer.c: the background thread that hashes and writes shards ---- */

struct writer {
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running;
    int rank, nranks;
    int spare; /* keep a pruned shard to write the next one over (SHOAL_SPARE) */
    const char *jobdir;                     /* owned by the context */
    const struct run_binding *binding;      /* owned by the context; for the manifest */
    const struct traffic_snapshot *traffic; /* owned by the context; written after the
                                               shard of its epoch */
    int traffic_failed; /* a traffic file could not be written (reported once) */
    /* the shard being written, or the staging buffer to touch; the staging buffer
     * belongs to the thread while busy. A staging buffer that maps the rank's stage
     * file (fd >= 0, map_len bytes) becomes the shard: the file is renamed into the
     * epoch directory, unmapped and closed (consumed); with next_cap > 0 the writer
     * then maps and faults in another stage file of that size (next_*). */
    int busy;
    unsigned char *file;
    size_t size;
    long long epoch;
    int fd;
    size_t map_len;
    size_t next_cap;
    unsigned char *touch;
    size_t touch_size;
    int touch_fd; /* >= 0: the buffer to touch maps this stage file: allocate it first */
    /* results for the main thread, taken with writer_take_stage */
    int consumed;     /* the last staging buffer handed over is gone (it is the shard) */
    int touch_failed; /* the stage file to touch could not be allocated: do not use it */
    unsigned char *next;
    int next_fd;
    /* results, read by the main thread */
    long long written; /* newest epoch written completely */
    long long failed;  /* newest epoch whose write failed */
    int new_errors;    /* errors not yet reported to the caller */
    /* epoch bookkeeping to do after the current write: manifest (rank 0), pruning */
    int commit_pending;
    struct manifest_entry manifest[2];
    int manifest_n;
    long long prune_below;
    int stop;
    double cpu_s; /* the thread's CPU time, set as it ends */
};

int writer_start(struct writer *w, const char *jobdir, int rank, int nranks, int spare,
                 const struct run_binding *binding, const struct traffic_snapshot *traffic);
/* Finishes queued work and joins; returns the errors not yet reported. */
int writer_stop(struct writer *w);
void writer_wait_idle(struct writer *w);
int writer_is_busy(struct writer *w);
/* Hands the writer the shard image at file (size bytes) of epoch. fd >= 0: file is the
 * start of a staging buffer mapping the rank's stage file (map_len bytes), which becomes
 * the shard; then, with next_cap > 0, the writer prepares another of next_cap bytes. */
void writer_submit(struct writer *w, unsigned char *file, size_t size, long long epoch, int fd,
                   size_t map_len, size_t next_cap);
/* Hands the writer a new staging buffer to fault in (mem_touch); it is busy until then.
 * fd >= 0: the buffer maps the stage file fd, whose blocks are allocated first. */
void writer_touch(struct writer *w, unsigned char *buf, size_t size, int fd);
/* When idle: what became of the staging buffers handed over since the last call. */
struct writer_stage {
    int consumed;       /* the buffer of the last shard is unmapped: it is the shard */
    int touch_failed;   /* the stage file handed to touch has no room: unusable */
    unsigned char *next; /* a new staging buffer the writer prepared, or NULL */
    size_t next_cap;
    int next_fd;
};
void writer_take_stage(struct writer *w, struct writer_stage *out);
/* Records a failure that happened before the write could start (no memory). */
void writer_record_failure(struct writer *w, long long epoch);
/* Newest written and failed epochs, and whether errors happened since the last poll. */
void writer_poll(struct writer *w, long long *written, long long *failed, int *new_errors);
void writer_commit(struct writer *w, const struct manifest_entry *m, int n,
                   long long prune_below);

/* ---- the library's state: one context, made by shoal_init (shoal.c) ---- */

struct region {
    int id;
    void *ptr;
    size_t count;
    int elem_size;
    struct region_layout layout; /* its kind, datatype and place in the global array */
};

struct stored_region {
    int32_t id;
    uint32_t elem_size;
    uint64_t count;
    uint64_t offset; /* of its bytes in the shard file */
    struct region_layout layout;
};

#define CREATED_RING 64

struct resize;

struct shoal_ctx {
    MPI_Comm comm;
    int rank;
    int nranks;
    struct shoal_config cfg;
    char jobdir[PATH_MAX];
    char request_path[PATH_MAX];
    int request_postponed; /* rank 0: a checkpoint put off (REQUEST_*), taken next time */
    char request_taken_path[PATH_MAX]; /* where rank 0 moves a request to read it */
    char progress_path[PATH_MAX];

    /* restart: status SHOAL_RESTARTED or SHOAL_RESIZED when restart_epoch > 0 */
    int status;
    int recovered;
    long long restart_epoch;
    long long finished_epoch;    /* epochs up to it belong to a run that finished */
    int other_run;               /* the manifest's epochs belong to another program or
                                    other arguments (standalone) */
    struct run_binding binding;  /* this run's (rank 0) */
    struct shard_image restart; /* the verified shard, until recovered */
    struct store_file_id restart_id; /* its file */
    int old_nranks;              /* the rank count that wrote the restart epoch */
    struct resize *resize;       /* the old shards' tables (resize.c), or NULL */
    struct stored_region *stored;
    int nstored;
    uint32_t restart_version;     /* the restart shard's format version */
    struct shard_abi restart_abi; /* and the ABI of the machine that wrote it */

    /* epochs */
    long long next_epoch;
    long long committed;  /* newest epoch this run committed */
    long long failed_max; /* newest epoch some rank failed to write; never committed */
    struct manifest_entry complete[2]; /* the two newest complete epochs, oldest first */
    int ncomplete;
    struct {
        long long epoch;
        uint64_t created_ns;
    } created[CREATED_RING];

    /* protected regions, sorted by id */
    struct region *regions;
    int nregions;
    int cap_regions;

    /* the staging buffer, reused and kept pre-faulted: a whole shard file image
     * starts staged_shift bytes into it (see stage_shift) */
    unsigned char *stage;
    size_t stage_cap;
    int stage_fd;      /* -1: memory (buf_alloc); else the rank's stage file it maps */
    int stage_in_file; /* the job directory is a tmpfs: the staging buffer maps a file
                          there, which its checkpoint renames into the epoch (no copy) */
    double checkpoint_gap; /* between the last checkpoint and the one before (or
                              shoal_init): what the next stage file has to be made in */
    long long staged_epoch; /* copied, not yet handed to the writer; 0: none */
    size_t staged_size;
    size_t staged_shift;
    struct writer writer;
    struct traffic_snapshot traffic; /* belongs to the writer while it is busy */

    /* snapshot agreement */
    long long countdown; /* calls until the next agreement */
    int k;               /* calls between agreements */
    double t_agreed;     /* when the last agreement ended */
    double t_checkpoint; /* when the last checkpoint was taken (shoal_init before one) */
    double agree_cost;   /* lowest seconds one agreement took (rank 0) */
    long long agreements;
    double agree_sum; /* seconds in agreements that took no checkpoint */

    /* statistics */
    double restore_s;              /* the last restore's time */
    uint64_t restore_needed_bytes; /* bytes of the regions restored from other ranks' shards */
    uint64_t restore_local_bytes;  /* of them, read from this rank's own directory */
    uint64_t restore_recv_bytes;   /* of them, received from other ranks */
    long long checkpoints;
    double block_sum;
    double block_max;
    uint64_t bytes_max;

    /* progress (rank 0) */
    double progress_written_at;
    double progress_pending;
    int progress_dirty;

    /* the rank's alive file (alive.c): its last snapshot call, for the agent */
    int alive_fd;          /* -1: none (not writable: the agent sees no calls) */
    long long calls;       /* shoal_snapshot calls up to the last agreement */
    long long alive_calls; /* calls at the record written last */
    double alive_at;       /* shoal_now() of that record; 0: none yet */
    double alive_gap;      /* seconds between the last two records; 0: one so far */
    double alive_every;    /* seconds per call between them */

    /* the interval in use (rank 0) */
    char interval_path[PATH_MAX];
    double ckpt_cost;        /* mean seconds a checkpoint costs the run; 0: none measured */
    struct slowdown slow;    /* the checkpoint whose cost is being measured */
    double interval_written; /* the interval the file last said */
    int interval_failed;     /* writing `interval` failed (reported once) */
};

/* The modules over the context, under shoal.c: it holds the public functions and calls
 * these, which never call back up into it; each returns what it found or what the ranks
 * decided, and shoal.c acts on it. The modules declared earlier in this file (writer,
 * store, manifest, jobdir, ...) lie below these and know nothing of the context. */

/* ---- agree.c: the ranks' agreements (MPI) ---- */

/* The first failing rank's code, the same on every rank; that rank prints msg.
 * Collective. */
int agree_error(struct shoal_ctx *c, int code, const char *msg);
/* What the ranks decided in one agreement. */
struct exchange {
    int checkpoint; /* checkpoint now */
    int postponed;  /* rank 0 asked for one, a staging buffer was not ready */
    int k;          /* calls until the next agreement */
    int io_error;   /* some rank failed to write since the last agreement */
    int hold;       /* after this checkpoint, hold until killed (agree_hold) */
};
/* What rank 0 found in request-checkpoint. */
enum { REQUEST_NONE, REQUEST_CHECKPOINT, REQUEST_HOLD };
/* Rank 0: consumes the runner's request, if there is one. */
int agree_take_request(struct shoal_ctx *c);
/* Collective: checkpoint and hold are rank 0's proposal (the other ranks pass 0);
 * unready: this rank's staging buffer is not ready (stage_ready). Also completes the
 * epochs every rank has written (the manifest and pruning, queued on the writer). */
int agree_exchange(struct shoal_ctx *c, int checkpoint, int hold, int k, int unready,
                   struct exchange *out);
/* Collective, at shoal_snapshot's agreement at now: rank 0 proposes a checkpoint when one
 * is due (the interval, the runner's request, one put off) and the next K; out is the
 * decision. Also follows the agreement's cost and sets the next countdown. */
int agree_snapshot(struct shoal_ctx *c, double now, int unready, struct exchange *out);
/* After a checkpoint agreed with hold: waits for this rank's shard to be written, then
 * sleeps without MPI until the launcher kills the process, or SHOAL_HOLD_TIMEOUT. */
void agree_hold(struct shoal_ctx *c, long long epoch);
/* Collective: measures one agreement's cost while the ranks are in step. */
int agree_calibrate(struct shoal_ctx *c);
/* Adds e as the newest complete epoch, keeping the two newest. */
void agree_note_complete(struct shoal_ctx *c, const struct manifest_entry *e);

/* ---- checkpoint.c: protected regions and the staging buffer (local, no MPI) ---- */

/* Registers count elements of elem_size bytes at ptr as region id, laid out as layout
 * says (the arguments checked by shoal_protect and its kin). */
int checkpoint_protect(struct shoal_ctx *c, int id, void *ptr, size_t count, int elem_size,
                       const struct region_layout *layout);
int checkpoint_unprotect(struct shoal_ctx *c, int id); /* SHOAL_ERR_NOTFOUND */
/* Copies the protected regions into the staging buffer as the next epoch's shard;
 * checkpoint_submit then hands it to the writer. */
int checkpoint_copy(struct shoal_ctx *c);
/* prepare_next: with the staging buffer in a file, the writer prepares the next one
 * right after (a program's own checkpoints: the next may come at once). */
void checkpoint_submit(struct shoal_ctx *c, int prepare_next);
int stage_reserve(struct shoal_ctx *c, size_t size, int may_wait);
/* After a restore from a mapped image: a staging buffer for the protected regions,
 * which the writer faults in while the program goes on. Nothing when the buffer is
 * large enough, holds a staged image, or the writer is busy (the next checkpoint grows
 * it then). */
void stage_prefault(struct shoal_ctx *c);
/* After a restore: the restart image becomes the staging buffer when it was read into
 * one larger than it, else it is released (stage_prefault for a mapped one). */
void stage_after_restore(struct shoal_ctx *c);
/* 1 unless the staging buffer is a file still being made (or not yet begun). */
int stage_ready(struct shoal_ctx *c);
/* Waits for the writer, then takes back what it did with the staging buffers. */
void stage_wait(struct shoal_ctx *c);
/* Releases the staging buffer, its stage file left in place (the writer is idle). */
void stage_free(struct shoal_ctx *c);
/* Between checkpoints, with the staging buffer in a file: a buffer the last checkpoint
 * took is replaced (faulted in by the writer) once half the time between the last two
 * checkpoints has passed since the last, so a run that ends before its next checkpoint
 * never allocates one. now: shoal_now(). */
void stage_refill(struct shoal_ctx *c, double now);

/* ---- restart.c: the checkpoint to restart from ---- */

/* Collective: rank 0 reads the manifest and the finished mark (the other ranks may be
 * on nodes without them) and shares them, the entries in *m (caller frees). */
int restart_read_manifest(struct shoal_ctx *c, struct manifest_entry **m, int *n);
/* Collective: chooses the epoch to restart from (SHOAL_RESTART_EPOCH, else the newest
 * of m every rank can verify) and keeps this rank's verified shard; none: a fresh start. */
int restart_find(struct shoal_ctx *c, const struct manifest_entry *m, int n);
/* Local: checks every protected region against the restart shard, then copies them all
 * out of it, or none: so a failed recover changes nothing, unless the shard's file is
 * cut short under a mapped image mid-copy. On failure, the message in msg. */
int restart_recover_local(struct shoal_ctx *c, char *msg, size_t msglen);
/* Region id in the restart shard, or NULL. */
const struct stored_region *restart_stored(const struct shoal_ctx *c, int id);
/* Whether every protected region restores bit for bit from the restart shard, written
 * on another machine perhaps (portable.c): 1, or 0 with one line naming the regions
 * that do not in msg. */
int restart_portable(const struct shoal_ctx *c, char *msg, size_t msglen);
void restart_release(struct shoal_ctx *c);

/* The modules of a restart on another number of ranks: layout.c, transfer.c, resize.c,
 * pieces.c. */
#include "resize.h"

/* The rank's alive file: alive.c. */
#include "alive.h"

#endif /* SHOAL_INTERNAL_H */
