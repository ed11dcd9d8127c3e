/*
 * shard.h - shard.c's and portable.c's part of the library's internal interface,
 * included by internal.h: the on-disk shard format (docs/shard-format.md) and whether a
 * region written on one machine restores on another. No I/O.
 */
#ifndef SHOAL_SHARD_H
#define SHOAL_SHARD_H

/* ---- shard.c: the on-disk shard format v3, and v1 and v2 read (docs/shard-format.md), no I/O ---- */

#define SHARD_MAGIC         "SHOALSHD"
#define SHARD_VERSION       3 /* the version written: version 2 with the writer's ABI */
#define SHARD_VERSION_MIN   1 /* the oldest read: its regions are all plain, of bytes */
#define SHARD_HEADER_SIZE   128
#define SHARD_ENTRY_SIZE    32
/* room kept beyond a shard image in the staging buffer to shift it within a page
 * (checkpoint.c, stage_shift); a power of two */
#define STAGE_SLACK         4096
#define SHARD_CHECKSUM_SIZE 8
#define SHARD_MIN_SIZE      (SHARD_HEADER_SIZE + SHARD_CHECKSUM_SIZE)
#define SHARD_JOB_FIELD     64
#define SHARD_JOB_MAX       63
/* Paths hold the epoch in 8 digits and the rank in 6. */
#define SHARD_EPOCH_MAX 99999999LL
#define SHARD_RANK_MAX  999999
/* The descriptors of distributed regions (version 2). */
#define SHARD_MAX_DIMS           32
#define SHARD_BLOCK_DESC_SIZE    16
#define SHARD_SUBARRAY_DESC_SIZE(ndims) (8 + 24 * (uint64_t)(ndims))

/* What a region is, as its table entry says (docs/shard-format.md, "Region kinds"). */
enum region_kind {
    REGION_PLAIN = 0,      /* one rank's own memory: restored onto the same rank only */
    REGION_BLOCK = 1,      /* count elements at offset of a 1-D array of global */
    REGION_SUBARRAY = 2,   /* an N-d box of a global array, MPI_Type_create_subarray's */
    REGION_REPLICATED = 3, /* the same bytes on every rank */
    REGION_NKINDS
};
enum { LAYOUT_ORDER_C = 0, LAYOUT_ORDER_FORTRAN = 1 };

/* Where a region sits in the global array: its kind, its datatype's code
 * (layout_datatype_code) and, for distributed kinds, its descriptor. */
struct region_layout {
    uint16_t kind;
    uint16_t dtype;
    uint64_t global, offset; /* REGION_BLOCK, in elements */
    uint32_t ndims, order;   /* REGION_SUBARRAY: the box starts[d] + [0, subsizes[d]) */
    uint64_t sizes[SHARD_MAX_DIMS], subsizes[SHARD_MAX_DIMS], starts[SHARD_MAX_DIMS];
    uint8_t flags; /* SHARD_FLAG_*: the region's (version 3) */
};

/* What a reader concludes about a shard. The names of the format's checks are the
 * ones of docs/shard-format.md ("checksum mismatch"...), shared with the Go and Python
 * readers through the test vectors. */
enum shard_verdict {
    SHARD_OK = 0,
    SHARD_TRUNCATED,
    SHARD_BAD_MAGIC,
    SHARD_UNSUPPORTED_VERSION,
    SHARD_CHECKSUM_MISMATCH,
    SHARD_BAD_HEADER,
    SHARD_BAD_REGION_TABLE,
    SHARD_WRONG_SHARD,
    SHARD_MISSING,    /* no file */
    SHARD_READ_ERROR, /* the file exists but could not be read */
    SHARD_NOMEM,
    SHARD_NVERDICTS
};

/* The machine a shard was written on (version 3; docs/shard-format.md, "Portability"):
 * what a reader needs to decide whether a region's bytes mean the same on its own. */
