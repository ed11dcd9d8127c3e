/*
 * manifest.c - $SHOAL_DIR/$SHOAL_JOB/manifest (jobdir.c), the complete epochs, one per line:
 *
 *   epoch 3 nranks 4 created_ns 1795427000000000000
 *
 * and, after them, the run they belong to (binding.c):
 *
 *   run program 5f1c0a9e33d2b871 args 0c6e52b6a1f0e4d3 argv --steps 3000
 *
 * Only rank 0 reads and writes it; it is replaced whole (tmp, fsync, rename).
 *
 * Beside it, `finished` ("epoch E") says that a run ended with shoal_finalize after
 * epoch E: running the program again then starts from the beginning rather than
 * resuming a run that is over.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static int parse_line(const char *line, struct manifest_entry *e)
{
    int used = -1;
    if (sscanf(line, "epoch %lld nranks %lld created_ns %lld %n", &e->epoch, &e->nranks,
               &e->created_ns, &used) != 3 ||
        used < 0)
        return -1;
    if (line[used] != 0 || e->epoch < 1 || e->epoch > SHARD_EPOCH_MAX || e->nranks < 1)
        return -1;
    return 0;
}

/* "run program HEX args HEX argv SHOWN" */
static int parse_run(const char *line, struct run_binding *b)
{
    unsigned long long program, args;
    int used = -1;
    if (sscanf(line, "run program %16llx args %16llx argv%n", &program, &args, &used) != 2 ||
        used < 0 || (line[used] != 0 && line[used] != ' ') || program == 0 || args == 0)
        return -1;
    memset(b, 0, sizeof *b);
    b->program = program;
    b->args = args;
    snprintf(b->shown, sizeof b->shown, "%s", line[used] ? line + used + 1 : "");
    return 0;
}

static int cmp_epoch(const void *a, const void *b)
{
    long long x = ((const struct manifest_entry *)a)->epoch;
    long long y = ((const struct manifest_entry *)b)->epoch;
    return (x > y) - (x < y);
}

int manifest_read(const char *jobdir, struct manifest_entry **entries, int *n,
                  struct run_binding *bound)
{
    memset(bound, 0, sizeof *bound);
    *entries = NULL;
    *n = 0;
    char path[PATH_MAX];
    if (jobdir_path(path, sizeof path, jobdir, JOBDIR_MANIFEST, 0, 0) != 0)
        return ENAMETOOLONG;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return errno == ENOENT ? 0 : errno;
    struct manifest_entry *list = NULL;
    int len = 0, cap = 0, lineno = 0, err = 0;
    char line[512];
    while (fgets(line, sizeof line, f) != NULL) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (line[strspn(line, " \t")] == 0)
            continue;
        struct manifest_entry e;
        if (strncmp(line, "run ", 4) == 0 && parse_run(line, bound) == 0)
            continue;
        if (parse_line(line, &e) != 0) {
            shoal_log("%s:%d: ignoring malformed line \"%.80s\"", path, lineno, line);
            continue;
        }
        if (len == cap) {
            cap = cap ? 2 * cap : 8;
            struct manifest_entry *grown = realloc(list, sizeof *list * (size_t)cap);
            if (grown == NULL) {
                err = ENOMEM;
                break;
            }
            list = grown;
        }
        list[len++] = e;
    }
    if (ferror(f) && !err)
        err = EIO;
    fclose(f);
    if (err) {
        free(list);
        return err;
    }
    if (len > 1)
        qsort(list, (size_t)len, sizeof *list, cmp_epoch);
    /* A repeated epoch keeps its last line. */
    int out = 0;
    for (int i = 0; i < len; i++) {
        if (out > 0 && list[out - 1].epoch == list[i].epoch)
            out--;
        list[out++] = list[i];
    }
    *entries = list;
    *n = out;
    return 0;
}

int manifest_write(const char *jobdir, const struct manifest_entry *entries, int n,
                   const struct run_binding *bound, const struct store_hooks *hooks)
{
    char path[PATH_MAX];
    if (jobdir_path(path, sizeof path, jobdir, JOBDIR_MANIFEST, 0, 0) != 0)
        return ENAMETOOLONG;
    size_t cap = 96 * (size_t)(n > 0 ? n : 1) + 64 + BINDING_SHOWN, used = 0;
    char *text = malloc(cap);
    if (text == NULL)
        return ENOMEM;
    for (int i = 0; i < n; i++)
        used += (size_t)snprintf(text + used, cap - used,
                                 "epoch %lld nranks %lld created_ns %lld\n", entries[i].epoch,
                                 entries[i].nranks, entries[i].created_ns);
    /* After the epochs, so that the newest-last list reads as it always did. */
    if (bound != NULL && bound->program != 0)
        used += (size_t)snprintf(text + used, cap - used,
                                 "run program %016llx args %016llx argv %s\n",
                                 (unsigned long long)bound->program,
                                 (unsigned long long)bound->args, bound->shown);
    int err = store_write_reusing(path, text, used, 1, NULL, hooks);
    free(text);
    return err;
}

long long manifest_read_finished(const char *jobdir)
{
    char path[PATH_MAX], line[64];
    long long epoch = 0;
    if (jobdir_path(path, sizeof path, jobdir, JOBDIR_FINISHED, 0, 0) != 0)
        return 0;
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fgets(line, sizeof line, f) == NULL || sscanf(line, "epoch %lld", &epoch) != 1 ||
        epoch < 0)
        epoch = 0;
    fclose(f);
    return epoch;
}

int manifest_write_finished(const char *jobdir, long long epoch)
{
    char path[PATH_MAX], line[64];
    if (jobdir_path(path, sizeof path, jobdir, JOBDIR_FINISHED, 0, 0) != 0)
        return ENAMETOOLONG;
    int len = snprintf(line, sizeof line, "epoch %lld\n", epoch);
    return store_write_atomic(path, line, (size_t)len, 1);
}
