package erasure

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

// fakeGroup is a group of made-up shards and its parity files. A shard is random bytes
// and their checksum: Encode and Rebuild look at nothing else of a shard.
type fakeGroup struct {
	h      Header // Index 0
	data   [][]byte
	parity [][]byte // row i
}

func newFakeGroup(t testing.TB, rng *rand.Rand, m int, lengths []int) fakeGroup {
	t.Helper()
	g := fakeGroup{h: Header{Job: "heat", Epoch: 7, Group: 2, K: len(lengths), M: m}}
	for i, n := range lengths {
		b := make([]byte, n-8, n)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		b = binary.LittleEndian.AppendUint64(b, xxh3.Hash(b))
		g.data = append(g.data, b)
		g.h.Data = append(g.h.Data, Member{Rank: 3*i + 1, Bytes: int64(n), Sum: binary.LittleEndian.Uint64(b[n-8:])})
		g.h.Stripe = max(g.h.Stripe, int64(n))
	}
	for row := range m {
		var buf bytes.Buffer
		sum, err := Encode(&buf, g.row(row), g.readers())
		if err != nil {
			t.Fatalf("Encode row %d: %v", row, err)
		}
		if want := int64(buf.Len()); g.h.Size() != want {
			t.Fatalf("Encode row %d wrote %d bytes, Size says %d", row, want, g.h.Size())
		}
		if got := binary.LittleEndian.Uint64(buf.Bytes()[buf.Len()-8:]); got != sum {
			t.Fatalf("Encode row %d returned sum %#x, file ends in %#x", row, sum, got)
		}
		g.parity = append(g.parity, buf.Bytes())
	}
	return g
}

// row returns the header of parity row i.
func (g fakeGroup) row(i int) Header {
	h := g.h
	h.Index = i
	return h
}

func (g fakeGroup) readers() []io.Reader {
	rs := make([]io.Reader, len(g.data))
	for i, b := range g.data {
		rs[i] = bytes.NewReader(b)
	}
	return rs
}

// pieces returns every piece of the group but those lost: data shards 0..K-1, then
// parity rows K..K+M-1.
func (g fakeGroup) pieces(lost func(i int) bool) []Piece {
	var ps []Piece
	for i, b := range g.data {
		if !lost(i) {
			ps = append(ps, Piece{Member: i, R: bytes.NewReader(b)})
		}
	}
	for row, b := range g.parity {
		if !lost(len(g.data) + row) {
			ps = append(ps, Piece{Parity: true, Row: row, R: bytes.NewReader(b)})
		}
	}
	return ps
}

func TestRebuildAfterAnyLoss(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for k := 1; k <= 5; k++ {
		for m := 1; m <= 3; m++ {
			t.Run(fmt.Sprintf("rs%d+%d", k, m), func(t *testing.T) {
				lengths := make([]int, k)
				for i := range lengths {
					lengths[i] = minShard + rng.IntN(3000)
				}
				g := newFakeGroup(t, rng, m, lengths)
				for _, p := range g.parity {
					if _, err := Verify(bytes.NewReader(p), int64(len(p))); err != nil {
						t.Fatalf("Verify of an encoded parity file: %v", err)
					}
				}
				n := k + m
				for lost := range 1 << n {
					if bitsSet(lost) > m {
						continue
					}
					for want := range k {
						if lost&(1<<want) == 0 {
							continue
						}
						var out bytes.Buffer
						err := Rebuild(&out, g.h, want, g.pieces(func(i int) bool { return lost&(1<<i) != 0 }))
						if err != nil {
							t.Fatalf("lost %0*b, Rebuild shard %d: %v", n, lost, want, err)
						}
						if !bytes.Equal(out.Bytes(), g.data[want]) {
							t.Fatalf("lost %0*b, Rebuild shard %d: got %d bytes that differ from the %d-byte shard",
								n, lost, want, out.Len(), len(g.data[want]))
						}
					}
				}
			})
		}
	}
}

