/*
 * store.c - the job directory's files: crash-safe writes, the stage file, listing and
 * pruning of epoch directories, and reading shards back. Their names are jobdir.c's.
 *
 *   $SHOAL_DIR/$SHOAL_JOB/eNNNNNNNN/rNNNNNN.shard   (docs/shard-format.md)
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "internal.h"

int store_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    size_t len = strlen(path);
    if (len == 0)
        return ENOENT;
    if (len >= sizeof buf)
        return ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != 0)
            continue;
        char saved = buf[i];
        buf[i] = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return errno;
        buf[i] = saved;
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return errno;
    return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

int store_probe_writable(const char *dir, int rank)
{
    /* A real file, not access(2): root passes access() on a read-only file system and
     * on directories without write permission bits. */
    char path[PATH_MAX];
    int err = jobdir_path(path, sizeof path, dir, JOBDIR_PROBE, 0, rank);
    if (err)
        return err;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    close(fd);
    unlink(path);
    return 0;
}

/* fsyncs the directory that holds path. */
static int fsync_parent(const char *path)
{
    char dir[PATH_MAX];
    if (strlen(path) >= sizeof dir)
        return ENAMETOOLONG;
    memcpy(dir, path, strlen(path) + 1);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        return store_fsync_dir(".");
    *slash = 0;
    return store_fsync_dir(slash == dir ? "/" : dir);
}

int store_is_tmpfs(const char *dir)
{
    struct statfs st;
    return statfs(dir, &st) == 0 && st.f_type == 0x01021994; /* TMPFS_MAGIC */
}

int store_stage_fault_in(unsigned char *p, size_t cap, int fd)
{
    int err = posix_fallocate(fd, 0, (off_t)cap);
    if (err == 0)
        mem_touch(p, cap); /* its blocks are there: no SIGBUS */
    return err;
}

unsigned char *store_stage_map(const char *jobdir, int rank, int use_spare, size_t cap,
                               int fault_in, int *fd)
{
    char stage[PATH_MAX], spare[PATH_MAX];
    if (jobdir_path(stage, sizeof stage, jobdir, JOBDIR_STAGE, 0, rank) != 0)
        return NULL;
    /* A spare's pages, or those of a stage file a killed run left, are in already. */
    if (use_spare && jobdir_path(spare, sizeof spare, jobdir, JOBDIR_SPARE, 0, rank) == 0)
        (void)rename(spare, stage);
    int f = open(stage, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0)
        return NULL;
    void *p = MAP_FAILED;
    if (ftruncate(f, (off_t)cap) == 0)
        p = mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
    if (p != MAP_FAILED && fault_in && store_stage_fault_in(p, cap, f) != 0) {
        munmap(p, cap);
        p = MAP_FAILED;
    }
    if (p == MAP_FAILED) {
        close(f);
        return NULL;
    }
    *fd = f;
    return p;
}

int store_stage_to_shard(const char *jobdir, int rank, int fd, size_t size, const char *path,
                         const struct store_hooks *hooks)
{
    char stage[PATH_MAX];
    int err = jobdir_path(stage, sizeof stage, jobdir, JOBDIR_STAGE, 0, rank);
    if (err)
        return err;
    if (ftruncate(fd, (off_t)size) != 0)
        return errno;
    if (hooks != NULL && hooks->written != NULL)
        hooks->written(hooks->arg, fd);
    if (fsync(fd) != 0)
        return errno;
    if (hooks != NULL && hooks->renaming != NULL)
        hooks->renaming(hooks->arg);
    if (rename(stage, path) != 0)
        return errno;
    return fsync_parent(path);
}

int store_fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int err = fsync(fd) == 0 ? 0 : errno;
    close(fd);
    /* Some file systems cannot fsync a directory; the rename is still atomic there. */
    return (err == EINVAL || err == ENOTSUP) ? 0 : err;
}

