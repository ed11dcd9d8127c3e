package shardstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/shard"
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

func TestPlan(t *testing.T) {
	size := int64(4*BlockSize + 10) // 5 blocks, the last of 10 bytes
	want := []uint64{1, 2, 3, 4, 5}
	bits := []byte{1<<0 | 1<<4}
	for _, c := range []struct {
		name      string
		spare     []uint64
		spareSize int64
		plan      []blockSource
	}{
		{"no spare", nil, 0, []blockSource{fromBody, fromBase, fromBase, fromBase, fromBody}},
		{"a spare alike but for block 2", []uint64{9, 2, 0, 4, 5}, size, []blockSource{fromBody, fromSpare, fromBase, fromSpare, fromBody}},
		{"a shorter spare", []uint64{1, 2}, 2 * BlockSize, []blockSource{fromBody, fromSpare, fromBase, fromBase, fromBody}},
		// Block 1 of a spare of 1.5 blocks is shorter than the new one's.
		{"a spare whose last block is shorter", []uint64{1, 2}, BlockSize + BlockSize/2, []blockSource{fromBody, fromBase, fromBase, fromBase, fromBody}},
	} {
		if got := plan(bits, size, want, c.spare, c.spareSize); !slices.Equal(got, c.plan) {
			t.Errorf("%s: plan = %v, want %v", c.name, got, c.plan)
		}
	}
}

// TestChangesHead: the bitmap and the sent blocks' sums, and the new shard's
// sums from them and the earlier shard's; a head cut short, a bitmap naming
// blocks beyond the shard, and a block neither sent nor in the earlier shard
// are errors.
func TestChangesHead(t *testing.T) {
	body := []byte{1<<1 | 1<<3}
	body = binary.LittleEndian.AppendUint64(body, 11)
	body = binary.LittleEndian.AppendUint64(body, 33)
	h, err := readChangesHead(bytes.NewReader(body), 4)
	if err != nil || !slices.Equal(h.sent, []uint64{11, 33}) {
		t.Fatalf("readChangesHead = %+v, %v", h, err)
	}
	if got, err := h.sums(4, []uint64{0, 1, 2, 3}); err != nil || !slices.Equal(got, []uint64{0, 11, 2, 33}) {
		t.Errorf("sums = %v, %v", got, err)
	}
	if _, err := h.sums(4, []uint64{0}); err == nil || !strings.Contains(err.Error(), "block 2 not sent") {
		t.Errorf("a block neither sent nor in the earlier shard: %v", err)
	}
	if _, err := readChangesHead(bytes.NewReader(body[:len(body)-1]), 4); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("sums cut short: %v", err)
	}
	if _, err := readChangesHead(bytes.NewReader(nil), 4); !errors.Is(err, io.EOF) {
		t.Errorf("no bitmap: %v", err)
	}
	if _, err := readChangesHead(bytes.NewReader(body), 3); err == nil || !strings.Contains(err.Error(), "block 3 of a shard of 3") {
		t.Errorf("a bitmap beyond the shard: %v", err)
	}
}

// changesSource serves another node's store as a ChangesSource, without the
// network.
type changesSource struct{ storeSource }

func (c changesSource) GetShardOver(ctx context.Context, ref shard.Ref, link float64) (io.ReadCloser, int64, error) {
	return c.GetShard(ctx, ref)
}

func (c changesSource) GetShardChanges(ctx context.Context, ref shard.Ref, link float64, base []uint64) (io.ReadCloser, int64, error) {
	r, size, _, _, err := c.s.OpenChanges(ref, link, base)
	return r, size, err
}

