/*
 * layout.c - where a region's elements lie in its global array, and which parts of the
 * old ranks' regions a new rank's region needs after a change of the rank count
 * (docs/libshoal.md, "Changing the rank count"). Pure functions: no I/O, and no MPI but
 * comparing datatype handles.
 *
 * A distributed region is a block of a 1-D array (count elements at offset of global)
 * or a box of an N-d array in the shape of MPI_Type_create_subarray (global sizes, the
 * local subsizes, starts, C or Fortran order), its elements in the local buffer in that
 * order. The bytes of a piece (a range of a block, the intersection of two boxes) go
 * from one old shard to one new region as one stream, in the order of the global array:
 * both ends cut it into runs contiguous in their own buffer (layout_runs), so neither
 * needs the other's buffer to agree on which byte comes next.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* The stable code of each MPI basic datatype (docs/shard-format.md, "Datatype codes").
 * Codes are never reused; a type not listed, or a derived one, is 0: bytes. */
uint16_t layout_datatype_code(MPI_Datatype type)
{
    const struct {
        MPI_Datatype type;
        uint16_t code;
    } codes[] = {
        {MPI_CHAR, 1},
        {MPI_SIGNED_CHAR, 2},
        {MPI_UNSIGNED_CHAR, 3},
        {MPI_BYTE, 4},
        {MPI_SHORT, 5},
        {MPI_UNSIGNED_SHORT, 6},
        {MPI_INT, 7},
        {MPI_UNSIGNED, 8},
        {MPI_LONG, 9},
        {MPI_UNSIGNED_LONG, 10},
        {MPI_LONG_LONG, 11},
        {MPI_UNSIGNED_LONG_LONG, 12},
        {MPI_FLOAT, 13},
        {MPI_DOUBLE, 14},
        {MPI_LONG_DOUBLE, 15},
        {MPI_WCHAR, 16},
        {MPI_C_BOOL, 17},
        {MPI_INT8_T, 18},
        {MPI_INT16_T, 19},
        {MPI_INT32_T, 20},
        {MPI_INT64_T, 21},
        {MPI_UINT8_T, 22},
        {MPI_UINT16_T, 23},
        {MPI_UINT32_T, 24},
        {MPI_UINT64_T, 25},
        {MPI_C_FLOAT_COMPLEX, 26},
        {MPI_C_DOUBLE_COMPLEX, 27},
        {MPI_C_LONG_DOUBLE_COMPLEX, 28},
        {MPI_AINT, 29},
        {MPI_OFFSET, 30},
        {MPI_COUNT, 31},
        {MPI_INTEGER, 32},
        {MPI_REAL, 33},
        {MPI_DOUBLE_PRECISION, 34},
        {MPI_COMPLEX, 35},
        {MPI_DOUBLE_COMPLEX, 36},
        {MPI_LOGICAL, 37},
        {MPI_CHARACTER, 38},
        {MPI_INTEGER1, 39},
        {MPI_INTEGER2, 40},
        {MPI_INTEGER4, 41},
        {MPI_INTEGER8, 42},
        {MPI_REAL4, 43},
        {MPI_REAL8, 44},
        {MPI_COMPLEX8, 45},
        {MPI_COMPLEX16, 46},
    };
    if (type == MPI_DATATYPE_NULL)
        return 0;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        if (codes[i].type != MPI_DATATYPE_NULL && codes[i].type == type)
            return codes[i].code;
    return 0;
}

const char *layout_kind_name(int kind)
{
    switch (kind) {
    case REGION_PLAIN:
        return "per-rank";
    case REGION_BLOCK:
        return "block";
    case REGION_SUBARRAY:
        return "subarray";
    case REGION_REPLICATED:
        return "replicated";
    default:
        return "unknown";
    }
}

