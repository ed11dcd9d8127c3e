/*
 * fuzz_shard.c - libFuzzer harness for the shard verifier (make fuzz), built with
 * AddressSanitizer and UndefinedBehaviorSanitizer. Each input is verified as it is,
 * then again with its checksum made right, so that the header, job id and region
 * table checks behind the checksum are reached too. A shard the verifier accepts
 * must have the properties the format promises: a job id that ends in the field, a
 * rank below the rank count, and a size the header and table account for.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "internal.h"

static void check_accepted(const unsigned char *file, size_t size)
{
    struct shard_header h;
    if (shard_verify(file, size, &h) != SHARD_OK)
        return;
    if (memchr(h.job, 0, sizeof h.job) == NULL || h.job[0] == 0 || h.rank >= h.nranks ||
        h.epoch == 0 || shard_image_size(h.nregions, h.desc_bytes, h.payload_bytes) != size)
        abort();
    uint64_t total = 0, desc = 0;
    for (uint32_t i = 0; i < h.nregions; i++) {
        struct shard_entry e;
        struct region_layout l;
        shard_get_entry(file, i, &e);
        if (e.elem_size == 0 || e.bytes != (uint64_t)e.elem_size * e.count ||
            e.kind >= REGION_NKINDS || (h.version == 1 && (e.kind != 0 || e.desc_bytes != 0)))
            abort();
        /* A distributed region's descriptor holds its count. */
        shard_get_layout(file, &h, i, &l);
        if (e.kind == REGION_BLOCK && (l.offset > l.global || e.count > l.global - l.offset))
            abort();
        uint64_t volume = 1;
        for (uint32_t d = 0; e.kind == REGION_SUBARRAY && d < l.ndims; d++) {
            if (l.starts[d] + l.subsizes[d] > l.sizes[d])
                abort();
            volume *= l.subsizes[d];
        }
        if (e.kind == REGION_SUBARRAY && volume != e.count)
            abort();
        total += e.bytes;
        desc += e.desc_bytes;
    }
    if (total != h.payload_bytes || desc != h.desc_bytes)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly size bytes, so that ASan sees any read past the end. */
    unsigned char *file = malloc(size ? size : 1);
    if (file == NULL)
        return 0;
    memcpy(file, data, size);
    check_accepted(file, size);
    if (size >= SHARD_MIN_SIZE) {
        shard_seal(file, size);
        check_accepted(file, size);
    }
    free(file);
    return 0;
}
