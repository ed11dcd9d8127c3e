/*
 * shoal-rank: the rank wrapper (docs/launcher-protocol.md, "Rank wrapper") without
 * the start-up of the Go runtime. The coordinator starts every rank through it when it
 * is installed next to shoal: a launch of N ranks starts N wrappers at once, and `shoal
 * exec-rank`, the same wrapper in Go, takes about 10 ms of CPU to start and end where
 * this takes about 2 (bench/launch-profile).
 *
 * It takes exec-rank's arguments and does its work where that work is simple: it places
 * a job file missing from the work directory by copying it from the node's cache, and
 * takes one already there when the stamp `shoal exec-rank` left for it still describes it
 * (internal/files: a stamp is written only after a hash found the file identical).
 * Anything else (a file in place without a valid stamp, one missing from the cache, bad
 * arguments or environment) it hands to `shoal exec-rank` by exec, with the same
 * arguments, which hashes, reports and fails as it always has. So the rules of what
 * may be trusted live in one place, the Go package, and this reads their result.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGCONT, SIGUSR1, SIGUSR2};
#define NFORWARDED (int)(sizeof forwarded / sizeof forwarded[0])

static volatile sig_atomic_t told; /* a signal that stops the program was passed on */
static volatile pid_t child;

static void forward(int sig)
{
    if (sig != SIGCONT && sig != SIGUSR1 && sig != SIGUSR2)
        told = 1;
    if (child > 0)
        kill(child, sig);
}

static int saved_argc;
static char **saved_argv;

/* go_wrapper hands the whole rank to `shoal exec-rank`, next to this executable, with
 * this wrapper's arguments. */
static int go_wrapper(void)
{
    char self[PATH_MAX], shoal[PATH_MAX + 8];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "shoal-rank: cannot find its own executable: %s\n", strerror(errno));
        return 127;
    }
    self[n] = 0;
    *strrchr(self, '/') = 0;
    snprintf(shoal, sizeof shoal, "%s/shoal", self);
    char **args = calloc((size_t)saved_argc + 2, sizeof *args);
    if (!args)
        return 127;
    args[0] = shoal;
    args[1] = "exec-rank";
    memcpy(args + 2, saved_argv + 1, (size_t)saved_argc * sizeof *args); /* and NULL */
    execv(shoal, args);
    fprintf(stderr, "shoal-rank: cannot run %s: %s\n", shoal, strerror(errno));
    return 127;
}

/* A stage as `shoal exec-rank --stage` takes it: NAME=SHA256:MODE. */
struct stage {
    const char *name, *sum;
    unsigned mode;
};

/* parse_stage accepts what files.ParseStage accepts, and some less: anything it
 * refuses goes to the Go wrapper, which says why. */
static int parse_stage(char *v, struct stage *s)
{
    char *eq = strchr(v, '='), *colon, *end;
    if (!eq || eq == v)
        return -1;
    *eq = 0;
    colon = strchr(eq + 1, ':');
    if (!colon || colon - (eq + 1) != 64)
        return -1;
    *colon = 0;
    errno = 0;
    unsigned long mode = strtoul(colon + 1, &end, 8);
    if (errno || *end || end == colon + 1 || mode > 07777)
        return -1;
    s->name = v;
    s->sum = eq + 1;
    s->mode = (unsigned)mode;
    /* a relative path with no empty, "." or ".." component */
    if (v[0] == '/')
        return -1;
    for (const char *p = v; *p;) {
        const char *q = strchrnul(p, '/');
        size_t len = (size_t)(q - p);
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
            return -1;
        p = *q ? q + 1 : q;
        if (*q && !*p)
            return -1;
    }
    return 0;
}

static int mkdirs(const char *path, mode_t mode)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, mode) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, mode) != 0 && errno != EEXIST ? -1 : 0;
}

/* copy_in copies src to dst through a temporary file renamed into place, so that
 * ranks placing the same file at once never see part of one. */
static int copy_in(const char *src, const char *dst, unsigned mode)
{
    char dir[PATH_MAX], tmp[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s", dst);
    *strrchr(dir, '/') = 0;
    if (mkdirs(dir, 0755) != 0)
        return -1;
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return -1;
    snprintf(tmp, sizeof tmp, "%s/.stage-XXXXXX", dir);
    int out = mkostemp(tmp, O_CLOEXEC);
    if (out < 0) {
        close(in);
        return -1;
    }
    int ok = 1;
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
        if (n == 0)
            break;
        if (n < 0) {
            char buf[1 << 16];
            ssize_t r;
            while (ok && (r = read(in, buf, sizeof buf)) != 0) {
                if (r < 0 || write(out, buf, (size_t)r) != r)
                    ok = 0;
            }
            break;
        }
    }
    ok = ok && fchmod(out, mode & 0777) == 0;
    ok = (close(out) == 0) && ok;
    close(in);
    if (ok && rename(tmp, dst) == 0)
        return 0;
    unlink(tmp);
    return -1;
}

