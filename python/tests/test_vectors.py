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
                self.assertEqual((s.job, s.epoch, s.rank, s.nranks, s.created_ns),
                                 (v["job"], v["epoch"], v["rank"], v["nranks"], v["created_ns"]))
                self.assertEqual(s.checksum, int(v["checksum"], 16))
                got = [(r.id, r.elem_size, r.count, r.data.hex()) for r in s.regions]
                want = [(r["id"], r["elem_size"], r["count"], r["payload_hex"]) for r in v["regions"]]
                self.assertEqual(got, want)

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