// TestFetchChanges: a node holding a rank's shard of an earlier epoch stores
// the next from its changes, identical to the holder's; over its spare it
// writes only the blocks that differ from the spare's (a spare damaged in
// place, size and time kept, keeps its damage in the blocks not written,
// which a store started afresh finds); a block of its earlier shard that no
// longer matches its sum has the shard copied whole.
func TestFetchChanges(t *testing.T) {
	holder, node := New(t.TempDir()), New(t.TempDir())
	src := changesSource{storeSource{"10.0.0.1:7947", holder}}
	state := make([]byte, 10*BlockSize)
	for i := range state {
		state[i] = byte(i * 31 / 7)
	}
	ctx := context.Background()
	put := func(epoch uint64) (api.Fetched, []byte) {
		t.Helper()
		b, err := shard.Encode(shard.Header{Job: "heat", Epoch: epoch, NRanks: 1, CreatedNs: epoch},
			[]shard.Region{{ElemSize: 1, Count: uint64(len(state)), Data: state}})
		if err != nil {
			t.Fatal(err)
		}
		place(t, holder, ref(epoch, 0), b)
		f, err := node.Fetch(ctx, ref(epoch, 0), src)
		if err != nil || !f.Copied {
			t.Fatalf("Fetch of epoch %d = %+v, %v", epoch, f, err)
		}
		return f, b
	}
	same := func(epoch uint64, b []byte) {
		t.Helper()
		if got, _ := os.ReadFile(node.path(ref(epoch, 0))); !bytes.Equal(got, b) {
			t.Fatalf("the copy of epoch %d differs from the holder's shard", epoch)
		}
	}
	if f, b := put(1); f.Changed != 0 {
		t.Errorf("epoch 1 = %+v, want a whole copy", f)
	} else {
		same(1, b)
	}
	state[4*BlockSize]++
	// Blocks 0 (the header), 4, and 10 (the end of the payload and the
	// checksum), each with its sum, and the bitmap.
	f, b := put(2)
	if f.Changed != int64(len(b))-8*BlockSize+3*8+2 || f.Wire != f.Changed {
		t.Errorf("epoch 2 = %+v, want its changes (shard of %d bytes)", f, len(b))
	}
	same(2, b)

	// Epoch 1 becomes the spare, then is damaged in block 7 (which no epoch
	// changes) with its size and time kept, as if in place on the disk.
	if _, err := node.RemoveBefore("heat", 2); err != nil {
		t.Fatal(err)
	}
	spare := node.jobDir("heat").SparePath(0)
	fi, err := os.Stat(spare)
	if err != nil {
		t.Fatal(err)
	}
	damage := func(path string, at int64) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var one [1]byte
		if _, err := f.ReadAt(one[:], at); err != nil {
			t.Fatal(err)
		}
		one[0] ^= 1
		if _, err := f.WriteAt(one[:], at); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	}
	at := int64(7*BlockSize + 5)
	damage(spare, at)
	// Epoch 3 changes block 6; block 4 stays as in epoch 2 and comes from
	// there, the spare's being epoch 1's; the others stay as in the spare.
	state[6*BlockSize]++
	f, b = put(3)
	if f.Changed == 0 || f.Changed > 3*BlockSize+100 {
		t.Errorf("epoch 3 = %+v, want its changes", f)
	}
	if now, err := os.Stat(node.path(ref(3, 0))); err != nil || !os.SameFile(now, fi) {
		t.Fatalf("epoch 3 is not written over the spare (%v)", err)
	}
	got, _ := os.ReadFile(node.path(ref(3, 0)))
	if len(got) != len(b) || got[at] == b[at] {
		t.Fatalf("the spare's block 7 was written (or the copy is %d bytes, not %d)", len(got), len(b))
	}
	got[at] ^= 1
	if !bytes.Equal(got, b) {
		t.Fatalf("the copy of epoch 3 differs from the holder's shard beyond the spare's damage")
	}
	// The damage kept is found by a store that verifies the file afresh.
	if _, _, err := New(node.Dir).Open(ref(3, 0)); !errors.Is(err, errkind.Corrupt) {
		t.Errorf("epoch 3 verified afresh: %v, want it corrupt", err)
	}
	// Epoch 4 copies block 7 from epoch 3 (no spare now), where it no longer
	// matches its sum: the shard is copied whole.
	state[0]++
	if f, b := put(4); f.Changed != 0 || f.Wire != int64(len(b)) {
		t.Errorf("epoch 4 over an epoch 3 that differs from its sums = %+v, want a whole copy", f)
	} else {
		same(4, b)
	}
}