static int write_all(int fd, const unsigned char *p, size_t len)
{
    while (len > 0) {
        /* Bounded chunks: some systems reject single writes above 2 GB. */
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        ssize_t n = write(fd, p, chunk);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int store_write_atomic(const char *path, const void *data, size_t len, int durable)
{
    return store_write_reusing(path, data, len, durable, NULL, NULL);
}

/* write_all, a piece at a time, calling before for each piece first: pieces of 1 MiB,
 * which stay in the cache between before (hashing them) and the write. */
static int write_pieces(int fd, const unsigned char *p, size_t len,
                        void (*before)(void *arg, size_t off, size_t n), void *arg)
{
    const size_t piece = (size_t)1 << 20;
    for (size_t off = 0; off < len; off += piece) {
        size_t n = len - off < piece ? len - off : piece;
        before(arg, off, n);
        int err = write_all(fd, p + off, n);
        if (err)
            return err;
    }
    return 0;
}

int store_write_reusing(const char *path, const void *data, size_t len, int durable,
                        const char *reuse, const struct store_hooks *hooks)
{
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return ENAMETOOLONG;
    int fd = -1, reused = 0;
    if (reuse != NULL && rename(reuse, tmp) == 0) {
        fd = open(tmp, O_WRONLY | O_CLOEXEC);
        reused = fd >= 0;
        if (!reused) /* a spare this rank may not write (the agent's): a new file */
            unlink(tmp);
    }
    if (fd < 0)
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    int err = hooks != NULL && hooks->before != NULL
                  ? write_pieces(fd, data, len, hooks->before, hooks->arg)
                  : write_all(fd, data, len);
    /* A reused file may have been longer. */
    if (!err && reused && ftruncate(fd, (off_t)len) != 0)
        err = errno;
    if (!err && hooks != NULL && hooks->written != NULL)
        hooks->written(hooks->arg, fd);
    if (!err && durable && fsync(fd) != 0)
        err = errno;
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && hooks != NULL && hooks->renaming != NULL)
        hooks->renaming(hooks->arg);
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err) {
        unlink(tmp);
        return err;
    }
    return durable ? fsync_parent(path) : 0;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int store_list_epochs(const char *jobdir, long long **epochs, int *n)
{
    *epochs = NULL;
    *n = 0;
    DIR *d = opendir(jobdir);
    if (d == NULL)
        return errno;
    long long *list = NULL;
    int len = 0, cap = 0, err = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        long long e = jobdir_epoch_of(de->d_name);
        if (e < 0)
            continue;
        char path[PATH_MAX];
        struct stat st;
        if (jobdir_path(path, sizeof path, jobdir, JOBDIR_EPOCH, e, 0) != 0 ||
            stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        if (len == cap) {
            cap = cap ? 2 * cap : 16;
            long long *grown = realloc(list, sizeof *list * (size_t)cap);
            if (grown == NULL) {
                err = ENOMEM;
                break;
            }
            list = grown;
        }
        list[len++] = e;
    }
    closedir(d);
    if (err) {
        free(list);
        return err;
    }
    if (len > 1)
        qsort(list, (size_t)len, sizeof *list, cmp_ll);
    *epochs = list;
    *n = len;
    return 0;
}

/* Moves the shard file at path to rank's spare in jobdir, for its next shard to be
 * written over: the pages of a file written over are already the file's, where a new
 * file takes fresh ones from the kernel (and, on a virtual machine whose host takes back
 * the memory its guest frees, from the host), which took the writer twice as long
 * (bench/writer-cost). Only when no reader has the file open under a shared lock (a
 * reader locks it, then checks that the path still names what it opened:
 * store_load_shard, jobdir.OpenShard);
 * otherwise, or when the file cannot be moved, it is removed. An earlier spare is
 * replaced. */
static void recycle_or_remove(const char *path, const char *jobdir, int rank)
{
    char spare[PATH_MAX];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return; /* gone already */
    int kept = jobdir_path(spare, sizeof spare, jobdir, JOBDIR_SPARE, 0, rank) == 0 &&
               flock(fd, LOCK_EX | LOCK_NB) == 0 && rename(path, spare) == 0;
    close(fd);
    if (!kept)
        unlink(path);
}

/* Removes the entries of dir (all, or only *.tmp); rmdir when remove_dir. */
static void remove_entries(const char *dir, int only_tmp, int remove_dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (only_tmp && !jobdir_is_tmp(de->d_name))
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) < (int)sizeof path)
            unlink(path);
    }
    closedir(d);
    if (remove_dir)
        rmdir(dir);
}

