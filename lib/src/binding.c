/*
 * binding.c - which run a standalone checkpoint belongs to: the program and its
 * arguments. Standalone, the job id defaults to the program's file name, so running
 * `heat --steps 200` after a killed `heat --steps 3000` would otherwise resume the
 * other run's state and print a wrong result. Rank 0 records the binding in the
 * manifest and a standalone restart uses a checkpoint only when it matches.
 *
 * The program is the executable's real path, size and modification time: a rebuilt
 * program may lay out its state differently, so its checkpoints are not trusted
 * either. For an interpreter (python3 heat.py) the script is among the arguments.
 */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "internal.h"

/* Appends arg to shown, as a shell would need it: bytes that are not printable ASCII
 * become '?', and the list ends with "..." when it does not fit. */
static void show_arg(char *shown, size_t cap, const char *arg, size_t len)
{
    size_t used = strlen(shown);
    if (used + 4 >= cap || (used >= 3 && strcmp(shown + used - 3, "...") == 0))
        return;
    if (used > 0)
        shown[used++] = ' ';
    for (size_t i = 0; i < len; i++) {
        if (used + 4 >= cap) {
            memcpy(shown + used, "...", 3);
            used += 3;
            break;
        }
        unsigned char ch = (unsigned char)arg[i];
        shown[used++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    shown[used] = 0;
}

void binding_from(struct run_binding *b, const char *exe, const struct stat *st,
                  const char *cmdline, size_t len)
{
    memset(b, 0, sizeof *b);
    XXH3_state_t *h = XXH3_createState();
    if (h == NULL)
        return;
    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, exe, strlen(exe) + 1);
    int64_t id[3] = {(int64_t)st->st_size, (int64_t)st->st_mtim.tv_sec,
                     (int64_t)st->st_mtim.tv_nsec};
    XXH3_64bits_update(h, id, sizeof id);
    b->program = XXH3_64bits_digest(h) | 1; /* never 0, which means unknown */
    XXH3_freeState(h);

    /* cmdline: argv[0] NUL argv[1] NUL ...; argv[0] is how the program was named,
     * which the executable's path already stands for. */
    const char *end = cmdline + len, *p = memchr(cmdline, 0, len);
    p = p == NULL ? end : p + 1;
    b->args = XXH3_64bits(p, (size_t)(end - p)) | 1;
    while (p < end) {
        const char *stop = memchr(p, 0, (size_t)(end - p));
        size_t n = stop == NULL ? (size_t)(end - p) : (size_t)(stop - p);
        show_arg(b->shown, sizeof b->shown, p, n);
        p += n + 1;
    }
}

void binding_current(struct run_binding *b)
{
    memset(b, 0, sizeof *b);
#if defined(__linux__)
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    struct stat st;
    if (n <= 0 || stat("/proc/self/exe", &st) != 0)
        return;
    exe[n] = 0;
    static char cmdline[64 * 1024];
    FILE *f = fopen("/proc/self/cmdline", "rb");
    if (f == NULL)
        return;
    size_t len = fread(cmdline, 1, sizeof cmdline, f);
    int whole = feof(f) && !ferror(f);
    fclose(f);
    if (!whole || len == 0)
        return; /* longer than we read: unknown, rather than a partial digest */
    binding_from(b, exe, &st, cmdline, len);
#endif
}
