/*
 * test_epochs.c - a job's epochs on disk, through libshoal's public API, as part of
 * test_api: older epochs pruned, retired shards recycled as spares (or not, with
 * SHOAL_SPARE=0) under their load lock, the stage files of a checkpoint being staged and
 * refilled, and the epochs kept on request.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "check.h"
#include "internal.h"
#include "json.h"
#include "shoal.h"
#include "testutil.h"

static int count_epoch_dirs(const char *job, long long upto)
{
    int n = 0;
    for (long long e = 1; e <= upto; e++) {
        char path[512];
        snprintf(path, sizeof path, "%s/%s/e%08lld", t_base, job, e);
        n += t_exists(path);
    }
    return n;
}

static void test_pruning(void)
{
    const char *job = "prune";
    t_env(job);
    int v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    for (v = 1; v <= 4; v++)
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();
    char path[512], text[512], want[512];
    CHECK_EQ(count_epoch_dirs(job, 10), 2);
    t_shard_path(path, sizeof path, job, 3, t_rank);
    CHECK(t_exists(path));
    t_job_path(path, sizeof path, job, "manifest");
    t_read_text(path, text, sizeof text);
    snprintf(want, sizeof want, "epoch 3 nranks %d created_ns", t_nranks);
    CHECK(strncmp(text, want, strlen(want)) == 0);
    CHECK(strstr(text, "\nepoch 4 ") != NULL);
    CHECK(strstr(text, "epoch 2 ") == NULL);

    /* Leftovers of a killed run go at the next start; finished shards stay. */
    t_barrier();
    if (t_rank == 0) {
        t_shard_path(path, sizeof path, job, 4, 7);
        strcat(path, ".tmp");
        CHECK_EQ(t_write_text(path, "partial"), 0);
        t_job_path(path, sizeof path, job, "manifest.tmp");
        CHECK_EQ(t_write_text(path, "partial"), 0);
    }
    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1);
    t_barrier();
    t_shard_path(path, sizeof path, job, 4, 7);
    strcat(path, ".tmp");
    CHECK(!t_exists(path));
    t_job_path(path, sizeof path, job, "manifest.tmp");
    CHECK(!t_exists(path));
    t_shard_path(path, sizeof path, job, 4, t_rank);
    CHECK(t_exists(path));
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    CHECK_EQ(v, 4);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
}

static unsigned long long inode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (unsigned long long)st.st_ino : 0;
}

/* The epoch of the whole, verified shard the open file fd holds (closed here), or -1. */
static long long held_epoch(int fd)
{
    struct stat st;
    struct shard_header h;
    unsigned char *b = NULL;
    long long epoch = -1;
    if (fd >= 0 && fstat(fd, &st) == 0 && (b = malloc((size_t)st.st_size)) != NULL &&
        pread(fd, b, (size_t)st.st_size, 0) == (ssize_t)st.st_size &&
        shard_verify(b, (size_t)st.st_size, &h) == SHARD_OK)
        epoch = (long long)h.epoch;
    free(b);
    if (fd >= 0)
        close(fd);
    return epoch;
}

/* The block sums file beside the shard at path describes it: the version of the file
 * (inode, modification time, size), its checksum, and the XXH3-64 of each of its blocks
 * (docs/shard-format.md). */
