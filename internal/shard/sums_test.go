package shard

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func sampleSums() Sums {
	return Sums{BlockSize: 64, ShardSize: 200, Checksum: 0x1122334455667788, Ino: 42,
		MtimeNs: 1795427000123456789, Blocks: []uint64{1, 2, 3, 0xffffffffffffffff}}
}

func TestSumsRoundTrip(t *testing.T) {
	s := sampleSums()
	b := s.Encode()
	if int64(len(b)) != SumsFileSize(s.ShardSize, s.BlockSize) {
		t.Fatalf("encoded %d bytes, SumsFileSize says %d", len(b), SumsFileSize(s.ShardSize, s.BlockSize))
	}
	got, err := ParseSums(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Fatalf("parsed %+v, want %+v", got, s)
	}
}

// Every byte flipped is caught, and each malformed file names what is wrong.
func TestSumsRejects(t *testing.T) {
	good := sampleSums().Encode()
	for i := range good {
		b := append([]byte(nil), good...)
		b[i] ^= 0x10
		if _, err := ParseSums(b); err == nil {
			t.Fatalf("byte %d flipped: parsed", i)
		}
	}
	// reseal rewrites the trailing checksum after a change to the fields.
	reseal := func(b []byte) []byte {
		body := len(b) - TrailerSize
		binary.LittleEndian.PutUint64(b[body:], Checksum(b[:body]))
		return b
	}
	wrongCount := sampleSums()
	wrongCount.Blocks = wrongCount.Blocks[:3]
	zeroBlock := sampleSums()
	zeroBlock.BlockSize = 0
	small := sampleSums()
	small.ShardSize = HeaderSize
	version := reseal(append([]byte(nil), good...))
	binary.LittleEndian.PutUint32(version[8:], 2)
	reseal(version)
	magic := append([]byte(nil), good...)
	copy(magic, "SHOALSHD")
	for _, c := range []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrTruncated},
		{"header only", good[:SumsFixedSize], ErrTruncated},
		{"magic", reseal(magic), ErrBadMagic},
		{"version", version, ErrVersion},
		{"cut", good[:len(good)-8], ErrChecksum},
		{"a sum short", wrongCount.Encode(), ErrBadHeader},
		{"block size 0", zeroBlock.Encode(), ErrBadHeader},
		{"shard smaller than a shard", small.Encode(), ErrBadHeader},
	} {
		if _, err := ParseSums(c.b); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// testdata/shards/sums.json: the block sums files libshoal writes for the vectors'
// shards, in the C test too (lib/tests/test_shard.c).
func TestSumsVectors(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "shards")
	text, err := os.ReadFile(filepath.Join(dir, "sums.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vectors []struct {
		Shard     string `json:"shard"`
		BlockSize uint32 `json:"block_size"`
		Ino       uint64 `json:"ino"`
		MtimeNs   int64  `json:"mtime_ns"`
		SumsHex   string `json:"sums_hex"`
	}
	if err := json.Unmarshal(text, &vectors); err != nil {
		t.Fatal(err)
	}
	if len(vectors) == 0 {
		t.Fatal("no vectors")
	}
	for _, v := range vectors {
		b, err := os.ReadFile(filepath.Join(dir, v.Shard))
		if err != nil {
			t.Fatal(err)
		}
		s := Sums{BlockSize: v.BlockSize, ShardSize: int64(len(b)), Checksum: binary.LittleEndian.Uint64(b[len(b)-TrailerSize:]),
			Ino: v.Ino, MtimeNs: v.MtimeNs}
		for off := 0; off < len(b); off += int(v.BlockSize) {
			s.Blocks = append(s.Blocks, Checksum(b[off:min(off+int(v.BlockSize), len(b))]))
		}
		if got := hex.EncodeToString(s.Encode()); got != v.SumsHex {
			t.Errorf("%s in blocks of %d: sums file\n%s\nwant\n%s", v.Shard, v.BlockSize, got, v.SumsHex)
		}
		want, _ := hex.DecodeString(v.SumsHex)
		if p, err := ParseSums(want); err != nil || !reflect.DeepEqual(p, s) {
			t.Errorf("%s: parsed %+v, %v; want %+v", v.Shard, p, err, s)
		}
	}
}
