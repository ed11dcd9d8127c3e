package shard

import (
	"math/rand/v2"
	"testing"

	"github.com/zeebo/xxh3"
)

// Checksum must give xxh3.Hash's sum whichever way it hashes: at and around the
// size where it switches to the streaming hasher, at xxh3's block (1 KiB) and
// stripe (64 B) boundaries, and well beyond.
func TestChecksumIsXXH3(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 3*streamFrom+5000)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for _, n := range []int{0, 1, 63, 64, 1023, 1024, 1025, 240, 241,
		streamFrom - 1, streamFrom, streamFrom + 1, streamFrom + 63, streamFrom + 64,
		streamFrom + 1024, streamFrom + 1023, 2*streamFrom + 17, len(b)} {
		if got, want := Checksum(b[:n]), xxh3.Hash(b[:n]); got != want {
			t.Errorf("Checksum of %d bytes = %#016x, want xxh3.Hash's %#016x", n, got, want)
		}
	}
}
