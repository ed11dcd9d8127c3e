"""Python side of Shoal: reading the checkpoint shards libshoal writes.

The shard format is specified in docs/shard-format.md; shoal.shard implements its
reader, checked against the same test vectors as the Go and C code.
"""

from .shard import Region, Shard, ShardError, read_shard, read_shard_file

__all__ = ["Region", "Shard", "ShardError", "read_shard", "read_shard_file"]
