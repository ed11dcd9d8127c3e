package erasure

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/zeebo/xxh3"

	"shoal/internal/shard"
)

var rewrite = flag.Bool("rewrite", false, "regenerate testdata/ from the vector definition")

const vectorDir = "testdata"

// The code of docs/shard-format.md, written from its definition, independently of the
// library Encode uses: GF(2^8) with polynomial x⁸+x⁴+x³+x²+1, V[r][c] = r^c, and the
// generator V × (top K×K square of V)⁻¹.

func gfMul(a, b byte) byte {
	var p byte
	for ; b != 0; b >>= 1 {
		if b&1 != 0 {
			p ^= a
		}
		carry := a & 0x80
		a <<= 1
		if carry != 0 {
			a ^= 0x1d
		}
	}
	return p
}

func gfPow(a byte, n int) byte {
	p := byte(1)
	for range n {
		p = gfMul(p, a)
	}
	return p
}

func gfInv(a byte) byte {
	for b := 1; b < 256; b++ {
		if gfMul(a, byte(b)) == 1 {
			return byte(b)
		}
	}
	panic("0 has no inverse")
}

// generator returns the (k+m)×k generator matrix; its row k+i makes parity row i.
func generator(k, m int) [][]byte {
	v := make([][]byte, k+m)
	for r := range v {
		v[r] = make([]byte, k)
		for c := range k {
			v[r][c] = gfPow(byte(r), c)
		}
	}
	// Invert the top square by Gauss–Jordan elimination on [top | I].
	a := make([][]byte, k)
	for r := range a {
		a[r] = make([]byte, 2*k)
		copy(a[r], v[r])
		a[r][k+r] = 1
	}
	for c := range k {
		p := c
		for a[p][c] == 0 {
			p++
		}
		a[c], a[p] = a[p], a[c]
		inv := gfInv(a[c][c])
		for j := range a[c] {
			a[c][j] = gfMul(a[c][j], inv)
		}
		for r := range a {
			if f := a[r][c]; r != c && f != 0 {
				for j := range a[r] {
					a[r][j] ^= gfMul(f, a[c][j])
				}
			}
		}
	}
	g := make([][]byte, k+m)
	for r := range g {
		g[r] = make([]byte, k)
		for c := range k {
			for j := range k {
				g[r][c] ^= gfMul(v[r][j], a[j][k+c])
			}
		}
	}
	return g
}

// referenceParity returns parity row `row` over shards zero-padded to stripe bytes.
func referenceParity(shards [][]byte, m, row int, stripe int64) []byte {
	g := generator(len(shards), m)[len(shards)+row]
	p := make([]byte, stripe)
	for c, s := range shards {
		for j, b := range s {
			p[j] ^= gfMul(g[c], b)
		}
	}
	return p
}

func TestParityIsDocumentedCode(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	for k := 1; k <= 5; k++ {
		for m := 1; m <= 3; m++ {
			lengths := make([]int, k)
			for i := range lengths {
				lengths[i] = minShard + rng.IntN(200)
			}
			g := newFakeGroup(t, rng, m, lengths)
			for row, file := range g.parity {
				start := g.h.headerSize()
				got := file[start : start+g.h.Stripe]
				if want := referenceParity(g.data, m, row, g.h.Stripe); !bytes.Equal(got, want) {
					t.Fatalf("rs %d+%d row %d: payload differs from the documented code", k, m, row)
				}
			}
		}
	}
}

// vectorGroup is testdata/vectors.json: one group, its shard files and parity files.
type vectorGroup struct {
	Job     string         `json:"job"`
	Epoch   uint64         `json:"epoch"`
	Group   int            `json:"group"`
	K       int            `json:"k"`
	M       int            `json:"m"`
	Stripe  int64          `json:"stripe"`
	Members []vectorMember `json:"members"`
	Parity  []vectorParity `json:"parity"`
}

type vectorMember struct {
	File  string `json:"file"`
	Rank  int    `json:"rank"`
	Bytes int64  `json:"bytes"`
	Sum   string `json:"sum"`
}

type vectorParity struct {
	File     string `json:"file"`
	Index    int    `json:"index"`
	Checksum string `json:"checksum"`
}

func (v vectorGroup) header(t *testing.T, index int) Header {
	h := Header{Job: v.Job, Epoch: v.Epoch, Group: v.Group, Index: index, K: v.K, M: v.M, Stripe: v.Stripe}
	for _, mb := range v.Members {
		sum, err := strconv.ParseUint(mb.Sum, 0, 64)
		if err != nil {
			t.Fatalf("vectors.json: sum of %s: %v", mb.File, err)
		}
		h.Data = append(h.Data, Member{Rank: mb.Rank, Bytes: mb.Bytes, Sum: sum})
	}
	return h
}