/* Removes what an epoch directory holds beside the shards of this run's other ranks,
 * which each rank prunes itself (keeping it as its spare), then the directory if that
 * was the last. */
static void remove_leftovers(const char *dir, int rank, int nranks)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        int r = jobdir_shard_rank_of(de->d_name);
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
            (r >= 0 && r < nranks && r != rank))
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) < (int)sizeof path)
            unlink(path);
    }
    closedir(d);
}

/* Removes the file of kind for epoch and rank in jobdir, if there is one. */
static void remove_file(const char *jobdir, enum jobdir_kind kind, long long epoch, int rank)
{
    char path[PATH_MAX];
    if (jobdir_path(path, sizeof path, jobdir, kind, epoch, rank) == 0)
        unlink(path);
}

void store_prune(const char *jobdir, long long below, int rank, int nranks, int whole,
                 int keep_spare)
{
    long long *epochs;
    int n;
    if (store_list_epochs(jobdir, &epochs, &n) != 0)
        return;
    for (int i = 0; i < n && epochs[i] < below; i++) {
        char dir[PATH_MAX], path[PATH_MAX];
        if (jobdir_path(dir, sizeof dir, jobdir, JOBDIR_EPOCH, epochs[i], 0) != 0)
            continue;
        /* Errors are ignored: on a shared directory another rank may have removed its
         * files and the directory already. */
        if (jobdir_path(path, sizeof path, jobdir, JOBDIR_SHARD, epochs[i], rank) == 0) {
            if (keep_spare)
                recycle_or_remove(path, jobdir, rank);
            else
                unlink(path);
        }
        remove_file(jobdir, JOBDIR_SHARD_TMP, epochs[i], rank);
        remove_file(jobdir, JOBDIR_SUMS, epochs[i], rank);
        remove_file(jobdir, JOBDIR_SUMS_TMP, epochs[i], rank);
        if (whole)
            remove_leftovers(dir, rank, nranks);
        rmdir(dir);
    }
    free(epochs);
}

void store_remove_stale_tmp(const char *jobdir, long long below, int rank, int all)
{
    long long *epochs;
    int n;
    if (store_list_epochs(jobdir, &epochs, &n) == 0) {
        for (int i = 0; i < n && epochs[i] < below; i++) {
            char path[PATH_MAX];
            if (all) {
                if (jobdir_path(path, sizeof path, jobdir, JOBDIR_EPOCH, epochs[i], 0) == 0)
                    remove_entries(path, 1, 0);
            } else {
                remove_file(jobdir, JOBDIR_SHARD_TMP, epochs[i], rank);
                remove_file(jobdir, JOBDIR_SUMS_TMP, epochs[i], rank);
            }
        }
        free(epochs);
    }
    if (all)
        remove_entries(jobdir, 1, 0);
}

