/*
 * shoal-rsh: `shoal rsh` (cmd/shoal/rsh.go; docs/launcher-protocol.md, "Starting the
 * daemons on other nodes") without the start-up of the Go runtime. mpirun starts one
 * launcher hook per node of a launch, all within its first second, and `shoal rsh` takes
 * about 8 ms of CPU to start, relay and end where this takes well under 1
 * (bench/launch-profile).
 *
 * It does the launch the coordinator sets up: through the local agent's socket
 * ($SHOAL_AGENT_SOCKET), as this process's user, to the agent of the node that
 * $SHOAL_RSH_NODES names; then it relays stdin, stdout, stderr and signals in the frames
 * of the launch protocol (docs/api.md, "The launch protocol") and exits with the
 * daemon's exit code. Anything else (--help, an option shoal rsh does not take, a secret
 * file instead of the socket, a node map or job id it does not read as expected, words
 * that are not plain ASCII, a launch the agents did not accept) it hands to `shoal rsh`,
 * next to this executable, by exec with the same arguments, which reports and fails as it
 * always has. Until the agent accepts a launch nothing has started, so the hand-over
 * repeats nothing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* The launch protocol's frames: a type byte, a big-endian uint32 payload length. */
enum { F_STDIN = 1, F_STDIN_CLOSE = 2, F_SIGNAL = 3, F_STDOUT = 4, F_STDERR = 5, F_EXIT = 6 };
#define HEADER 5
#define MAX_PAYLOAD (1u << 20)
#define CHUNK (32 << 10)

#define EXIT_RSH 255             /* shoal rsh failed itself, as ssh does */
#define LAUNCH_WAIT_MS 30000     /* for the agent's answer to the launch */
#define SIGNAL_GRACE_MS 3000     /* for the exit after a forwarded signal */
#define MAX_HEAD (16 << 10)      /* of the agent's answer */
#define MAX_NODES_FILE (4 << 20) /* of $SHOAL_RSH_NODES */

static int saved_argc;
static char **saved_argv;
static sigset_t saved_mask;
static const char *node = "";

/* go_rsh hands the launch to `shoal rsh`, next to this executable, with this one's
 * arguments and signal mask. */
static int go_rsh(void)
{
    char self[PATH_MAX], shoal[PATH_MAX + 8];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "shoal rsh: cannot find its own executable: %s\n", strerror(errno));
        return EXIT_RSH;
    }
    self[n] = 0;
    *strrchr(self, '/') = 0;
    snprintf(shoal, sizeof shoal, "%s/shoal", self);
    char **args = calloc((size_t)saved_argc + 2, sizeof *args);
    if (!args)
        return EXIT_RSH;
    args[0] = shoal;
    args[1] = "rsh";
    memcpy(args + 2, saved_argv + 1, (size_t)saved_argc * sizeof *args); /* and NULL */
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
    execv(shoal, args);
    fprintf(stderr, "shoal rsh: cannot run %s: %s\n", shoal, strerror(errno));
    return EXIT_RSH;
}

static int fail(const char *what)
{
    fprintf(stderr, "shoal rsh: node %s: %s\n", node, what);
    return EXIT_RSH;
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* valid_id: a job id, 1 to 63 bytes of [A-Za-z0-9._-] (api.ValidJobID). */
static int valid_id(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 63)
        return 0;
    for (; *s; s++)
        if (!(('a' <= *s && *s <= 'z') || ('A' <= *s && *s <= 'Z') || ('0' <= *s && *s <= '9') || *s == '.' ||
              *s == '_' || *s == '-'))
            return 0;
    return 1;
}

/* json_string reads a JSON string at *p of plain ASCII with the escapes Go writes for
 * it, into out (NUL-terminated, at most cap bytes), and advances *p; 0 when it is
 * anything else. */
static int json_string(const char **p, char *out, size_t cap)
{
    const char *s = *p;
    size_t n = 0;
    if (*s++ != '"')
        return 0;
    for (;;) {
        unsigned char c = (unsigned char)*s++;
        if (c == '"')
            break;
        if (c < 0x20 || c >= 0x80)
            return 0;
        if (c == '\\') {
            switch (*s++) {
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            case '/': c = '/'; break;
            default: return 0;
            }
        }
        if (n + 1 >= cap)
            return 0;
        out[n++] = (char)c;
    }
    out[n] = 0;
    *p = s;
    return 1;
}

static const char *skip_space(const char *s)
{
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    return s;
}

/* node_addr finds name in the JSON object of strings in file, into addr; 0 when the
 * file is not such an object or does not name it. */