// TestRebuildAcrossChunks uses shards longer than a chunk, with ends on and around
// chunk boundaries, the trailing checksum straddling one.
func TestRebuildAcrossChunks(t *testing.T) {
	if testing.Short() {
		t.Skip("needs shards of several MiB")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	g := newFakeGroup(t, rng, 2, []int{ChunkSize + 4, 2*ChunkSize + 17, ChunkSize, minShard})
	for want := range g.data {
		for _, lost := range []int{1<<want | 1<<((want+1)%4), 1 << want} {
			var out bytes.Buffer
			if err := Rebuild(&out, g.h, want, g.pieces(func(i int) bool { return lost&(1<<i) != 0 })); err != nil {
				t.Fatalf("Rebuild shard %d, lost %04b: %v", want, lost, err)
			}
			if !bytes.Equal(out.Bytes(), g.data[want]) {
				t.Fatalf("Rebuild shard %d, lost %04b: rebuilt shard differs", want, lost)
			}
		}
	}
}

func bitsSet(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

func TestEncodeRejectsDataStreams(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	g := newFakeGroup(t, rng, 2, []int{300, 500, 200})
	cases := []struct {
		name string
		edit func(data [][]byte) [][]byte // of a copy
		want error
		rank int
	}{
		{"shorter", func(d [][]byte) [][]byte { d[1] = d[1][:499]; return d }, ErrMismatch, 4},
		{"longer", func(d [][]byte) [][]byte { d[2] = append(d[2], 0); return d }, ErrMismatch, 7},
		{"empty", func(d [][]byte) [][]byte { d[0] = nil; return d }, ErrMismatch, 1},
		{"other trailing sum", func(d [][]byte) [][]byte { d[0][299] ^= 1; return d }, ErrMismatch, 1},
		{"sum moved", func(d [][]byte) [][]byte { d[2] = append(d[2][:150:150], d[2][150:]...); d[2][150]++; return d }, nil, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			data := make([][]byte, len(g.data))
			for i, b := range g.data {
				data[i] = bytes.Clone(b)
			}
			data = c.edit(data)
			rs := make([]io.Reader, len(data))
			for i, b := range data {
				rs[i] = bytes.NewReader(b)
			}
			var out bytes.Buffer
			_, err := Encode(&out, g.h, rs)
			if c.want == nil {
				// Only the trailing checksum is compared: a change before it is
				// the agent's shard verification's to find.
				if err != nil {
					t.Fatalf("Encode: %v, want success", err)
				}
				return
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), fmt.Sprintf("rank %d ", c.rank)) {
				t.Fatalf("Encode: got %v, want %v naming rank %d", err, c.want, c.rank)
			}
			if _, err := Verify(bytes.NewReader(out.Bytes()), int64(out.Len())); err == nil {
				t.Fatalf("a failed Encode left a parity file that verifies")
			}
		})
	}
}

func TestEncodeRejectsArguments(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	g := newFakeGroup(t, rng, 1, []int{300, 500})
	bad := g.h
	bad.Stripe = 400
	if _, err := Encode(io.Discard, bad, g.readers()); !errors.Is(err, ErrBadHeader) {
		t.Errorf("Encode with an invalid header: got %v, want %v", err, ErrBadHeader)
	}
	if _, err := Encode(io.Discard, g.h, g.readers()[:1]); err == nil {
		t.Errorf("Encode with 1 data stream for 2 members: got no error")
	}
	if _, err := Encode(errWriter{}, g.h, g.readers()); !errors.Is(err, errDisk) {
		t.Errorf("Encode to a failing writer: got %v, want %v", err, errDisk)
	}
}

// TestEncodeRowsMatchesEncode computes several rows in one pass, in any order and
// any subset, across chunk boundaries: each file must be the one Encode writes alone.
func TestEncodeRowsMatchesEncode(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	g := newFakeGroup(t, rng, 3, []int{ChunkSize + 300, 900, 2*ChunkSize + 17})
	for _, rows := range [][]int{{0, 1, 2}, {2, 0}, {1}, {2, 1, 0}} {
		ws := make([]io.Writer, len(rows))
		bufs := make([]*bytes.Buffer, len(rows))
		for i := range rows {
			bufs[i] = &bytes.Buffer{}
			ws[i] = bufs[i]
		}
		sums, err := EncodeRows(ws, rows, g.h, g.readers())
		if err != nil {
			t.Fatalf("EncodeRows %v: %v", rows, err)
		}
		for i, row := range rows {
			if !bytes.Equal(bufs[i].Bytes(), g.parity[row]) {
				t.Errorf("EncodeRows %v: row %d differs from Encode's", rows, row)
			}
			if want := binary.LittleEndian.Uint64(g.parity[row][len(g.parity[row])-8:]); sums[i] != want {
				t.Errorf("EncodeRows %v: row %d sum %#x, want %#x", rows, row, sums[i], want)
			}
		}
	}
	for _, rows := range [][]int{{}, {3}, {-1}, {1, 1}} {
		ws := make([]io.Writer, len(rows))
		for i := range ws {
			ws[i] = io.Discard
		}
		if _, err := EncodeRows(ws, rows, g.h, g.readers()); err == nil {
			t.Errorf("EncodeRows with rows %v of 3: got no error", rows)
		}
	}
	if _, err := EncodeRows([]io.Writer{io.Discard}, []int{0, 1}, g.h, g.readers()); err == nil {
		t.Errorf("EncodeRows with 1 writer for 2 rows: got no error")
	}
}