// writeVectors regenerates testdata/: two shards of job "vec" written by the shard
// encoder, and their parity files laid out field by field here, not by Encode.
func writeVectors(t *testing.T) {
	f64 := func(vs ...float64) []byte {
		var b []byte
		for _, v := range vs {
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
		}
		return b
	}
	shards := [][]shard.Region{
		{{ID: 0, ElemSize: 8, Count: 4, Data: f64(1, 2, 3, -4)}},
		{{ID: 0, ElemSize: 8, Count: 4, Data: f64(0.5, 0.25, 0.125, 8)},
			{ID: 7, ElemSize: 4, Count: 3, Data: []byte{42, 0, 0, 0, 255, 255, 255, 255, 0, 0, 0, 128}}},
	}
	v := vectorGroup{Job: "vec", Epoch: 3, Group: 0, K: len(shards), M: 2}
	var data [][]byte
	for rank, regions := range shards {
		b, err := shard.Encode(shard.Header{Job: v.Job, Epoch: v.Epoch, Rank: uint32(rank), NRanks: uint32(len(shards)),
			CreatedNs: 1795427000000000000}, regions)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("r%06d.shard", rank)
		writeVector(t, name, b)
		data = append(data, b)
		v.Members = append(v.Members, vectorMember{File: name, Rank: rank, Bytes: int64(len(b)),
			Sum: fmt.Sprintf("%#016x", binary.LittleEndian.Uint64(b[len(b)-8:]))})
		v.Stripe = max(v.Stripe, int64(len(b)))
	}
	for row := range v.M {
		var b bytes.Buffer
		put := func(x any) { binary.Write(&b, binary.LittleEndian, x) }
		b.WriteString("SHOALPAR")
		put(uint32(1))
		put(uint32(128 + 24*v.K))
		put(v.Epoch)
		put(uint32(v.Group))
		put(uint16(row))
		put(uint16(v.K))
		put(uint16(v.M))
		b.Write(make([]byte, 6))
		put(uint64(v.Stripe))
		job := make([]byte, 64)
		copy(job, v.Job)
		b.Write(job)
		b.Write(make([]byte, 16))
		for i, mb := range v.Members {
			put(uint32(mb.Rank))
			put(uint32(0))
			put(uint64(mb.Bytes))
			b.Write(data[i][len(data[i])-8:])
		}
		b.Write(referenceParity(data, v.M, row, v.Stripe))
		sum := xxh3.Hash(b.Bytes())
		put(sum)
		name := fmt.Sprintf("g%d-p%d.parity", v.Group, row)
		writeVector(t, name, b.Bytes())
		v.Parity = append(v.Parity, vectorParity{File: name, Index: row, Checksum: fmt.Sprintf("%#016x", sum)})
	}
	j, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	writeVector(t, "vectors.json", append(j, '\n'))
}

func writeVector(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(vectorDir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readVector(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestVectors(t *testing.T) {
	if *rewrite {
		writeVectors(t)
	}
	var v vectorGroup
	if err := json.Unmarshal(readVector(t, "vectors.json"), &v); err != nil {
		t.Fatal(err)
	}
	var data [][]byte
	for _, mb := range v.Members {
		b := readVector(t, mb.File)
		s, err := shard.Parse(b)
		if err != nil || int(s.Rank) != mb.Rank || int64(len(b)) != mb.Bytes || fmt.Sprintf("%#016x", s.Checksum) != mb.Sum {
			t.Fatalf("%s: not the valid shard vectors.json describes (%v)", mb.File, err)
		}
		data = append(data, b)
	}
	parity := make([][]byte, v.M)
	for _, p := range v.Parity {
		b := readVector(t, p.File)
		h, err := Verify(bytes.NewReader(b), int64(len(b)))
		if want := v.header(t, p.Index); err != nil || !reflect.DeepEqual(h, want) {
			t.Fatalf("Verify %s: got %+v, %v, want %+v", p.File, h, err, want)
		}
		var out bytes.Buffer
		rs := make([]io.Reader, len(data))
		for i, d := range data {
			rs[i] = bytes.NewReader(d)
		}
		sum, err := Encode(&out, v.header(t, p.Index), rs)
		if err != nil || !bytes.Equal(out.Bytes(), b) || fmt.Sprintf("%#016x", sum) != p.Checksum {
			t.Fatalf("Encode of row %d: %v; got %d bytes, checksum %#016x; want %s's %d bytes, checksum %s",
				p.Index, err, out.Len(), sum, p.File, len(b), p.Checksum)
		}
		parity[p.Index] = b
	}
	// Rebuild each shard from each pair of the other pieces.
	h := v.header(t, 0)
	for want := range data {
		var others []Piece // streams opened per pair below
		for i := range data {
			if i != want {
				others = append(others, Piece{Member: i})
			}
		}
		for row := range parity {
			others = append(others, Piece{Parity: true, Row: row})
		}
		for i := range others {
			for j := i + 1; j < len(others); j++ {
				a, b := others[i], others[j]
				a.R = bytes.NewReader(pieceBytes(a, data, parity))
				b.R = bytes.NewReader(pieceBytes(b, data, parity))
				var out bytes.Buffer
				if err := Rebuild(&out, h, want, []Piece{a, b}); err != nil || !bytes.Equal(out.Bytes(), data[want]) {
					t.Fatalf("Rebuild %s from %+v and %+v: %v, equal %v", v.Members[want].File, a, b, err, bytes.Equal(out.Bytes(), data[want]))
				}
			}
		}
	}
}

func pieceBytes(p Piece, data, parity [][]byte) []byte {
	if p.Parity {
		return parity[p.Row]
	}
	return data[p.Member]
}