int layout_subarray(struct region_layout *l, int ndims, const int sizes[], const int subsizes[],
                    const int starts[], int order, uint64_t *count, char *msg, size_t len)
{
    if (ndims < 1 || ndims > SHARD_MAX_DIMS) {
        snprintf(msg, len, "%d dimensions (want 1 to %d)", ndims, SHARD_MAX_DIMS);
        return -1;
    }
    if (sizes == NULL || subsizes == NULL || starts == NULL) {
        snprintf(msg, len, "sizes, subsizes and starts must be given");
        return -1;
    }
    l->kind = REGION_SUBARRAY;
    l->ndims = (uint32_t)ndims;
    l->order = (uint32_t)order;
    uint64_t n = 1;
    for (int d = 0; d < ndims; d++) {
        if (sizes[d] < 1 || subsizes[d] < 0 || starts[d] < 0 || starts[d] > sizes[d] ||
            subsizes[d] > sizes[d] - starts[d]) {
            snprintf(msg, len,
                     "dimension %d: size %d, subsize %d, start %d (want size >= 1 and "
                     "0 <= start <= start + subsize <= size)",
                     d, sizes[d], subsizes[d], starts[d]);
            return -1;
        }
        l->sizes[d] = (uint64_t)sizes[d];
        l->subsizes[d] = (uint64_t)subsizes[d];
        l->starts[d] = (uint64_t)starts[d];
        if (l->subsizes[d] != 0 && n > UINT64_MAX / l->subsizes[d]) {
            snprintf(msg, len, "the subarray has too many elements");
            return -1;
        }
        n *= l->subsizes[d];
    }
    *count = n;
    return 0;
}

int layout_same_array(const struct region_layout *a, const struct region_layout *b)
{
    if (a->kind != b->kind || a->kind == REGION_PLAIN)
        return 0;
    if (a->kind == REGION_BLOCK)
        return a->global == b->global;
    if (a->kind == REGION_SUBARRAY) {
        if (a->ndims != b->ndims || a->order != b->order)
            return 0;
        for (uint32_t d = 0; d < a->ndims; d++)
            if (a->sizes[d] != b->sizes[d])
                return 0;
    }
    return 1;
}

int layout_same_place(const struct region_layout *a, const struct region_layout *b)
{
    if (a->kind != b->kind)
        return 0;
    if (a->kind == REGION_BLOCK)
        return a->global == b->global && a->offset == b->offset;
    if (a->kind == REGION_SUBARRAY) {
        if (!layout_same_array(a, b))
            return 0;
        for (uint32_t d = 0; d < a->ndims; d++)
            if (a->subsizes[d] != b->subsizes[d] || a->starts[d] != b->starts[d])
                return 0;
    }
    return 1;
}

void layout_describe(char *out, size_t len, const struct region_layout *l, uint64_t count)
{
    if (l->kind == REGION_BLOCK) {
        snprintf(out, len, "elements %llu to %llu of %llu", (unsigned long long)l->offset,
                 (unsigned long long)(l->offset + count), (unsigned long long)l->global);
        return;
    }
    if (l->kind != REGION_SUBARRAY) {
        snprintf(out, len, "%llu elements (%s)", (unsigned long long)count,
                 layout_kind_name(l->kind));
        return;
    }
    size_t used = (size_t)snprintf(out, len, "a %s-order box", l->order ? "Fortran" : "C");
    for (uint32_t d = 0; d < l->ndims && used < len; d++)
        used += (size_t)snprintf(out + used, len - used, "%s%llu+%llu of %llu", d ? ", " : " ",
                                 (unsigned long long)l->starts[d],
                                 (unsigned long long)l->subsizes[d],
                                 (unsigned long long)l->sizes[d]);
}

int layout_intersect(const struct region_layout *a, const struct region_layout *b, uint64_t lo[],
                     uint64_t hi[])
{
    for (uint32_t d = 0; d < a->ndims; d++) {
        uint64_t alo = a->starts[d], ahi = alo + a->subsizes[d];
        uint64_t blo = b->starts[d], bhi = blo + b->subsizes[d];
        lo[d] = alo > blo ? alo : blo;
        hi[d] = ahi < bhi ? ahi : bhi;
        if (lo[d] >= hi[d])
            return 0;
    }
    return 1;
}

uint64_t layout_volume(uint32_t ndims, const uint64_t lo[], const uint64_t hi[])
{
    uint64_t v = 1;
    for (uint32_t d = 0; d < ndims; d++)
        v *= hi[d] - lo[d];
    return v;
}

/* Dimension i of a box's dims counted from the fastest (C: the last). */
static uint32_t fastest(const struct region_layout *box, uint32_t i)
{
    return box->order == LAYOUT_ORDER_C ? box->ndims - 1 - i : i;
}

