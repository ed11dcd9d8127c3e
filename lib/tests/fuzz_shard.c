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
        h.epoch == 0 || shard_file_size(h.nregions, h.payload_bytes) != size)
        abort();
    uint64_t total = 0;
    for (uint32_t i = 0; i < h.nregions; i++) {
        struct shard_entry e;
        shard_get_entry(file, i, &e);
        if (e.elem_size == 0 || e.bytes != (uint64_t)e.elem_size * e.count)
            abort();
        total += e.bytes;
    }
    if (total != h.payload_bytes)
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