static int sums_describe(const char *path)
{
    char sums_path[600];
    snprintf(sums_path, sizeof sums_path, "%.*s.sums", (int)(strlen(path) - strlen(".shard")),
             path);
    size_t size, len;
    unsigned char *file = (unsigned char *)json_read_file(path, &size);
    unsigned char *sums = (unsigned char *)json_read_file(sums_path, &len);
    struct stat st;
    int ok = file != NULL && sums != NULL && stat(path, &st) == 0 &&
             len == shard_sums_file_size(size, SHARD_BLOCK_SIZE);
    if (ok) {
        uint64_t *want = malloc(shard_blocks(size, SHARD_BLOCK_SIZE) * sizeof *want);
        for (size_t b = 0; b < shard_blocks(size, SHARD_BLOCK_SIZE); b++) {
            size_t off = b * SHARD_BLOCK_SIZE;
            want[b] = (uint64_t)XXH3_64bits(file + off, size - off < SHARD_BLOCK_SIZE
                                                            ? size - off
                                                            : SHARD_BLOCK_SIZE);
        }
        struct shard_sums_key key = {(uint64_t)st.st_ino,
                                     (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec};
        unsigned char *expect = malloc(len);
        shard_put_sums(expect, file, size, SHARD_BLOCK_SIZE, want, &key);
        ok = memcmp(expect, sums, len) == 0;
        free(expect);
        free(want);
    }
    if (!ok)
        fprintf(stderr, "%s%s does not describe %s\n", check_prefix, sums_path, path);
    free(file);
    free(sums);
    return ok;
}

/* A rank's pruned shard is kept as its spare and written over by its next shard, which
 * ends at its own size; a shard a reader holds (locked, as jobdir.Dir reads) is removed
 * instead and stays whole for the reader; no spare is left after shoal_finalize. */
static void test_recycling(void)
{
    const char *job = "recycle";
    t_env(job);
    enum { N = 100000 };
    static int a[N];
    unsigned long long ino[6] = {0};
    char path[512];
    int held = -1;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_INT), SHOAL_SUCCESS);
    for (int e = 1; e <= 5; e++) {
        if (e == 4) /* smaller than the epoch 1 shard it is written over */
            CHECK_EQ(shoal_protect(0, a, N / 2, MPI_INT), SHOAL_SUCCESS);
        for (int i = 0; i < N; i++)
            a[i] = e * 1000003 + i + t_rank;
        if (e == 5) { /* epoch 2 is pruned once epoch 4 is complete: at this checkpoint */
            t_shard_path(path, sizeof path, job, 2, t_rank);
            held = open(path, O_RDONLY);
            CHECK(held >= 0 && flock(held, LOCK_SH) == 0);
        }
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
        /* The checkpoint waited for the writer to finish the one before. */
        t_shard_path(path, sizeof path, job, e - 1, t_rank);
        ino[e - 1] = inode_of(path);
    }
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();
    t_shard_path(path, sizeof path, job, 5, t_rank);
    ino[5] = inode_of(path);
    /* Epoch 1's file lives on as a later shard: epoch 4's when shards are written into
     * files, epoch 5's when the staging buffer is a file that becomes the shard (tmpfs:
     * epoch 4's was staged before epoch 1 was pruned). Epoch 2's, held, does not. */
    CHECK(ino[1] != 0 && (ino[4] == ino[1]) != (ino[5] == ino[1]));
    CHECK(ino[5] != 0 && ino[4] != ino[2] && ino[5] != ino[2]);
    CHECK_EQ(count_epoch_dirs(job, 10), 2);
    snprintf(path, sizeof path, "%s/%s/r%06d.spare", t_base, job, t_rank);
    CHECK(!t_exists(path));

    struct shard_image img;
    struct shard_header h;
    t_shard_path(path, sizeof path, job, 4, t_rank);
    CHECK_EQ(store_load_shard(path, &img, &h), SHARD_OK);
    CHECK(h.epoch == 4 && h.payload_bytes == (uint64_t)N / 2 * sizeof a[0]);
    shard_image_free(&img);
    CHECK(sums_describe(path));
    t_shard_path(path, sizeof path, job, 5, t_rank);
    CHECK(sums_describe(path));
    CHECK_EQ(held_epoch(held), 2);

    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_status(), 1);
    CHECK_EQ(shoal_protect(0, a, N / 2, MPI_INT), SHOAL_SUCCESS);
    memset(a, 0, sizeof a);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    int wrong = 0;
    for (int i = 0; i < N / 2; i++)
        wrong += a[i] != 5 * 1000003 + i + t_rank;
    CHECK_EQ(wrong, 0);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
}

/* On a tmpfs the staging buffer maps the rank's stage file, which its checkpoint renames
 * into the epoch: the shard is the file the state was copied into, no second copy. The
 * writer prepares another for the program's next checkpoint; none is left at the end.
 * Elsewhere there is no stage file. */
static void test_stage_file(void)
{
    const char *job = "stage-file";
    t_env(job);
    int tmpfs = store_is_tmpfs(t_base);
    enum { N = 50000 };
    static double a[N];
    char stage[512], path[512];
    snprintf(stage, sizeof stage, "%s/%s/r%06d.stage", t_base, job, t_rank);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_DOUBLE), SHOAL_SUCCESS);
    unsigned long long staged = inode_of(stage);
    CHECK_EQ(staged != 0, tmpfs);
    for (int e = 1; e <= 2; e++) {
        for (int i = 0; i < N; i++)
            a[i] = e * 1e6 + i + t_rank;
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    }
    /* The second checkpoint waited for the first shard. */
    t_shard_path(path, sizeof path, job, 1, t_rank);
    if (tmpfs)
        CHECK(inode_of(path) == staged);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    CHECK(!t_exists(stage));
    t_shard_path(path, sizeof path, job, 2, t_rank);
    CHECK(inode_of(path) != 0 && inode_of(path) != staged);
    CHECK(sums_describe(path));

    t_unfinish(job);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_DOUBLE), SHOAL_SUCCESS);
    memset(a, 0, sizeof a);
    CHECK_EQ(shoal_recover(), SHOAL_SUCCESS);
    int wrong = 0;
    for (int i = 0; i < N; i++)
        wrong += a[i] != 2e6 + i + t_rank;
    CHECK_EQ(wrong, 0);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
}

/* Between interval checkpoints the stage file the last checkpoint took is made again
 * at an agreement once half the time between checkpoints has passed (before the second
 * checkpoint: half the time from shoal_init to the first). One checkpoint, asked for by
 * the runner; no interval checkpoint is ever due. */