static int node_addr(const char *file, const char *name, char *addr, size_t cap)
{
    FILE *f = fopen(file, "r");
    if (!f)
        return 0;
    char *buf = malloc(MAX_NODES_FILE + 1);
    size_t len = buf ? fread(buf, 1, MAX_NODES_FILE + 1, f) : 0;
    fclose(f);
    if (!buf || len > MAX_NODES_FILE) {
        free(buf);
        return 0;
    }
    buf[len] = 0;
    int found = 0;
    char key[256], val[256];
    const char *s = skip_space(buf);
    if (*s++ != '{')
        goto out;
    s = skip_space(s);
    if (*s == '}')
        goto out;
    for (;;) {
        if (!json_string(&s, key, sizeof key))
            goto out;
        s = skip_space(s);
        if (*s++ != ':')
            goto out;
        s = skip_space(s);
        if (!json_string(&s, val, sizeof val))
            goto out;
        if (strcmp(key, name) == 0 && val[0] && strlen(val) < cap) {
            strcpy(addr, val);
            found = 1;
        }
        s = skip_space(s);
        if (*s == '}')
            break;
        if (*s++ != ',')
            goto out;
        s = skip_space(s);
    }
    s = skip_space(s + 1);
    if (*s)
        found = 0; /* not one object */
out:
    free(buf);
    return found;
}

/* json_word appends s to the buffer at b as a JSON string; 0 for bytes that are not
 * plain ASCII, which Go would encode otherwise. */
static int json_word(char **b, char *end, const char *s)
{
    char *o = *b;
    if (o >= end)
        return 0;
    *o++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x80 || end - o < 8)
            return 0;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c < 0x20) {
            o += sprintf(o, "\\u%04x", c);
        } else {
            *o++ = (char)c;
        }
    }
    if (end - o < 2)
        return 0;
    *o++ = '"';
    *b = o;
    return 1;
}

/* put_all writes all of p to fd; 0 on an error. The socket's writes raise no SIGPIPE. */
static int put_all(int fd, const void *p, size_t n, int sock)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = sock ? send(fd, c, n, MSG_NOSIGNAL) : write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return 0;
        c += w;
        n -= (size_t)w;
    }
    return 1;
}

