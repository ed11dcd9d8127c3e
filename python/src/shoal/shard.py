"""Reader of Shoal checkpoint shards, format versions 1, 2 and 3 (docs/shard-format.md).

    >>> shard = read_shard_file("shoal-ckpt/heat/e00000003/r000002.shard")
    >>> shard.job, shard.epoch, shard.rank, [r.id for r in shard.regions]

Each region has its kind ("plain", "block", "subarray", "replicated"), its datatype
code and flags and, for a distributed region, where it lies in its global array; a
version 3 shard says which machine wrote it (``isa``, ``long_double``). A shard that
fails verification raises ShardError, whose ``kind`` is the short name the spec gives
the first failed check ("truncated", "bad magic", ...).
"""

import struct
import sys
from dataclasses import dataclass, field

import xxhash

MAGIC = b"SHOALSHD"
VERSION = 3  # the version libshoal writes
MIN_VERSION = 1  # the oldest read: every region plain, of bytes
HEADER_SIZE = 128
ENTRY_SIZE = 32
CHECKSUM_SIZE = 8
MAX_DIMS = 32
KINDS = ("plain", "block", "subarray", "replicated")
ORDERS = ("C", "Fortran")

# magic, version, header_size, epoch, rank, nranks, nregions, reserved (version 3: isa,
# long_double, 2 reserved bytes), payload_bytes, job, created_ns, desc_bytes (version 1:
# reserved)
_HEADER = struct.Struct("<8sIIQIIIIQ64sQQ")
# The writer's instruction set and long double format (version 3), by code.
ISAS = {0: "unknown", 1: "amd64", 2: "arm64"}
LONG_DOUBLES = {0: "unknown", 1: "x87 80-bit", 2: "IEEE binary128", 3: "IEEE binary64", 4: "double-double"}
FLAG_LONG_DOUBLE = 1  # a derived datatype holding long double
FLAG_ABI_BOUND = 2  # a derived datatype with holes (a struct's padding)
_FLAGS_KNOWN = FLAG_LONG_DOUBLE | FLAG_ABI_BOUND
# id, elem_size, count, bytes, kind, datatype, desc_bytes (version 1: 8 reserved bytes)
_ENTRY = struct.Struct("<iIQQHHI")


class ShardError(Exception):
    """A shard failed verification; kind names the check (docs/shard-format.md)."""

    def __init__(self, kind, detail):
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


@dataclass
class Region:
    id: int
    elem_size: int
    count: int
    data: bytes
    kind: str = "plain"
    datatype: int = 0  # the MPI basic datatype's code; 0: bytes
    flags: int = 0  # FLAG_LONG_DOUBLE, FLAG_ABI_BOUND (version 3)
    global_count: int = 0  # a block's
    offset: int = 0  # a block's first element
    order: str = ""  # a subarray's, "C" or "Fortran"
    sizes: tuple = ()  # a subarray's global sizes, its box's subsizes and starts
    subsizes: tuple = ()
    starts: tuple = ()


@dataclass
class Shard:
    job: str
    epoch: int
    rank: int
    nranks: int
    created_ns: int
    checksum: int
    regions: list = field(default_factory=list)
    version: int = VERSION
    isa: int = 0  # the writer's instruction set (ISAS), version 3; 0: not recorded
    long_double: int = 0  # and its long double format (LONG_DOUBLES)

    def per_rank(self):
        """The ids of the plain regions: those a restart on another count cannot restore."""
        return [r.id for r in self.regions if r.kind == "plain"]


def _descriptor(region, kind, desc):
    """Reads a region's descriptor into it, checked against its kind and count; the
    reason it is wrong, or None."""
    if kind >= len(KINDS):
        return f"unknown kind {kind}"
    region.kind = KINDS[kind]
    if region.kind in ("plain", "replicated"):
        return None if not desc else f"a {region.kind} region with a {len(desc)}-byte descriptor"
    if region.kind == "block":
        if len(desc) != 16:
            return f"a block descriptor of {len(desc)} bytes"
        region.global_count, region.offset = struct.unpack("<QQ", desc)
        if region.offset > region.global_count or region.count > region.global_count - region.offset:
            return f"elements {region.offset} + {region.count} beyond the {region.global_count} of its array"
        return None
    if len(desc) < 8:
        return f"a subarray descriptor of {len(desc)} bytes"
    ndims, order = struct.unpack_from("<II", desc)
    if not 1 <= ndims <= MAX_DIMS or len(desc) != 8 + 24 * ndims or order > 1:
        return f"a subarray of {ndims} dimensions, order {order}, in {len(desc)} bytes"
    values = struct.unpack_from(f"<{3 * ndims}Q", desc, 8)
    sizes, subsizes, starts = values[:ndims], values[ndims:2 * ndims], values[2 * ndims:]
    local = 1
    for size, sub, start in zip(sizes, subsizes, starts):
        if size == 0 or start > size or sub > size - start:
            return f"{start} + {sub} beyond its size {size}"
        local *= sub
    total = 1
    for size in sizes:
        total *= size
    if total >= 1 << 64:
        return "an array of more than 2**64 elements"
    if local != region.count:
        return f"a box of {local} elements, count {region.count}"
    region.order, region.sizes, region.subsizes, region.starts = ORDERS[order], sizes, subsizes, starts
    return None


