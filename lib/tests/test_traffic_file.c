/*
 * test_traffic_file.c - the traffic file writer without MPI: the writer produces the
 * bytes of every canonical valid vector of testdata/traffic/vectors.json (which the Go
 * reader checks too), and traffic_write puts them at jobdir/traffic/RANK.
 *
 * Usage: test_traffic_file [testdata/traffic]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "internal.h"
#include "json.h"

/* The snapshot a vector describes; its peers array is malloc'd. -1 if malformed. */
static int vector_snapshot(const struct json *v, struct traffic_snapshot *s)
{
    int64_t rank, nranks, epoch, first;
    const struct json *mpi = json_get(v, "seconds_mpi"), *total = json_get(v, "seconds_total");
    const struct json *peers = json_get(v, "peers");
    if (json_get_i64(v, "rank", &rank) || json_get_i64(v, "nranks", &nranks) ||
        json_get_i64(v, "epoch", &epoch) || json_get_i64(v, "first_epoch", &first) ||
        mpi == NULL || mpi->type != JSON_NUMBER || total == NULL ||
        total->type != JSON_NUMBER || peers == NULL || peers->type != JSON_ARRAY)
        return -1;
    memset(s, 0, sizeof *s);
    s->on = 1;
    s->rank = (int)rank;
    s->nranks = (int)nranks;
    s->epoch = epoch;
    s->first_epoch = first;
    s->seconds_mpi = strtod(mpi->text, NULL);
    s->seconds_total = strtod(total->text, NULL);
    s->peers = calloc((size_t)nranks, sizeof *s->peers);
    if (s->peers == NULL)
        return -1;
    for (int i = 0; i < peers->n; i++) {
        const struct json *p = peers->items[i];
        long peer =
            p->type == JSON_ARRAY && p->n == 3 ? strtol(p->items[0]->text, NULL, 10) : -1;
        if (peer < 0 || peer >= nranks) {
            free(s->peers);
            return -1;
        }
        s->peers[peer].bytes = strtoull(p->items[1]->text, NULL, 10);
        s->peers[peer].messages = strtoull(p->items[2]->text, NULL, 10);
    }
    return 0;
}

static void test_vectors(const char *dir)
{
    char path[512], err[128];
    snprintf(path, sizeof path, "%s/vectors.json", dir);
    size_t len;
    char *text = json_read_file(path, &len);
    if (!CHECK(text != NULL)) {
        fprintf(stderr, "cannot read %s\n", path);
        return;
    }
    const char *p = text;
    struct json *list = json_parse(&p, err, sizeof err);
    if (!CHECK(list != NULL && list->type == JSON_ARRAY)) {
        fprintf(stderr, "%s: %s\n", path, err);
        free(text);
        return;
    }
    int canonical = 0;
    for (int i = 0; i < list->n; i++) {
        const struct json *v = list->items[i];
        const struct json *ok = json_get(v, "ok"), *canon = json_get(v, "canonical");
        const char *file = json_get_str(v, "file");
        if (!CHECK(file != NULL && ok != NULL && ok->type == JSON_BOOL))
            continue;
        /* Invalid vectors are for readers; so are valid ones a writer never makes. */
        if (!ok->boolean || canon == NULL || !canon->boolean)
            continue;
        canonical++;
        struct traffic_snapshot s;
        if (!CHECK(vector_snapshot(v, &s) == 0)) {
            fprintf(stderr, "%s: malformed vector\n", file);
            continue;
        }
        snprintf(path, sizeof path, "%s/%s", dir, file);
        size_t want_len;
        char *want = json_read_file(path, &want_len);
        char *got = NULL;
        size_t got_len = 0;
        CHECK_EQ(traffic_format(&s, &got, &got_len), 0);
        if (!CHECK(want != NULL && got != NULL && got_len == want_len &&
                   memcmp(got, want, want_len) == 0))
            fprintf(stderr, "%s: the writer made\n%.*s", file, (int)got_len, got ? got : "");
        free(got);
        free(want);
        free(s.peers);
    }
    CHECK(canonical >= 3);
    json_free(list);
    free(text);
}

static void test_write(void)
{
    char jobdir[] = "/tmp/shoal-traffic-test.XXXXXX";
    if (!CHECK(mkdtemp(jobdir) != NULL))
        return;
    struct traffic_peer peers[3] = {{0, 0}, {300, 3}, {0, 0}};
    struct traffic_snapshot s = {1, 2, 3, 5, 4, 0.5, 2.0, peers};
    char failed[512] = "", path[600];
    CHECK_EQ(traffic_write(jobdir, &s, failed, sizeof failed), 0);
    snprintf(path, sizeof path, "%s/traffic/2", jobdir);
    size_t len;
    char *text = json_read_file(path, &len);
    CHECK_STR(text ? text : "",
              "shoal-traffic 1 rank 2 nranks 3 epoch 5 first_epoch 4 seconds_mpi 0.500000 "
              "seconds_total 2.000000\n1 300 3\n");
    free(text);
    /* Written again over the old one; no temporary file stays. */
    peers[1].messages = 4;
    s.epoch = 6;
    CHECK_EQ(traffic_write(jobdir, &s, failed, sizeof failed), 0);
    text = json_read_file(path, &len);
    CHECK(text != NULL && strstr(text, "epoch 6 ") != NULL && strstr(text, "1 300 4\n"));
    free(text);
    snprintf(path, sizeof path, "%s/traffic/2.tmp", jobdir);
    CHECK(access(path, F_OK) != 0);

    /* A job directory that is gone: the error names the directory. */
    char gone[512];
    snprintf(gone, sizeof gone, "%s/gone", jobdir);
    CHECK_EQ(traffic_write(gone, &s, failed, sizeof failed), ENOENT);
    snprintf(path, sizeof path, "%s/traffic", gone);
    CHECK_STR(failed, path);

    snprintf(path, sizeof path, "%s/traffic/2", jobdir);
    unlink(path);
    snprintf(path, sizeof path, "%s/traffic", jobdir);
    rmdir(path);
    rmdir(jobdir);
}

int main(int argc, char **argv)
{
    test_vectors(argc > 1 ? argv[1] : "testdata/traffic");
    test_write();
    return check_summary(check_passed, check_failed);
}