static int send_frame(int sock, int type, const void *payload, uint32_t n)
{
    unsigned char h[HEADER] = {(unsigned char)type, (unsigned char)(n >> 24), (unsigned char)(n >> 16),
                               (unsigned char)(n >> 8), (unsigned char)n};
    return put_all(sock, h, HEADER, 1) && (n == 0 || put_all(sock, payload, n, 1));
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* launch sends the launch request on sock and reads the agent's answer up to its blank
 * line; it returns the answer's status (0: none), and leaves in buf what followed it,
 * the first frames, *have bytes of it. A signal before the answer is *sig. */
static int launch(int sock, int sigfd, const char *body, size_t len, unsigned char *buf, size_t *have, int *sig)
{
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST /v1/launch HTTP/1.1\r\nHost: agent\r\nUser-Agent: shoal-rsh\r\n"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: Upgrade\r\nUpgrade: shoal-launch/1\r\n\r\n",
                      len);
    if (!put_all(sock, head, (size_t)hn, 1) || !put_all(sock, body, len, 1))
        return 0;
    size_t n = 0;
    long long deadline = now_ms() + LAUNCH_WAIT_MS;
    for (;;) {
        struct pollfd fds[2] = {{sock, POLLIN, 0}, {sigfd, POLLIN, 0}};
        long long left = deadline - now_ms();
        if (left <= 0)
            return 0;
        if (poll(fds, 2, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            return 0;
        }
        if (fds[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sigfd, &si, sizeof si) == sizeof si) {
                *sig = (int)si.ssi_signo;
                return 0;
            }
        }
        if (!(fds[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t r = read(sock, buf + n, MAX_HEAD - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return 0;
        n += (size_t)r;
        unsigned char *end = memmem(buf, n, "\r\n\r\n", 4);
        if (end) {
            int status = 0;
            if (n < 12 || memcmp(buf, "HTTP/1.1 ", 9) != 0 || sscanf((char *)buf + 9, "%3d", &status) != 1)
                return 0;
            size_t used = (size_t)(end + 4 - buf);
            memmove(buf, buf + used, n - used);
            *have = n - used;
            return status;
        }
        if (n == MAX_HEAD)
            return 0;
    }
}

int main(int argc, char **argv)
{
    saved_argc = argc;
    saved_argv = argv;
    sigprocmask(SIG_SETMASK, NULL, &saved_mask);

    /* A killed mpirun must not leave this relay behind (as shoal rsh). */
    pid_t parent = getppid();
    if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
        return go_rsh();
    if (getppid() != parent) {
        fprintf(stderr, "shoal: the launcher is gone; not starting\n");
        return 128 + SIGKILL;
    }

    int i = 1, no_stdin = 0;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (strcmp(argv[i], "-n") == 0)
            no_stdin = 1;
        else if (strcmp(argv[i], "-x") != 0 && strcmp(argv[i], "-q") != 0 && strcmp(argv[i], "-T") != 0)
            return go_rsh(); /* --help, or what shoal rsh reports */
    }
    if (argc - i < 2)
        return go_rsh();
    node = argv[i];
    const char *at = strrchr(node, '@'); /* user@node, as for ssh */
    if (at)
        node = at + 1;
    const char *sock_path = getenv("SHOAL_AGENT_SOCKET");
    const char *nodes = getenv("SHOAL_RSH_NODES");
    const char *job = getenv("SHOAL_JOB");
    char addr[256];
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (!sock_path || !*sock_path || strlen(sock_path) >= sizeof sa.sun_path || !nodes || !*nodes || !job ||
        !valid_id(job) || !node_addr(nodes, node, addr, sizeof addr))
        return go_rsh();
    strcpy(sa.sun_path, sock_path);

    /* The request: {"job":J,"argv":[WORDS],"to":ADDR}. */
    size_t cap = 64 + strlen(job) + strlen(addr);
    for (int k = i + 1; k < argc; k++)
        cap += 8 * strlen(argv[k]) + 4;
    char *body = malloc(cap), *b = body, *end = body + cap;
    if (!body)
        return go_rsh();
    b += sprintf(b, "{\"job\":\"%s\",\"argv\":[", job);
    for (int k = i + 1; k < argc; k++) {
        if (k > i + 1)
            *b++ = ',';
        if (!json_word(&b, end, argv[k]))
            return go_rsh();
    }
    b += sprintf(b, "],\"to\":");
    if (!json_word(&b, end, addr) || end - b < 2)
        return go_rsh();
    *b++ = '}';

    /* Signals are taken from here on, so that none is lost between the launch and the
     * relay: they are forwarded once the daemon runs. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &sigs, NULL);
    int sigfd = signalfd(-1, &sigs, SFD_CLOEXEC);
    int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sigfd < 0 || sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof sa) != 0)
        return go_rsh();
    unsigned char *in = malloc(HEADER + MAX_PAYLOAD > MAX_HEAD ? HEADER + MAX_PAYLOAD : MAX_HEAD);
    size_t have = 0;
    int sig = 0;
    int status = in ? launch(sock, sigfd, body, (size_t)(b - body), in, &have, &sig) : 0;
    if (sig) /* before the daemon started: nothing to forward it to */
        return 128 + sig;
    if (status != 101) {
        close(sock);
        return go_rsh();
    }

    /* The relay, until the exit frame. What is sent may fail unnoticed: a command that
     * ended at once may have its connection closed before its input's end is sent, and
     * its exit is still to be read. */
    int stdin_open = !no_stdin;
    if (no_stdin)
        send_frame(sock, F_STDIN_CLOSE, NULL, 0);
    int first = 0;
    long long deadline = 0;
    static unsigned char chunk[CHUNK];
    for (;;) {
        /* Every whole frame received so far. */
        while (have >= HEADER) {
            int type = in[0];
            uint32_t n = be32(in + 1);
            if (type < F_STDOUT || type > F_EXIT || n > MAX_PAYLOAD || (type == F_EXIT && n != 5))
                return fail("launch: protocol error: a frame the agent must not send");
            if (have < HEADER + n)
                break;
            unsigned char *p = in + HEADER;
            if (type == F_EXIT) {
                uint32_t v = be32(p + 1);
                if (p[0] > 1)
                    return fail("launch: protocol error: malformed exit frame");
                return p[0] == 1 ? 128 + (int)v : (int)(v & 0xff);
            }
            put_all(type == F_STDOUT ? 1 : 2, p, n, 0); /* errors ignored, as under ssh */
            memmove(in, in + HEADER + n, have - HEADER - n);
            have -= HEADER + n;
        }
        struct pollfd fds[3] = {{sock, POLLIN, 0}, {sigfd, POLLIN, 0}, {stdin_open ? 0 : -1, POLLIN, 0}};
        int timeout = -1;
        if (first) {
            long long left = deadline - now_ms();
            if (left <= 0) /* the connection's close makes the agent kill the daemon */
                return 128 + first;
            timeout = (int)left;
        }
        if (poll(fds, 3, timeout) < 0) {
            if (errno == EINTR)
                continue;
            return fail("launch: connection lost before the command's exit status");
        }
        if (fds[1].revents & POLLIN) {
            struct signalfd_siginfo si;
            if (read(sigfd, &si, sizeof si) == sizeof si) {
                unsigned char s[4] = {0, 0, 0, (unsigned char)si.ssi_signo};
                send_frame(sock, F_SIGNAL, s, 4);
                if (!first) {
                    first = (int)si.ssi_signo;
                    deadline = now_ms() + SIGNAL_GRACE_MS;
                }
            }
        }
        if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = read(0, chunk, sizeof chunk);
            if (r > 0) {
                stdin_open = send_frame(sock, F_STDIN, chunk, (uint32_t)r);
            } else if (r == 0 || errno != EINTR) {
                stdin_open = 0;
                send_frame(sock, F_STDIN_CLOSE, NULL, 0);
            }
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t r = read(sock, in + have, HEADER + MAX_PAYLOAD - have);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                return fail("launch: connection lost before the command's exit status");
            have += (size_t)r;
        }
    }
}