enum shard_isa { SHARD_ISA_UNKNOWN = 0, SHARD_ISA_AMD64 = 1, SHARD_ISA_ARM64 = 2 };
enum shard_long_double {
    SHARD_LD_UNKNOWN = 0,
    SHARD_LD_X87 = 1,       /* x87 80-bit extended, in 16 bytes */
    SHARD_LD_BINARY128 = 2, /* IEEE 754 binary128 */
    SHARD_LD_BINARY64 = 3,  /* the same as double */
    SHARD_LD_DOUBLE_DOUBLE = 4
};
struct shard_abi {
    uint8_t isa;         /* enum shard_isa */
    uint8_t long_double; /* enum shard_long_double */
};
/* A version 3 region's flags (the high byte of version 2's kind field). */
enum {
    SHARD_FLAG_LONG_DOUBLE = 1, /* a derived datatype holding long double */
    SHARD_FLAG_ABI_BOUND = 2,   /* a derived datatype with holes (a struct's padding) */
    SHARD_FLAGS_KNOWN = 3
};

struct shard_header {
    uint32_t version; /* written as given: SHARD_VERSION, or 1 */
    struct shard_abi abi; /* version 3; {0, 0} (unknown) before */
    uint64_t epoch;
    uint32_t rank;
    uint32_t nranks;
    uint32_t nregions;
    uint64_t desc_bytes; /* the descriptor area after the table (0 in version 1) */
    uint64_t payload_bytes;
    char job[SHARD_JOB_FIELD];
    uint64_t created_ns;
};

struct shard_entry {
    int32_t id;
    uint32_t elem_size;
    uint64_t count;
    uint64_t bytes;
    uint16_t kind;       /* enum region_kind; 0 in version 1 */
    uint16_t dtype;      /* the datatype's code; 0 (bytes) in version 1 */
    uint8_t flags;       /* SHARD_FLAG_*; 0 before version 3 */
    uint32_t desc_bytes; /* its descriptor's size in the descriptor area */
};

const char *shard_verdict_name(int verdict);
int shard_verdict_code(int verdict);
/* Total file size for a table of nregions and payload_bytes of data, without
 * descriptors (shard_image_size with none); 0 on overflow. */
uint64_t shard_file_size(uint64_t nregions, uint64_t payload_bytes);
/* Total file size with desc_bytes of descriptors; 0 on overflow. */
uint64_t shard_image_size(uint64_t nregions, uint64_t desc_bytes, uint64_t payload_bytes);
/* Where the descriptor area and the payload of a shard of h start. */
uint64_t shard_desc_offset(const struct shard_header *h);
uint64_t shard_payload_offset(const struct shard_header *h);
void shard_put_header(unsigned char *file, const struct shard_header *h);
void shard_put_entry(unsigned char *file, uint32_t index, const struct shard_entry *e);
/* The descriptor of a layout: its size (0 for plain and replicated regions), and its
 * bytes written at p. */
uint32_t shard_desc_size(const struct region_layout *l);
void shard_put_desc(unsigned char *p, const struct region_layout *l);
/* Reads the len-byte descriptor at p of a region of kind, dtype and count into l, and
 * checks it against them (docs/shard-format.md, "bad region table"): 0, or -1. */
int shard_get_desc(const unsigned char *p, uint64_t len, uint16_t kind, uint16_t dtype,
                   uint64_t count, struct region_layout *l);
/* Writes the trailing checksum of a file of size bytes whose other bytes are final. */
void shard_seal(unsigned char *file, size_t size);
/* shard_seal a piece at a time, as the file is written out: the pieces fed must cover
 * the file in order; the one reaching the trailer gets the checksum written into it
 * before shard_sealer_feed returns. Hashing each piece just before it is written reads
 * the file from memory once instead of twice. The sealer also takes the sums of the
 * file's blocks (SHARD_BLOCK_SIZE bytes, the trailer's included) for its block sums
 * file: each block is hashed again while it is still in the cache. */
