/*
 * test_layout.c - layout.c without MPI communication: the datatype codes, the runs a
 * piece of a box makes in a buffer, and the pieces of old parts a new region needs
 * (gaps and overlaps among them named), case by case.
 */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "internal.h"

static struct region_layout box2(uint32_t order, uint64_t r0, uint64_t n0, uint64_t r1, uint64_t n1,
                                 uint64_t s0, uint64_t s1)
{
    struct region_layout l;
    memset(&l, 0, sizeof l);
    l.kind = REGION_SUBARRAY;
    l.ndims = 2;
    l.order = order;
    l.sizes[0] = s0;
    l.sizes[1] = s1;
    l.starts[0] = r0;
    l.subsizes[0] = n0;
    l.starts[1] = r1;
    l.subsizes[1] = n1;
    return l;
}

static void test_datatype_codes(void)
{
    const struct {
        MPI_Datatype type;
        uint16_t code;
    } cases[] = {{MPI_DOUBLE, 14},      {MPI_INT, 7},       {MPI_CHAR, 1},
                 {MPI_INT64_T, 21},     {MPI_FLOAT, 13},    {MPI_C_DOUBLE_COMPLEX, 27},
                 {MPI_DOUBLE_PRECISION, 34}, {MPI_DATATYPE_NULL, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!CHECK_EQ(layout_datatype_code(cases[i].type), cases[i].code))
            fprintf(stderr, "  case %zu\n", i);
}

static const struct runs_case {
    const char *what;
    uint64_t lo[2], hi[2]; /* the piece */
    uint64_t base, run_bytes, nruns, second; /* second: offset of run 1 */
} runs_cases[] = {
    /* C order, box rows 2..5, columns 3..7 of 10 x 10, doubles (a row: 40 bytes). */
    {"whole rows merge into one run", {3, 3}, {5, 8}, 40, 80, 1, 0},
    {"part of rows: a run a row", {3, 4}, {5, 6}, 48, 16, 2, 88},
    {"one element", {5, 7}, {6, 8}, 3 * 40 + 4 * 8, 8, 1, 0},
};

static void test_runs(void)
{
    for (size_t i = 0; i < sizeof runs_cases / sizeof runs_cases[0]; i++) {
        const struct runs_case *c = &runs_cases[i];
        struct region_layout box = box2(LAYOUT_ORDER_C, 2, 4, 3, 5, 10, 10);
        struct layout_runs r;
        layout_runs(&box, 8, c->lo, c->hi, &r);
        int ok = CHECK_EQ(r.base, c->base) & CHECK_EQ(r.run_bytes, c->run_bytes) &
                 CHECK_EQ(r.nruns, c->nruns);
        if (c->nruns > 1)
            ok &= CHECK_EQ(layout_run_offset(&r, 1), c->second);
        if (!ok)
            fprintf(stderr, "  case: %s\n", c->what);
    }
    /* Fortran order: the first dimension is the fastest. A 3-d box of 4 x 3 x 2 at
     * (1, 0, 5); the piece x 1..5, y 1..3, z 6..7 spans x whole: runs of 2 rows. */
    struct region_layout f;
    memset(&f, 0, sizeof f);
    f.kind = REGION_SUBARRAY;
    f.ndims = 3;
    f.order = LAYOUT_ORDER_FORTRAN;
    const uint64_t sizes[3] = {8, 8, 8}, subs[3] = {4, 3, 2}, starts[3] = {1, 0, 5};
    memcpy(f.sizes, sizes, sizeof sizes);
    memcpy(f.subsizes, subs, sizeof subs);
    memcpy(f.starts, starts, sizeof starts);
    const uint64_t lo[3] = {1, 1, 6}, hi[3] = {5, 3, 7};
    struct layout_runs r;
    layout_runs(&f, 4, lo, hi, &r);
    CHECK_EQ(r.run_bytes, 4 * 2 * 4); /* x whole, then 2 of y */
    CHECK_EQ(r.nruns, 1);
    CHECK_EQ(r.base, (1 * 4 * 3 + 1 * 4) * 4); /* z 1, y 1 of the box */
    layout_runs_bytes(24, 16, &r);
    CHECK(r.base == 24 && r.run_bytes == 16 && r.nruns == 1 && layout_run_offset(&r, 0) == 24);
}

static void test_plan_blocks(void)
{
    struct region_layout old[3], need;
    memset(old, 0, sizeof old);
    memset(&need, 0, sizeof need);
    for (int i = 0; i < 3; i++) {
        old[i].kind = REGION_BLOCK;
        old[i].global = 30;
    }
    need.kind = REGION_BLOCK;
    need.global = 30;
    need.offset = 5;
    /* Old ranks 0, 1, 2 hold 0..10, 10..20, 20..30, given out of order. */
    old[0].offset = 20, old[1].offset = 0, old[2].offset = 10;
    struct layout_part parts[3] = {{2, &old[0], 10}, {0, &old[1], 10}, {1, &old[2], 10}};
    struct layout_piece pieces[3];
    struct layout_problem why;
    int n = layout_plan(&need, 20, parts, 3, pieces, &why);
    if (CHECK_EQ(n, 3)) {
        CHECK(pieces[0].old_rank == 0 && pieces[0].lo[0] == 5 && pieces[0].hi[0] == 10);
        CHECK(pieces[1].old_rank == 1 && pieces[1].lo[0] == 10 && pieces[1].hi[0] == 20);
        CHECK(pieces[2].old_rank == 2 && pieces[2].lo[0] == 20 && pieces[2].hi[0] == 25);
    }
    /* A gap: old rank 1 held nothing; elements 10.. are nowhere. */
    struct layout_part gap[3] = {{0, &old[1], 10}, {1, &old[2], 0}, {2, &old[0], 10}};
    CHECK_EQ(layout_plan(&need, 20, gap, 3, pieces, &why), -1);
    CHECK(why.kind == LAYOUT_GAP && why.at == 10);
    /* An overlap: old rank 1 holds 10..25. */
    struct layout_part over[3] = {{0, &old[1], 10}, {1, &old[2], 15}, {2, &old[0], 10}};
    CHECK_EQ(layout_plan(&need, 20, over, 3, pieces, &why), -1);
    CHECK(why.kind == LAYOUT_OVERLAP && why.old_rank[0] == 1 && why.old_rank[1] == 2);
    /* Nothing needed: no pieces. */
    CHECK_EQ(layout_plan(&need, 0, parts, 3, pieces, &why), 0);
}

static void test_plan_boxes(void)
{
    /* Old: a 2 x 2 grid of 3 x 4 boxes over 6 x 8. New: rows 2..5 of all columns. */
    struct region_layout old[4];
    struct layout_part parts[4];
    for (int r = 0; r < 4; r++) {
        old[r] = box2(LAYOUT_ORDER_C, 3 * (uint64_t)(r / 2), 3, 4 * (uint64_t)(r % 2), 4, 6, 8);
        parts[r] = (struct layout_part){r, &old[r], 12};
    }
    struct region_layout need = box2(LAYOUT_ORDER_C, 2, 3, 0, 8, 6, 8);
    struct layout_piece pieces[4];
    struct layout_problem why;
    int n = layout_plan(&need, 24, parts, 4, pieces, &why);
    uint64_t volume = 0;
    for (int i = 0; i < n; i++)
        volume += layout_volume(2, pieces[i].lo, pieces[i].hi);
    CHECK_EQ(n, 4);
    CHECK_EQ(volume, 24);
    CHECK(pieces[0].old_rank == 0 && pieces[0].lo[0] == 2 && pieces[0].hi[0] == 3 &&
          pieces[0].lo[1] == 0 && pieces[0].hi[1] == 4);
    /* Without old rank 3's box, 8 elements are nowhere; with two alike, they overlap. */
    CHECK_EQ(layout_plan(&need, 24, parts, 3, pieces, &why), -1);
    CHECK(why.kind == LAYOUT_GAP && why.at == 8);
    parts[3].layout = &old[2];
    parts[3].old_rank = 7;
    CHECK_EQ(layout_plan(&need, 24, parts, 4, pieces, &why), -1);
    CHECK(why.kind == LAYOUT_OVERLAP && why.old_rank[0] == 2 && why.old_rank[1] == 7);
}

static void test_subarray_arguments(void)
{
    struct region_layout l;
    uint64_t count;
    char msg[200];
    const int sizes[2] = {6, 8}, subs[2] = {3, 4}, starts[2] = {3, 4}, far[2] = {4, 4};
    CHECK_EQ(layout_subarray(&l, 2, sizes, subs, starts, LAYOUT_ORDER_C, &count, msg, sizeof msg), 0);
    CHECK_EQ(count, 12);
    CHECK_EQ(layout_subarray(&l, 2, sizes, subs, far, LAYOUT_ORDER_C, &count, msg, sizeof msg), -1);
    CHECK(strstr(msg, "dimension 0") != NULL);
    CHECK_EQ(layout_subarray(&l, 0, sizes, subs, starts, LAYOUT_ORDER_C, &count, msg, sizeof msg), -1);
    CHECK_EQ(layout_subarray(&l, 33, sizes, subs, starts, LAYOUT_ORDER_C, &count, msg, sizeof msg), -1);
}

int main(void)
{
    test_datatype_codes();
    test_runs();
    test_plan_blocks();
    test_plan_boxes();
    test_subarray_arguments();
    return check_summary(check_passed, check_failed);
}
