"""The shard reader against testdata/shards/vectors.json, the vectors the Go and C
readers check too."""

import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "src"))
VECTORS = os.path.join(HERE, "..", "..", "testdata", "shards")

from shoal.shard import ShardError, read_shard, read_shard_file  # noqa: E402


def layout(r):
    """A parsed region's kind, datatype, flags and place in its array."""
    out = [r.kind, r.datatype, r.flags]
    if r.kind == "block":
        out += [r.global_count, r.offset]
    if r.kind == "subarray":
        out += [r.order, list(r.sizes), list(r.subsizes), list(r.starts)]
    return out


def layout_of_vector(r):
    out = [r["kind"], r["datatype"], r.get("flags", 0)]
    if r["kind"] == "block":
        out += [r["global"], r["offset"]]
    if r["kind"] == "subarray":
        out += [r["order"], r["sizes"], r["subsizes"], r["starts"]]
    return out


def load_vectors():
    with open(os.path.join(VECTORS, "vectors.json")) as f:
        return json.load(f)


class VectorTest(unittest.TestCase):
    def test_vectors(self):
        vectors = load_vectors()
        self.assertGreater(len([v for v in vectors if v["ok"]]), 0)
        self.assertGreater(len([v for v in vectors if not v["ok"]]), 0)
        for v in vectors:
            with self.subTest(file=v["file"]):
                path = os.path.join(VECTORS, v["file"])
                if not v["ok"]:
                    with self.assertRaises(ShardError) as cm:
                        read_shard_file(path)
                    self.assertEqual(cm.exception.kind, v["error"])
                    continue
                s = read_shard_file(path)
                self.assertEqual((s.version, s.job, s.epoch, s.rank, s.nranks, s.created_ns),
                                 (v["version"], v["job"], v["epoch"], v["rank"], v["nranks"], v["created_ns"]))
                self.assertEqual((s.isa, s.long_double), (v.get("isa", 0), v.get("long_double", 0)))
                self.assertEqual(s.checksum, int(v["checksum"], 16))
                got = [(r.id, r.elem_size, r.count, r.data.hex()) for r in s.regions]
                want = [(r["id"], r["elem_size"], r["count"], r["payload_hex"]) for r in v["regions"]]
                self.assertEqual(got, want)
                self.assertEqual([layout(r) for r in s.regions], [layout_of_vector(r) for r in v["regions"]])
                self.assertEqual(s.per_rank(), [r["id"] for r in v["regions"] if r["kind"] == "plain"])

    def test_wrong_shard(self):
        v = next(v for v in load_vectors() if v["ok"])
        with open(os.path.join(VECTORS, v["file"]), "rb") as f:
            data = f.read()
        read_shard(data, job=v["job"], epoch=v["epoch"], rank=v["rank"], nranks=v["nranks"])
        for wrong in ({"job": v["job"] + "x"}, {"epoch": v["epoch"] + 1},
                      {"rank": v["rank"] + 1}, {"nranks": v["nranks"] + 1}):
            with self.subTest(**wrong):
                with self.assertRaises(ShardError) as cm:
                    read_shard(data, **wrong)
                self.assertEqual(cm.exception.kind, "wrong shard")

    def test_every_flipped_byte_is_caught(self):
        v = next(v for v in load_vectors() if v["ok"] and v["regions"])
        with open(os.path.join(VECTORS, v["file"]), "rb") as f:
            data = bytearray(f.read())
        for i in range(len(data)):
            with self.subTest(byte=i):
                data[i] ^= 0x01
                with self.assertRaises(ShardError):
                    read_shard(data)
                data[i] ^= 0x01
        read_shard(data)


if __name__ == "__main__":
    unittest.main()


class OnlyShardErrorTest(unittest.TestCase):
    """Whatever the bytes, the reader raises ShardError and nothing else: every header
    and job byte of a valid shard is changed, the checksum made right again so that
    the checks behind it are reached."""

    def test_mutated_headers(self):
        import random
        import struct

        import xxhash

        with open(os.path.join(VECTORS, "valid-2regions.shard"), "rb") as f:
            good = f.read()
        rng = random.Random(10)
        for i in range(3000):
            b = bytearray(good)
            for _ in range(rng.randint(1, 4)):
                b[rng.randrange(8, 160)] = rng.randrange(256)
            struct.pack_into("<Q", b, len(b) - 8, xxhash.xxh3_64_intdigest(bytes(b[:-8])))
            with self.subTest(i=i):
                try:
                    read_shard(bytes(b))
                except ShardError:
                    pass