struct shard_sealer {
    void *state; /* XXH3_state_t of the whole file */
    void *block; /* XXH3_state_t of a block fed in more than one piece */
    unsigned char *file;
    size_t size;
    uint64_t *sums; /* shard_blocks(size, SHARD_BLOCK_SIZE) of them */
};
int shard_sealer_init(struct shard_sealer *s, unsigned char *file, size_t size); /* 0, ENOMEM */
void shard_sealer_feed(struct shard_sealer *s, size_t off, size_t n);
void shard_sealer_free(struct shard_sealer *s);

/* The block sums file (docs/shard-format.md): the XXH3-64 of each block of a shard
 * file as its writer made it, so that the node's agent need not read the shard back to
 * learn them. */
#define SHARD_SUMS_MAGIC      "SHOALSUM"
#define SHARD_SUMS_VERSION    1
#define SHARD_BLOCK_SIZE      (256u << 10)
#define SHARD_SUMS_FIXED_SIZE 48
/* The file version the sums describe: what its writer read with fstat. */
struct shard_sums_key {
    uint64_t ino;
    int64_t mtime_ns;
};
/* The number of blocks of block bytes in size bytes, the last one possibly shorter. */
size_t shard_blocks(size_t size, size_t block);
/* Size of the sums file of a shard of size bytes in blocks of block bytes. */
size_t shard_sums_file_size(size_t size, size_t block);
/* Writes the sums file (shard_sums_file_size(size, block) bytes) of the sealed shard
 * file of size bytes whose blocks' sums are sums. */
void shard_put_sums(unsigned char *out, const unsigned char *file, size_t size, size_t block,
                    const uint64_t *sums, const struct shard_sums_key *key);
/* Runs every check of the format, in the documented order; fills h when SHARD_OK. */
int shard_verify(const unsigned char *file, size_t size, struct shard_header *h);
/* Entry index of a verified shard (or of its first shard_payload_offset bytes). */
void shard_get_entry(const unsigned char *file, uint32_t index, struct shard_entry *e);
/* The layout of entry index of a verified shard of h (its descriptor read). */
void shard_get_layout(const unsigned char *file, const struct shard_header *h, uint32_t index,
                      struct region_layout *l);
/* The header of a verified shard's first SHARD_HEADER_SIZE bytes. */
void shard_get_header(const unsigned char *file, struct shard_header *h);
int shard_check_identity(const struct shard_header *h, const char *job, uint64_t epoch,
                         uint32_t rank, uint32_t nranks);
uint64_t shard_get_u64(const unsigned char *p);

/* ---- portable.c: whether a region written on one machine restores on this one ---- */

/* This machine's ABI, as a version 3 shard records it. */
struct shard_abi portable_this_abi(void);
/* The region flags (SHARD_FLAG_*) of a datatype: for a derived one whether it holds long
 * double (its type map walked through MPI_Type_get_contents); 0 for a basic one. */
uint8_t portable_type_flags(MPI_Datatype type);
/* Whether region id (datatype code dtype, flags) of a shard written on a machine of ABI
 * writer restores bit for bit on one of ABI reader: 1, or 0 with the line that says why
 * in msg. A shard of version 1 or 2 (version < 3) recorded no ABI: its regions restore
 * as they are. */
int portable_region(uint32_t version, struct shard_abi writer, struct shard_abi reader,
                    int32_t id, uint16_t dtype, uint8_t flags, char *msg, size_t len);
/* The regions of a restore that are not portable, gathered into one line: the first
 * one's reason, then the others' ids. */
struct portable_refusals {
    int n;
    char first[256];
    char others[192];
};
void portable_note(struct portable_refusals *r, int32_t id, const char *why);
/* SHOAL_SUCCESS when none was noted, else SHOAL_ERR_PORTABLE and the line in msg. */
int portable_verdict(const struct portable_refusals *r, char *msg, size_t len);
/* The name of a datatype code ("MPI_LONG_DOUBLE"; "bytes" for 0). */
const char *portable_datatype_name(uint16_t dtype);
/* The names of an instruction set ("amd64") and of a long double format ("x87 80-bit"). */
const char *portable_isa_name(uint8_t isa);
const char *portable_long_double_name(uint8_t ld);

#endif