def read_shard(data, job=None, epoch=None, rank=None, nranks=None):
    """Verifies and decodes the bytes of one shard.

    The identity arguments that are given are checked too: a shard of another job,
    epoch, rank or rank count raises ShardError("wrong shard").
    """
    data = bytes(data)
    if len(data) < HEADER_SIZE + CHECKSUM_SIZE:
        raise ShardError("truncated", f"{len(data)} bytes, less than a header and a checksum")
    (magic, version, header_size, s_epoch, s_rank, s_nranks, nregions, reserved1,
     payload_bytes, job_field, created_ns, desc_bytes) = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ShardError("bad magic", f"starts with {magic!r}, not {MAGIC!r}")
    if not MIN_VERSION <= version <= VERSION or header_size != HEADER_SIZE:
        raise ShardError("unsupported version", f"version {version}, header size {header_size}")
    (stored,) = struct.unpack_from("<Q", data, len(data) - CHECKSUM_SIZE)
    computed = xxhash.xxh3_64_intdigest(data[:-CHECKSUM_SIZE])
    if stored != computed:
        raise ShardError("checksum mismatch", f"stored {stored:#018x}, computed {computed:#018x}")

    nul = job_field.find(b"\0")
    if s_nranks == 0 or s_rank >= s_nranks or s_epoch == 0:
        raise ShardError("bad header", f"epoch {s_epoch}, rank {s_rank} of {s_nranks}")
    if nul <= 0:
        raise ShardError("bad header", "job id empty or not NUL-terminated")
    if job_field[nul:].strip(b"\0"):
        raise ShardError("bad header", "job id padding holds bytes other than NUL")
    try:
        s_job = job_field[:nul].decode("utf-8")
    except UnicodeDecodeError:
        raise ShardError("bad header", f"job id {job_field[:nul]!r} is not UTF-8") from None
    isa = long_double = 0
    if version >= 3:
        isa, long_double, reserved1 = reserved1 & 0xFF, reserved1 >> 8 & 0xFF, reserved1 >> 16
    if reserved1 or (version == 1 and desc_bytes):
        raise ShardError("bad header", "reserved header field not 0")
    want = HEADER_SIZE + ENTRY_SIZE * nregions + desc_bytes + payload_bytes + CHECKSUM_SIZE
    if len(data) != want:
        raise ShardError("bad header", f"{len(data)} bytes, the header implies {want}")

    regions = []
    desc_at = HEADER_SIZE + ENTRY_SIZE * nregions
    offset = desc_at + desc_bytes
    total = used = 0
    for i in range(nregions):
        rid, elem_size, count, nbytes, kind, datatype, dlen = _ENTRY.unpack_from(data, HEADER_SIZE + ENTRY_SIZE * i)
        if elem_size == 0 or nbytes != elem_size * count:
            raise ShardError("bad region table", f"entry {i}: elem_size {elem_size}, count {count}, bytes {nbytes}")
        if version == 1 and (kind or datatype or dlen):
            raise ShardError("bad region table", f"entry {i}: reserved field not 0")
        flags = 0
        if version >= 3:
            kind, flags = kind & 0xFF, kind >> 8
        if flags & ~_FLAGS_KNOWN:
            raise ShardError("bad region table", f"entry {i}: unknown flags {flags:#x}")
        if regions and rid <= regions[-1].id:
            raise ShardError("bad region table", f"entry {i}: id {rid} after {regions[-1].id}")
        total += nbytes
        if total > payload_bytes:
            raise ShardError("bad region table", f"regions hold more than payload_bytes {payload_bytes}")
        if dlen > desc_bytes - used:
            raise ShardError("bad region table", f"entry {i}: its descriptor runs past the {desc_bytes} bytes of descriptors")
        region = Region(rid, elem_size, count, data[offset:offset + nbytes], datatype=datatype, flags=flags)
        why = _descriptor(region, kind, data[desc_at + used:desc_at + used + dlen])
        if why:
            raise ShardError("bad region table", f"entry {i} (region {rid}): {why}")
        regions.append(region)
        offset += nbytes
        used += dlen
    if total != payload_bytes:
        raise ShardError("bad region table", f"regions hold {total} bytes, payload_bytes is {payload_bytes}")
    if used != desc_bytes:
        raise ShardError("bad region table", f"descriptors hold {used} bytes, the header says {desc_bytes}")

    for name, want_v, got in (("job", job, s_job), ("epoch", epoch, s_epoch),
                              ("rank", rank, s_rank), ("nranks", nranks, s_nranks)):
        if want_v is not None and want_v != got:
            raise ShardError("wrong shard", f"{name} {got!r}, expected {want_v!r}")
    return Shard(s_job, s_epoch, s_rank, s_nranks, created_ns, stored, regions, version, isa, long_double)


def read_shard_file(path, **expect):
    """Reads, verifies and decodes the shard at path (see read_shard)."""
    with open(path, "rb") as f:
        return read_shard(f.read(), **expect)


def main(argv):
    """python -m shoal FILE...: verifies shards and describes each in one line."""
    if not argv:
        print("usage: python -m shoal FILE...", file=sys.stderr)
        return 2
    status = 0
    for path in argv:
        try:
            s = read_shard_file(path)
        except (OSError, ShardError) as e:
            print(f"{path}: {e}", file=sys.stderr)
            status = 1
            continue
        regions = ", ".join(f"{r.id}:{r.count}x{r.elem_size}" for r in s.regions)
        print(f"{path}: job {s.job} epoch {s.epoch} rank {s.rank}/{s.nranks} "
              f"regions [{regions}] checksum {s.checksum:#018x}")
    return status
