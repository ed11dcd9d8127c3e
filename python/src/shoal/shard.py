"""Reader of Shoal checkpoint shards, format version 1 (docs/shard-format.md).

    >>> shard = read_shard_file("shoal-ckpt/heat/e00000003/r000002.shard")
    >>> shard.job, shard.epoch, shard.rank, [r.id for r in shard.regions]

A shard that fails verification raises ShardError, whose ``kind`` is the short name
the spec gives the first failed check ("truncated", "bad magic", ...).
"""

import struct
import sys
from dataclasses import dataclass, field

import xxhash

MAGIC = b"SHOALSHD"
VERSION = 1
HEADER_SIZE = 128
ENTRY_SIZE = 32
CHECKSUM_SIZE = 8

# magic, version, header_size, epoch, rank, nranks, nregions, reserved, payload_bytes,
# job, created_ns, reserved
_HEADER = struct.Struct("<8sIIQIIIIQ64sQQ")
# id, elem_size, count, bytes, reserved
_ENTRY = struct.Struct("<iIQQQ")


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


@dataclass
class Shard:
    job: str
    epoch: int
    rank: int
    nranks: int
    created_ns: int
    checksum: int
    regions: list = field(default_factory=list)


def read_shard(data, job=None, epoch=None, rank=None, nranks=None):
    """Verifies and decodes the bytes of one shard.

    The identity arguments that are given are checked too: a shard of another job,
    epoch, rank or rank count raises ShardError("wrong shard").
    """
    data = bytes(data)
    if len(data) < HEADER_SIZE + CHECKSUM_SIZE:
        raise ShardError("truncated", f"{len(data)} bytes, less than a header and a checksum")
    (magic, version, header_size, s_epoch, s_rank, s_nranks, nregions, reserved1,
     payload_bytes, job_field, created_ns, reserved2) = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise ShardError("bad magic", f"starts with {magic!r}, not {MAGIC!r}")
    if version != VERSION or header_size != HEADER_SIZE:
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
    if reserved1 or reserved2:
        raise ShardError("bad header", "reserved header field not 0")
    want = HEADER_SIZE + ENTRY_SIZE * nregions + payload_bytes + CHECKSUM_SIZE
    if len(data) != want:
        raise ShardError("bad header", f"{len(data)} bytes, the header implies {want}")

    regions = []
    offset = HEADER_SIZE + ENTRY_SIZE * nregions
    total = 0
    for i in range(nregions):
        rid, elem_size, count, nbytes, reserved = _ENTRY.unpack_from(data, HEADER_SIZE + ENTRY_SIZE * i)
        if elem_size == 0 or nbytes != elem_size * count or reserved:
            raise ShardError("bad region table", f"entry {i}: elem_size {elem_size}, count {count}, bytes {nbytes}")
        if regions and rid <= regions[-1].id:
            raise ShardError("bad region table", f"entry {i}: id {rid} after {regions[-1].id}")
        total += nbytes
        if total > payload_bytes:
            raise ShardError("bad region table", f"regions hold more than payload_bytes {payload_bytes}")
        regions.append(Region(rid, elem_size, count, data[offset:offset + nbytes]))
        offset += nbytes
    if total != payload_bytes:
        raise ShardError("bad region table", f"regions hold {total} bytes, payload_bytes is {payload_bytes}")

    for name, want_v, got in (("job", job, s_job), ("epoch", epoch, s_epoch),
                              ("rank", rank, s_rank), ("nranks", nranks, s_nranks)):
        if want_v is not None and want_v != got:
            raise ShardError("wrong shard", f"{name} {got!r}, expected {want_v!r}")
    return Shard(s_job, s_epoch, s_rank, s_nranks, created_ns, stored, regions)


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