// errWriter fails every write.
type errWriter struct{}

func (errWriter) Write([]byte) (int, error) { return 0, errDisk }

// errReader fails every read.
type errReader struct{}

var errDisk = errors.New("disk on fire")

func (errReader) Read([]byte) (int, error) { return 0, errDisk }

func TestRebuildRejectsPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	g := newFakeGroup(t, rng, 2, []int{300, 500, 200}) // ranks 1, 4, 7
	otherGroup := bytes.Clone(g.parity[0])
	otherGroup[24]++ // the group number
	fixSum(otherGroup)

	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 0x10; return b }
	parity := func(row int, b []byte) Piece { return Piece{Parity: true, Row: row, R: bytes.NewReader(b)} }
	data := func(i int, b []byte) Piece { return Piece{Member: i, R: bytes.NewReader(b)} }
	cases := []struct {
		name   string
		want   int
		pieces []Piece
		err    error // nil: any error
		text   string
	}{
		{"corrupt parity payload", 0, []Piece{parity(0, flip(g.parity[0], 200)), data(1, g.data[1]), data(2, g.data[2])}, ErrChecksum, "parity row 0"},
		{"corrupt parity trailer", 0, []Piece{parity(1, flip(g.parity[1], len(g.parity[1])-1)), data(1, g.data[1]), data(2, g.data[2])}, ErrChecksum, "parity row 1"},
		{"corrupt parity header", 0, []Piece{parity(0, flip(g.parity[0], 50)), data(1, g.data[1]), data(2, g.data[2])}, nil, "parity row 0"},
		{"parity cut short", 0, []Piece{parity(0, g.parity[0][:len(g.parity[0])-3]), data(1, g.data[1]), data(2, g.data[2])}, ErrTruncated, "parity row 0"},
		{"parity cut in its payload", 0, []Piece{parity(0, g.parity[0][:300]), data(1, g.data[1]), data(2, g.data[2])}, ErrTruncated, "parity row 0"},
		{"parity too long", 0, []Piece{parity(0, append(bytes.Clone(g.parity[0]), 0)), data(1, g.data[1]), data(2, g.data[2])}, ErrBadHeader, "parity row 0"},
		{"parity of another group", 0, []Piece{parity(0, otherGroup), data(1, g.data[1]), data(2, g.data[2])}, ErrWrongGroup, "parity row 0"},
		{"parity given as another row", 0, []Piece{parity(1, g.parity[0]), data(1, g.data[1]), data(2, g.data[2])}, ErrWrongGroup, "row 0"},
		{"corrupt data shard", 0, []Piece{parity(0, g.parity[0]), data(1, flip(g.data[1], 100)), data(2, g.data[2])}, ErrMismatch, "rebuilt shard of rank 1 does not match its checksum"},
		{"corrupt data shard near the end", 0, []Piece{parity(0, g.parity[0]), data(1, flip(g.data[1], 295)), data(2, g.data[2])}, ErrMismatch, "rebuilt shard of rank 1 does not match its checksum"},
		{"data shard with another sum", 0, []Piece{parity(0, g.parity[0]), data(1, flip(g.data[1], 499)), data(2, g.data[2])}, ErrMismatch, "rank 4"},
		{"data shard too short", 0, []Piece{parity(0, g.parity[0]), data(1, g.data[1][:400]), data(2, g.data[2])}, ErrMismatch, "rank 4"},
		{"too few pieces", 0, []Piece{parity(0, g.parity[0]), data(2, g.data[2])}, ErrTooFewPieces, "have 2 pieces, need 3"},
		{"none", 1, nil, ErrTooFewPieces, "have 0 pieces, need 3"},
		{"duplicate data", 0, []Piece{data(1, g.data[1]), data(1, g.data[1]), parity(0, g.parity[0]), data(2, g.data[2])}, nil, "given twice"},
		{"duplicate parity", 0, []Piece{parity(0, g.parity[0]), parity(0, g.parity[0]), data(1, g.data[1]), data(2, g.data[2])}, nil, "given twice"},
		{"row out of range", 0, []Piece{parity(2, g.parity[0]), data(1, g.data[1]), data(2, g.data[2])}, nil, "parity row 2"},
		{"member out of range", 0, []Piece{data(3, g.data[0]), data(1, g.data[1]), data(2, g.data[2])}, nil, "member 3"},
		{"want out of range", 3, g.pieces(func(int) bool { return false }), nil, "member 3"},
		{"read error", 0, []Piece{{Parity: true, R: errReader{}}, data(1, g.data[1]), data(2, g.data[2])}, errDisk, "parity row 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Rebuild(io.Discard, g.h, c.want, c.pieces)
			if err == nil || c.err != nil && !errors.Is(err, c.err) || !strings.Contains(err.Error(), c.text) {
				t.Fatalf("Rebuild: got %v, want %v mentioning %q", err, c.err, c.text)
			}
			// Bad bytes in a piece are corruption; too few pieces or a failed read are not.
			if corrupt := c.err != ErrTooFewPieces && c.err != errDisk; c.err != nil && errors.Is(err, ErrCorrupt) != corrupt {
				t.Fatalf("Rebuild: got %v; errors.Is(err, ErrCorrupt) should be %v", err, corrupt)
			}
		})
	}
}

func TestRebuildIgnoresExtraPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	g := newFakeGroup(t, rng, 2, []int{300, 500, 200})
	// Corrupt pieces beyond the K that Rebuild needs are never read.
	pieces := append(g.pieces(func(i int) bool { return i == 0 || i == 4 }),
		Piece{Parity: true, Row: 1, R: errReader{}})
	var out bytes.Buffer
	if err := Rebuild(&out, g.h, 0, pieces); err != nil {
		t.Fatalf("Rebuild: %v", err)
	}
	if !bytes.Equal(out.Bytes(), g.data[0]) {
		t.Fatalf("rebuilt shard differs")
	}
	// A piece of the wanted shard itself is used as it is.
	out.Reset()
	if err := Rebuild(&out, g.h, 1, g.pieces(func(i int) bool { return i == 0 })); err != nil || !bytes.Equal(out.Bytes(), g.data[1]) {
		t.Fatalf("Rebuild of a shard that is present: err %v, equal %v", err, bytes.Equal(out.Bytes(), g.data[1]))
	}
}

// fixSum rewrites the trailing checksum of a parity file after an edit.
func fixSum(b []byte) {
	binary.LittleEndian.PutUint64(b[len(b)-8:], xxh3.Hash(b[:len(b)-8]))
}

func BenchmarkEncode(b *testing.B) {
	const shard = 64 << 20
	rng := rand.New(rand.NewPCG(13, 14))
	data := make([][]byte, 3)
	h := Header{Job: "bench", Epoch: 1, K: 3, M: 2, Stripe: shard}
	for i := range data {
		data[i] = make([]byte, shard)
		for j := 0; j < shard; j += 8 {
			binary.LittleEndian.PutUint64(data[i][j:], rng.Uint64())
		}
		h.Data = append(h.Data, Member{Rank: i, Bytes: shard, Sum: binary.LittleEndian.Uint64(data[i][shard-8:])})
	}
	b.SetBytes(int64(len(data)) * shard) // data shard bytes encoded per call
	b.ResetTimer()
	for b.Loop() {
		rs := make([]io.Reader, len(data))
		for i, d := range data {
			rs[i] = bytes.NewReader(d)
		}
		if _, err := Encode(io.Discard, h, rs); err != nil {
			b.Fatal(err)
		}
	}
}