/* stamped reports whether the stamp of s in stamps describes st, as
 * internal/files writes stamps: "SUM SIZE INODE CTIME MTIME\n". */
static int stamped(const char *stamps, const struct stage *s, const struct stat *st)
{
    char path[PATH_MAX], want[160], got[160];
    int n = snprintf(path, sizeof path, "%s/", stamps);
    for (const char *p = s->name; *p && n < (int)sizeof path - 1; p++)
        path[n++] = *p == '/' ? '%' : *p;
    path[n] = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t len = read(fd, got, sizeof got - 1);
    close(fd);
    if (len <= 0)
        return 0;
    got[len] = 0;
    snprintf(want, sizeof want, "%s %llu %llu %lld %lld\n", s->sum,
             (unsigned long long)st->st_size, (unsigned long long)st->st_ino,
             (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec,
             (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec);
    return strcmp(want, got) == 0;
}

/* place readies the job files in work: 0 done, -1 for the Go wrapper to do. */
static int place(const char *node, const char *job_dir, const char *work, struct stage *stages,
                 int n)
{
    char stamps[PATH_MAX];
    if (snprintf(stamps, sizeof stamps, "%s/staged", job_dir) >= (int)sizeof stamps)
        return -1;
    for (int i = 0; i < n; i++) {
        char dst[PATH_MAX], src[PATH_MAX];
        struct stat st;
        if (snprintf(dst, sizeof dst, "%s/%s", work, stages[i].name) >= (int)sizeof dst ||
            snprintf(src, sizeof src, "%s/files/%s", node, stages[i].sum) >= (int)sizeof src)
            return -1;
        if (stat(dst, &st) == 0) {
            if ((st.st_mode & 0777) != (stages[i].mode & 0777) ||
                !stamped(stamps, &stages[i], &st))
                return -1;
            continue;
        }
        if (errno != ENOENT || copy_in(src, dst, stages[i].mode) != 0)
            return -1;
    }
    return 0;
}

/* rank_from reads a rank as strconv.Atoi would, refusing what is not a plain
 * non-negative number. */
static int rank_from(const char *v)
{
    if (!v || !*v || strlen(v) > 9)
        return -1;
    for (const char *p = v; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    return atoi(v);
}

/* ranks_contain is engine.RanksContain: -1 for a malformed list. */
static int ranks_contain(const char *list, int rank)
{
    int in = 0;
    if (!*list)
        return 0;
    for (const char *p = list;;) {
        char *end;
        errno = 0;
        if (*p < '0' || *p > '9')
            return -1;
        long a = strtol(p, &end, 10), b = a;
        if (errno)
            return -1;
        if (*end == '-') {
            const char *q = end + 1;
            if (*q < '0' || *q > '9')
                return -1;
            b = strtol(q, &end, 10);
            if (end == q || errno || b < a)
                return -1;
        }
        in = in || (rank >= a && rank <= b);
        if (*end == 0)
            return in;
        if (*end != ',')
            return -1;
        p = end + 1;
    }
}

/* The launcher runs with a lower soft limit on open files than its agent
 * (SHOAL_NOFILE, docs/launcher-protocol.md); a rank it starts gets the
 * agent's, at most the hard limit. */
static void restore_open_files(void)
{
    const char *v = getenv("SHOAL_NOFILE");
    if (!v)
        return;
    char *end;
    errno = 0;
    unsigned long long want = strtoull(v, &end, 10);
    int ok = *v && !*end && errno == 0;
    unsetenv("SHOAL_NOFILE");
    struct rlimit l;
    if (!ok || want == 0 || getrlimit(RLIMIT_NOFILE, &l) != 0)
        return;
    l.rlim_cur = want < l.rlim_max ? want : l.rlim_max;
    setrlimit(RLIMIT_NOFILE, &l);
}

static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* write_state writes ranks/rNNNNNN whole (engine.WriteRankState). */
static void write_state(const char *dir, int rank, const char *line)
{
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/r%06d", dir, rank);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    size_t len = strlen(line);
    int ok = write(fd, line, len) == (ssize_t)len;
    if (close(fd) == 0 && ok)
        rename(tmp, path);
}

int main(int argc, char **argv)
{
    pid_t start_ppid = getppid();
    saved_argc = argc;
    saved_argv = argv;
    /* Die with the launcher, and refuse to start if it is already gone. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        fprintf(stderr, "shoal: cannot ask to die with the launcher: %s\n", strerror(errno));
        return 127;
    }
    if (getppid() != start_ppid) {
        fprintf(stderr, "shoal: the launcher is gone; not starting\n");
        return 128 + SIGKILL;
    }
    struct stage *stages = calloc((size_t)argc, sizeof *stages);
    int nstages = 0, i = 1;
    if (!stages)
        return go_wrapper();
    for (; i < argc && strcmp(argv[i], "--") != 0; i += 2) {
        char *copy = i + 1 < argc ? strdup(argv[i + 1]) : NULL;
        if (strcmp(argv[i], "--stage") != 0 || !copy ||
            parse_stage(copy, &stages[nstages++]) != 0)
            return go_wrapper();
    }
    if (i + 1 >= argc)
        return go_wrapper();
    char **prog = argv + i + 1;

    const char *node = getenv("SHOAL_NODE_DATA");
    char dot_prog[PATH_MAX];
    if (node && *node) {
        const char *job = getenv("SHOAL_JOB");
        char job_dir[PATH_MAX], work[PATH_MAX], ckpt[PATH_MAX], ranks[PATH_MAX];
        if (!job || !*job || strchr(job, '/') || !strcmp(job, ".") || !strcmp(job, ".."))
            return go_wrapper();
        if (snprintf(job_dir, sizeof job_dir, "%s/jobs/%s", node, job) >= (int)sizeof job_dir ||
            snprintf(work, sizeof work, "%s/work", job_dir) >= (int)sizeof work ||
            snprintf(ranks, sizeof ranks, "%s/ranks", job_dir) >= (int)sizeof ranks)
            return go_wrapper();
        snprintf(ckpt, sizeof ckpt, "%s/ckpt", node); /* shorter than job_dir */
        mkdir(job_dir, 0700); /* the job's directory is its owner's alone */
        if (place(node, job_dir, work, stages, nstages) != 0 || mkdirs(work, 0755) != 0 ||
            chdir(work) != 0)
            return go_wrapper();
        setenv("SHOAL_DIR", ckpt, 1);
        setenv("SHOAL_RANKS_DIR", ranks, 1);
        mkdirs(ranks, 0755);
        if (!strchr(prog[0], '/')) {
            snprintf(dot_prog, sizeof dot_prog, "./%s", prog[0]);
            prog[0] = dot_prog;
        }
    } else if (nstages > 0) {
        return go_wrapper();
    }

    const char *dir = getenv("SHOAL_RANKS_DIR");
    int rank = rank_from(getenv("OMPI_COMM_WORLD_RANK"));
    if (rank < 0 && !getenv("OMPI_COMM_WORLD_RANK"))
        rank = rank_from(getenv("PMI_RANK")); /* MPICH's Hydra */
    if (!dir || !*dir || rank < 0)
        return go_wrapper();
    const char *list = getenv("SHOAL_STAGE_RANKS");
    if (list) {
        if (ranks_contain(list, rank) != 1)
            unsetenv("SHOAL_STAGE_WAIT");
        unsetenv("SHOAL_STAGE_RANKS");
    }

    restore_open_files();
    int report[2]; /* the child's errno when the program cannot be started */
    if (pipe2(report, O_CLOEXEC) != 0)
        return go_wrapper();
    /* Signals that arrive before the program runs are held, then passed on. */
    sigset_t block, old;
    sigemptyset(&block);
    for (int k = 0; k < NFORWARDED; k++)
        sigaddset(&block, forwarded[k]);
    sigprocmask(SIG_BLOCK, &block, &old);
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL); /* shoal exec-rank holds its own */
        return go_wrapper();
    }
    if (pid == 0) {
        /* The program must not outlive the wrapper. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != self)
            _exit(128 + SIGKILL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(report[0]);
        execvp(prog[0], prog);
        int e = errno;
        if (write(report[1], &e, sizeof e) < 0)
            _exit(127);
        _exit(127);
    }
    close(report[1]);
    int err = 0;
    ssize_t got;
    while ((got = read(report[0], &err, sizeof err)) < 0 && errno == EINTR)
        ;
    close(report[0]);
    char line[128];
    if (got == (ssize_t)sizeof err) {
        waitpid(pid, NULL, 0);
        fprintf(stderr, "shoal: rank %d: cannot start %s: %s\n", rank, prog[0], strerror(err));
        snprintf(line, sizeof line, "pid=0 state=exited time=%lld code=127\n", now_ns());
        write_state(dir, rank, line);
        return 127;
    }
    child = pid;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = forward;
    sa.sa_flags = SA_RESTART;
    for (int k = 0; k < NFORWARDED; k++)
        sigaction(forwarded[k], &sa, NULL);
    snprintf(line, sizeof line, "pid=%d state=running time=0\n", (int)pid);
    write_state(dir, rank, line);
    sigprocmask(SIG_SETMASK, &old, NULL);

    int status;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "shoal: rank %d: %s\n", rank, strerror(errno));
            snprintf(line, sizeof line, "pid=%d state=exited time=%lld code=127\n", (int)pid,
                     now_ns());
            write_state(dir, rank, line);
            return 127;
        }
    }
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        snprintf(line, sizeof line, "pid=%d state=%s time=%lld signal=%d\n", (int)pid,
                 told ? "stopped" : "signaled", now_ns(), sig);
        write_state(dir, rank, line);
        return 128 + sig;
    }
    int code = WEXITSTATUS(status);
    snprintf(line, sizeof line, "pid=%d state=exited time=%lld code=%d\n", (int)pid, now_ns(),
             code);
    write_state(dir, rank, line);
    return code;
}
