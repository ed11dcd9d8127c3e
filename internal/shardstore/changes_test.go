package shardstore

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// TestBlockSums: the sums are each block's XXH3-64, the last block's however
// short, whatever pieces the bytes arrive in.
func TestBlockSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int{0, 1, BlockSize - 1, BlockSize, BlockSize + 1, 3*BlockSize + 777} {
		data := make([]byte, size)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		var want []uint64
		for off := 0; off < size; off += BlockSize {
			want = append(want, xxh3.Hash(data[off:min(off+BlockSize, size)]))
		}
		for _, piece := range []int{1, 7, 4096, BlockSize - 1, BlockSize + 1, max(size, 1)} {
			if piece == 1 && size > BlockSize+1 {
				continue // slow, and covered by the 7s
			}
			b := newBlockSums()
			for off := 0; off < size; off += piece {
				b.Write(data[off:min(off+piece, size)])
			}
			if got := b.Sums(); !slices.Equal(got, want) || blockCount(int64(size)) != len(want) {
				t.Errorf("%d bytes in pieces of %d: %d sums, want %d (blockCount %d)", size, piece, len(got), len(want), blockCount(int64(size)))
			}
		}
	}
}

func TestChangedBlocks(t *testing.T) {
	sums := []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	base := []uint64{1, 0, 3, 4, 5, 6, 7, 0}
	bits := changedBlocks(sums, base)
	// Block 1 and 7 differ, 8 and 9 are beyond the base.
	if !bytes.Equal(bits, []byte{1<<1 | 1<<7, 1<<0 | 1<<1}) {
		t.Errorf("changedBlocks = %08b", bits)
	}
	if bits := changedBlocks(sums, sums); !bytes.Equal(bits, []byte{0, 0}) {
		t.Errorf("changedBlocks of the same sums = %08b, want none", bits)
	}
	if bits := changedBlocks(nil, base); len(bits) != 0 {
		t.Errorf("changedBlocks of no blocks = %08b", bits)
	}
}

// TestAssembled: a shard assembled from a bitmap, the blocks sent and the
// earlier shard's others; a body that ends early or runs on, a block neither
// sent nor in the earlier shard, and an earlier shard that is too short all
// fail the read.
func TestAssembled(t *testing.T) {
	size := 3*BlockSize + 10
	old := bytes.Repeat([]byte{'o'}, size)
	want := bytes.Clone(old)
	copy(want[BlockSize:], bytes.Repeat([]byte{'n'}, BlockSize))
	copy(want[3*BlockSize:], "newnewnewn")
	path := filepath.Join(t.TempDir(), "base")
	if err := os.WriteFile(path, old, 0o644); err != nil {
		t.Fatal(err)
	}
	base, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	body := append([]byte{1<<1 | 1<<3}, want[BlockSize:2*BlockSize]...)
	body = append(body, want[3*BlockSize:]...)
	read := func(body []byte, nb int, f *os.File) ([]byte, error) {
		a := &assembled{body: bytes.NewReader(body), base: f, nb: nb, size: int64(size), what: "changes"}
		return io.ReadAll(a)
	}
	if got, err := read(body, 4, base); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("assembled %d bytes, %v; want the new shard", len(got), err)
	}
	if _, err := read(body[:len(body)-1], 4, base); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("body cut short: %v, want ErrUnexpectedEOF", err)
	}
	if _, err := read(append(bytes.Clone(body), 'x'), 4, base); err == nil || !strings.Contains(err.Error(), "more bytes") {
		t.Errorf("body too long: %v, want an error", err)
	}
	if _, err := read(body, 2, base); err == nil || !strings.Contains(err.Error(), "block 2 not sent") {
		t.Errorf("a block not sent beyond the earlier shard: %v, want an error", err)
	}
	short := filepath.Join(t.TempDir(), "short")
	os.WriteFile(short, old[:BlockSize], 0o644)
	sf, _ := os.Open(short)
	defer sf.Close()
	if _, err := read(body, 4, sf); err == nil || !strings.Contains(err.Error(), "earlier shard") {
		t.Errorf("an earlier shard too short: %v, want an error", err)
	}
}