static void test_stage_refill(void)
{
    const char *job = "stage-refill";
    t_env(job);
    setenv("SHOAL_CKPT_INTERVAL", "0", 1);
    int tmpfs = store_is_tmpfs(t_base);
    enum { N = 20000 };
    static double a[N];
    char stage[512], shard[512];
    snprintf(stage, sizeof stage, "%s/%s/r%06d.stage", t_base, job, t_rank);
    t_shard_path(shard, sizeof shard, job, 1, t_rank);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_DOUBLE), SHOAL_SUCCESS);
    unsigned long long staged = inode_of(stage);
    CHECK_EQ(staged != 0, tmpfs);
    t_sleep_ms(100);
    if (t_rank == 0)
        CHECK_EQ(t_write_request(job, ""), 0);
    /* Until the shard is in place and the stage file back, or 20 s: every rank makes the
     * same calls, since each is an agreement's turn. */
    int done = 0, bad = 0;
    for (int i = 0; i < 10000 && !done; i++) {
        bad += shoal_snapshot() != SHOAL_SUCCESS;
        t_sleep_ms(2);
        int mine = t_exists(shard) && (inode_of(stage) != 0) == tmpfs, all;
        MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        done = all;
    }
    CHECK_EQ(bad, 0);
    CHECK(done);
    if (tmpfs)
        CHECK(inode_of(shard) == staged && inode_of(stage) != staged);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    CHECK(!t_exists(stage));
}

/* With SHOAL_SPARE=0 a pruned shard is removed: a reader that opened epoch 1's shard
 * without a lock still reads epoch 1 after epoch 4 is written. */
static void test_no_spare(void)
{
    const char *job = "no-spare";
    t_env(job);
    setenv("SHOAL_SPARE", "0", 1);
    enum { N = 10000 };
    static int a[N];
    char path[512];
    int fd = -1;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_INT), SHOAL_SUCCESS);
    for (int e = 1; e <= 5; e++) {
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
        if (e == 2) {
            t_shard_path(path, sizeof path, job, 1, t_rank);
            fd = open(path, O_RDONLY);
            CHECK(fd >= 0);
        }
    }
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    CHECK_EQ(count_epoch_dirs(job, 10), 2);
    CHECK_EQ(held_epoch(fd), 1);

    t_env("spare-bad");
    setenv("SHOAL_SPARE", "yes", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_ARG);
    t_env("spare-bad");
}

/* A spare the rank cannot open for writing (here a link to nowhere; on a cluster, a
 * replica's file the agent wrote) gives way to a new file, and nothing is made where it
 * pointed. A shard loaded to be restored from stays locked shared while its image is
 * held, mapped or not, and no longer: the ranks' and the agent's pruning leave it alone. */
static void test_spare_and_load_lock(void)
{
    const char *job = "spare-lock";
    t_env(job);
    setenv("SHOAL_KEEP_EPOCHS", "1", 1);
    enum { N = 100000 }; /* 400 KB: restored from a mapping */
    static int a[N];
    char path[512], spare[512], nowhere[512];
    snprintf(spare, sizeof spare, "%s/%s/r%06d.spare", t_base, job, t_rank);
    snprintf(nowhere, sizeof nowhere, "%s/%s/nowhere-%d", t_base, job, t_rank);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, a, N, MPI_INT), SHOAL_SUCCESS);
    CHECK_EQ(symlink(nowhere, spare), 0);
    for (int i = 0; i < N; i++)
        a[i] = i + t_rank;
    CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    CHECK(!t_exists(nowhere));

    t_shard_path(path, sizeof path, job, 1, t_rank);
    struct shard_image img;
    struct shard_header h;
    CHECK_EQ(store_load_shard(path, &img, &h), SHARD_OK);
    CHECK(img.mapped);
    int other = open(path, O_RDONLY);
    CHECK(other >= 0);
    CHECK(flock(other, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK);
    shard_image_free(&img);
    CHECK_EQ(flock(other, LOCK_EX | LOCK_NB), 0);
    close(other);
    CHECK_EQ(held_epoch(open(path, O_RDONLY)), 1);
}

/* On a cluster the coordinator removes epochs (SHOAL_KEEP_EPOCHS=1): the ranks keep
 * every epoch they write, since one complete among them may not be durable yet. */
static void test_keep_epochs(void)
{
    const char *job = "keep";
    t_env(job);
    setenv("SHOAL_KEEP_EPOCHS", "1", 1);
    int v = 0;
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_SUCCESS);
    CHECK_EQ(shoal_protect(0, &v, 1, MPI_INT), SHOAL_SUCCESS);
    for (v = 1; v <= 4; v++)
        CHECK_EQ(shoal_checkpoint(), SHOAL_SUCCESS);
    CHECK_EQ(shoal_finalize(), SHOAL_SUCCESS);
    t_barrier();
    CHECK_EQ(count_epoch_dirs(job, 10), 4);

    t_env("keep-bad");
    setenv("SHOAL_KEEP_EPOCHS", "yes", 1);
    CHECK_EQ(shoal_init(MPI_COMM_WORLD), SHOAL_ERR_ARG);
    t_env("keep-bad");
}

/* Every scenario of this file, in the order test_api ran them. */
void test_epochs_all(void)
{
    test_pruning();
    test_recycling();
    test_no_spare();
    test_spare_and_load_lock();
    test_stage_file();
    test_stage_refill();
    test_keep_epochs();
}