void layout_runs(const struct region_layout *box, uint64_t elem_size, const uint64_t lo[],
                 const uint64_t hi[], struct layout_runs *r)
{
    uint64_t stride[SHARD_MAX_DIMS];
    uint64_t s = elem_size;
    for (uint32_t i = 0; i < box->ndims; i++) {
        stride[fastest(box, i)] = s;
        s *= box->subsizes[fastest(box, i)];
    }
    r->base = 0;
    for (uint32_t d = 0; d < box->ndims; d++)
        r->base += (lo[d] - box->starts[d]) * stride[d];
    /* A run takes in the next slower dimension while the ones it covers span the whole
     * of this buffer's box: its rows then follow each other in memory. */
    uint32_t i = 0, f = fastest(box, 0);
    r->run_bytes = (hi[f] - lo[f]) * elem_size;
    while (i + 1 < box->ndims && hi[f] - lo[f] == box->subsizes[f]) {
        i++;
        f = fastest(box, i);
        r->run_bytes *= hi[f] - lo[f];
    }
    r->nouter = 0;
    r->nruns = 1;
    for (i++; i < box->ndims; i++) {
        f = fastest(box, i);
        r->ext[r->nouter] = hi[f] - lo[f];
        r->stride[r->nouter] = stride[f];
        r->nouter++;
        r->nruns *= hi[f] - lo[f];
    }
}

uint64_t layout_run_offset(const struct layout_runs *r, uint64_t k)
{
    uint64_t off = r->base;
    for (uint32_t i = 0; i < r->nouter; i++) {
        off += (k % r->ext[i]) * r->stride[i];
        k /= r->ext[i];
    }
    return off;
}

void layout_runs_bytes(uint64_t offset, uint64_t len, struct layout_runs *r)
{
    r->base = offset;
    r->run_bytes = len;
    r->nruns = len > 0;
    r->nouter = 0;
}

static int cmp_part(const void *a, const void *b)
{
    const struct layout_part *x = a, *y = b;
    uint64_t xo = x->layout->offset, yo = y->layout->offset;
    if (xo != yo)
        return xo < yo ? -1 : 1;
    return (x->old_rank > y->old_rank) - (x->old_rank < y->old_rank);
}

int layout_plan(const struct region_layout *need, uint64_t need_count, struct layout_part *parts,
                int nparts, struct layout_piece *pieces, struct layout_problem *why)
{
    memset(why, 0, sizeof *why);
    int n = 0;
    if (need->kind == REGION_BLOCK) {
        /* The old blocks in order: any two that share an element are an error, then
         * the needed range is walked through them. */
        qsort(parts, (size_t)nparts, sizeof *parts, cmp_part);
        const struct layout_part *prev = NULL;
        for (int i = 0; i < nparts; i++) {
            if (parts[i].count == 0)
                continue;
            if (prev != NULL && parts[i].layout->offset < prev->layout->offset + prev->count) {
                why->kind = LAYOUT_OVERLAP;
                why->old_rank[0] = prev->old_rank;
                why->old_rank[1] = parts[i].old_rank;
                why->at = parts[i].layout->offset;
                return -1;
            }
            prev = &parts[i];
        }
        uint64_t pos = need->offset, end = need->offset + need_count;
        for (int i = 0; i < nparts && pos < end; i++) {
            uint64_t lo = parts[i].layout->offset, hi = lo + parts[i].count;
            if (parts[i].count == 0 || hi <= pos)
                continue;
            if (lo > pos)
                break; /* a gap before this block */
            uint64_t to = hi < end ? hi : end;
            pieces[n].old_rank = parts[i].old_rank;
            pieces[n].part = i;
            pieces[n].lo[0] = pos;
            pieces[n].hi[0] = to;
            n++;
            pos = to;
        }
        if (pos < end) {
            why->kind = LAYOUT_GAP;
            why->at = pos;
            return -1;
        }
        return n;
    }
    /* Subarrays: the boxes that meet the needed one; two of them that meet each other
     * are an error, and then their volumes must add up to the needed box's. */
    uint64_t covered = 0;
    for (int i = 0; i < nparts; i++) {
        if (parts[i].count == 0 ||
            !layout_intersect(need, parts[i].layout, pieces[n].lo, pieces[n].hi))
            continue;
        for (int j = 0; j < n; j++) {
            uint64_t lo[SHARD_MAX_DIMS], hi[SHARD_MAX_DIMS];
            if (layout_intersect(parts[pieces[j].part].layout, parts[i].layout, lo, hi)) {
                why->kind = LAYOUT_OVERLAP;
                why->old_rank[0] = pieces[j].old_rank;
                why->old_rank[1] = parts[i].old_rank;
                return -1;
            }
        }
        pieces[n].old_rank = parts[i].old_rank;
        pieces[n].part = i;
        covered += layout_volume(need->ndims, pieces[n].lo, pieces[n].hi);
        n++;
    }
    if (covered != need_count) {
        why->kind = LAYOUT_GAP;
        why->at = need_count - covered; /* elements missing */
        return -1;
    }
    return n;
}