static int read_all(int fd, unsigned char *p, size_t len)
{
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        ssize_t n = read(fd, p, chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1; /* an error, or the file shrank while being read */
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

struct verify_call {
    const unsigned char *file;
    size_t size;
    struct shard_header *h;
};

static int verify_call(void *arg)
{
    struct verify_call *v = arg;
    return shard_verify(v->file, v->size, v->h);
}

/* Maps the file in place. 1 when mapped and verified (img set), 0 when this kernel or
 * file cannot be mapped so (read it instead), or a negative verdict. */
static int map_shard(int fd, size_t len, struct shard_image *img, struct shard_header *h)
{
    int err;
    unsigned char *m = mem_map_read(fd, len, &err);
    if (m == NULL)
        return err == EINVAL ? 0 : -SHARD_READ_ERROR; /* EFAULT: shorter than it was */
    struct verify_call v = {m, len, h};
    int verdict;
    if (mem_guarded(verify_call, &v, m, len, &verdict) != 0)
        verdict = SHARD_READ_ERROR; /* cut short while being read */
    if (verdict != SHARD_OK) {
        munmap(m, len);
        return -verdict;
    }
    *img = (struct shard_image){m, len, 1};
    return 1;
}

int store_load_shard(const char *path, struct shard_image *img, struct shard_header *h)
{
    return store_load_shard_id(path, img, h, NULL);
}

static void file_id_of(const struct stat *st, struct store_file_id *id)
{
    id->dev = (uint64_t)st->st_dev;
    id->ino = (uint64_t)st->st_ino;
    id->size = (uint64_t)st->st_size;
    id->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
}

int store_open_shard(const char *path, const struct store_file_id *want)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    struct store_file_id id;
    int locked;
    while ((locked = flock(fd, LOCK_SH)) != 0 && errno == EINTR)
        ;
    if (locked != 0 || fstat(fd, &st) != 0) {
        close(fd);
        return -1;
    }
    file_id_of(&st, &id);
    if (id.dev != want->dev || id.ino != want->ino || id.size != want->size ||
        id.mtime_ns != want->mtime_ns) {
        close(fd);
        errno = ESTALE;
        return -1;
    }
    return fd;
}

int store_pread(int fd, void *buf, size_t len, uint64_t off)
{
    unsigned char *p = buf;
    while (len > 0) {
        size_t chunk = len > (1u << 30) ? (1u << 30) : len;
        ssize_t n = pread(fd, p, chunk, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? EIO : errno;
        p += n;
        off += (uint64_t)n;
        len -= (size_t)n;
    }
    return 0;
}

int store_load_shard_id(const char *path, struct shard_image *img, struct shard_header *h,
                        struct store_file_id *id)
{
    *img = (struct shard_image){NULL, 0, 0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? SHARD_MISSING : SHARD_READ_ERROR;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return SHARD_READ_ERROR;
    }
    /* Locked shared while the file or its mapping is held (a mapping keeps the lock
     * past the close): a shard is moved aside to be written over only by whoever locks
     * it exclusively (recycle_or_remove here, the agent's jobdir.Dir.RetireEpoch). One
     * moved between the open and the lock is not this path's file any more: missing. */
    struct stat now;
    int locked;
    while ((locked = flock(fd, LOCK_SH)) != 0 && errno == EINTR)
        ;
    if (locked != 0 || stat(path, &now) != 0 || now.st_dev != st.st_dev ||
        now.st_ino != st.st_ino) {
        close(fd);
        return SHARD_MISSING;
    }
    if (id != NULL)
        file_id_of(&st, id);
    if ((uint64_t)st.st_size < SHARD_MIN_SIZE) {
        close(fd);
        return SHARD_TRUNCATED;
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return SHARD_NOMEM;
    }
    size_t len = (size_t)st.st_size;
    if (len >= STORE_MAP_MIN) {
        int mapped = map_shard(fd, len, img, h);
        if (mapped != 0) {
            close(fd);
            return mapped > 0 ? SHARD_OK : -mapped;
        }
    }
    if (len > SIZE_MAX - STAGE_SLACK) {
        close(fd);
        return SHARD_NOMEM;
    }
    unsigned char *buf = buf_alloc(len + STAGE_SLACK);
    if (buf == NULL) {
        close(fd);
        return SHARD_NOMEM;
    }
    int rd = read_all(fd, buf, len);
    close(fd);
    int verdict = rd == 0 ? shard_verify(buf, len, h) : SHARD_READ_ERROR;
    if (verdict != SHARD_OK) {
        free(buf);
        return verdict;
    }
    memset(buf + len, 0, STAGE_SLACK); /* faulted in now, as the file's part was */
    *img = (struct shard_image){buf, len, 0};
    return SHARD_OK;
}

void shard_image_free(struct shard_image *img)
{
    if (img->data != NULL) {
        if (img->mapped)
            munmap(img->data, img->size);
        else
            free(img->data);
    }
    *img = (struct shard_image){NULL, 0, 0};
}
