package shard

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zeebo/xxh3"
)

var rewrite = flag.Bool("rewrite", false, "regenerate testdata/shards from the vector definitions")

const vectorDir = "../../testdata/shards"

// vector is one line of testdata/shards/vectors.json. Valid shards list every field;
// invalid ones only file, ok and error (see badVector).
type vector struct {
	File      string         `json:"file"`
	OK        bool           `json:"ok"`
	Error     string         `json:"error,omitempty"`
	Job       string         `json:"job"`
	Epoch     uint64         `json:"epoch"`
	Rank      uint32         `json:"rank"`
	NRanks    uint32         `json:"nranks"`
	CreatedNs uint64         `json:"created_ns"`
	Regions   []vectorRegion `json:"regions"`
	Checksum  string         `json:"checksum"`
}

type badVector struct {
	File  string `json:"file"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

type vectorRegion struct {
	ID         int32  `json:"id"`
	ElemSize   uint32 `json:"elem_size"`
	Count      uint64 `json:"count"`
	PayloadHex string `json:"payload_hex"`
}

// rawShard builds shard bytes field by field, deliberately not through Encode, so the
// vectors check Encode and Parse instead of agreeing with them by construction.
type rawShard struct {
	magic             string
	version, hdrSize  uint32
	epoch             uint64
	rank, nranks      uint32
	nregions          int // -1: len(regions)
	reserved1         uint32
	payloadAdjust     int64
	job               string
	created           uint64
	reserved2         uint64
	regions           []vectorRegion
	regionBytesAdjust int64
	regionReserved    uint64
}

func (r rawShard) bytes() []byte {
	var b bytes.Buffer
	put := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString(r.magic)
	put(r.version)
	put(r.hdrSize)
	put(r.epoch)
	put(r.rank)
	put(r.nranks)
	n := r.nregions
	if n < 0 {
		n = len(r.regions)
	}
	put(uint32(n))
	put(r.reserved1)
	var payload []byte
	for _, g := range r.regions {
		p, _ := hex.DecodeString(g.PayloadHex)
		payload = append(payload, p...)
	}
	put(uint64(int64(len(payload)) + r.payloadAdjust))
	job := make([]byte, 64)
	copy(job, r.job)
	b.Write(job)
	put(r.created)
	put(r.reserved2)
	for i, g := range r.regions {
		put(g.ID)
		put(g.ElemSize)
		put(g.Count)
		nb := int64(len(g.PayloadHex) / 2)
		if i == 0 {
			nb += r.regionBytesAdjust
		}
		put(uint64(nb))
		put(r.regionReserved)
	}
	b.Write(payload)
	put(xxh3.Hash(b.Bytes()))
	return b.Bytes()
}

func base() rawShard {
	return rawShard{
		magic: Magic, version: 1, hdrSize: 128, epoch: 3, rank: 1, nranks: 4,
		nregions: -1, job: "vec", created: 1795427000000000000,
		regions: []vectorRegion{
			{ID: 0, ElemSize: 8, Count: 4, PayloadHex: "000000000000f03f0000000000000040000000000000084000000000000010c0"},
			{ID: 7, ElemSize: 4, Count: 3, PayloadHex: "2a000000ffffffff00000080"},
		},
	}
}

type vectorCase struct {
	file string
	raw  rawShard
	edit func([]byte) []byte // applied after the checksum
	err  string              // "" for a valid shard
}

func vectorCases() []vectorCase {
	with := func(f func(*rawShard)) rawShard { r := base(); f(&r); return r }
	return []vectorCase{
		{file: "valid-2regions.shard", raw: base()},
		{file: "valid-empty.shard", raw: with(func(r *rawShard) { r.regions = nil; r.rank, r.nranks, r.epoch, r.job = 0, 1, 1, "empty-job" })},
		{file: "valid-zero-count.shard", raw: with(func(r *rawShard) { r.regions = []vectorRegion{{ID: 5, ElemSize: 16, Count: 0}} })},
		{file: "valid-negative-id.shard", raw: with(func(r *rawShard) {
			r.regions = []vectorRegion{{ID: -5, ElemSize: 1, Count: 5, PayloadHex: "68656c6c6f"}, {ID: 2, ElemSize: 2, Count: 1, PayloadHex: "feff"}}
			r.job = strings.Repeat("j", MaxJobLen)
		})},
		{file: "valid-utf8-job.shard", raw: with(func(r *rawShard) { r.job = "wärme-μ" })},
		{file: "job-not-utf8.shard", raw: with(func(r *rawShard) { r.job = "vec\xff" }), err: "bad header"},
		{file: "job-overlong-utf8.shard", raw: with(func(r *rawShard) { r.job = "vec\xc0\xaf" }), err: "bad header"},
		{file: "job-surrogate-utf8.shard", raw: with(func(r *rawShard) { r.job = "vec\xed\xa0\x80" }), err: "bad header"},
		{file: "job-bytes-after-nul.shard", raw: with(func(r *rawShard) { r.job = "vec\x00x" }), err: "bad header"},
		{file: "job-no-nul.shard", raw: with(func(r *rawShard) { r.job = strings.Repeat("j", 64) }), err: "bad header"},
		{file: "truncated.shard", raw: base(), edit: func(b []byte) []byte { return b[:100] }, err: "truncated"},
		{file: "bad-magic.shard", raw: with(func(r *rawShard) { r.magic = "SHOALSHX" }), err: "bad magic"},
		{file: "bad-version.shard", raw: with(func(r *rawShard) { r.version = 2 }), err: "unsupported version"},
		{file: "flipped-payload.shard", raw: base(), edit: func(b []byte) []byte { b[HeaderSize+2*RegionSize+3] ^= 0x10; return b }, err: "checksum mismatch"},
		{file: "cut-tail.shard", raw: base(), edit: func(b []byte) []byte { return b[:len(b)-1] }, err: "checksum mismatch"},
		{file: "rank-out-of-range.shard", raw: with(func(r *rawShard) { r.rank = 4 }), err: "bad header"},
		{file: "zero-epoch.shard", raw: with(func(r *rawShard) { r.epoch = 0 }), err: "bad header"},
		{file: "reserved-set.shard", raw: with(func(r *rawShard) { r.reserved2 = 1 }), err: "bad header"},
		{file: "payload-size-wrong.shard", raw: with(func(r *rawShard) { r.payloadAdjust = 8 }), err: "bad header"},
		{file: "region-bytes-wrong.shard", raw: with(func(r *rawShard) {
			r.regionBytesAdjust = 4
			r.regions[1].Count = 2
			r.regions[1].PayloadHex = "2a000000ffffffff"
		}), err: "bad region table"},
		{file: "region-ids-unsorted.shard", raw: with(func(r *rawShard) { r.regions[0].ID = 9 }), err: "bad region table"},
		{file: "region-elem-size-zero.shard", raw: with(func(r *rawShard) { r.regions = []vectorRegion{{ID: 1, ElemSize: 0, Count: 0}} }), err: "bad region table"},
	}
}

func (c vectorCase) shard() []byte {
	b := c.raw.bytes()
	if c.edit != nil {
		b = c.edit(b)
	}
	return b
}

func (c vectorCase) vector() any {
	if c.err != "" {
		return badVector{File: c.file, Error: c.err}
	}
	v := vector{File: c.file, OK: true}
	{
		b := c.shard()
		v.Job, v.Epoch, v.Rank, v.NRanks, v.CreatedNs = c.raw.job, c.raw.epoch, c.raw.rank, c.raw.nranks, c.raw.created
		v.Regions = c.raw.regions
		if v.Regions == nil {
			v.Regions = []vectorRegion{}
		}
		v.Checksum = fmt.Sprintf("%#016x", binary.LittleEndian.Uint64(b[len(b)-8:]))
	}
	return v
}

func writeVectors(t *testing.T) {
	var index bytes.Buffer
	index.WriteString("[\n")
	for i, c := range vectorCases() {
		if err := os.WriteFile(filepath.Join(vectorDir, c.file), c.shard(), 0o644); err != nil {
			t.Fatal(err)
		}
		line, err := json.Marshal(c.vector())
		if err != nil {
			t.Fatal(err)
		}
		index.Write(line)
		if i < len(vectorCases())-1 {
			index.WriteString(",")
		}
		index.WriteString("\n")
	}
	index.WriteString("]\n")
	if err := os.WriteFile(filepath.Join(vectorDir, "vectors.json"), index.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestVectors checks Parse against every committed vector, and that the committed
// files are exactly what the definitions above produce.
func TestVectors(t *testing.T) {
	if *rewrite {
		writeVectors(t)
	}
	data, err := os.ReadFile(filepath.Join(vectorDir, "vectors.json"))
	if err != nil {
		t.Fatalf("read vectors (regenerate with -rewrite): %v", err)
	}
	var vs []vector
	if err := json.Unmarshal(data, &vs); err != nil {
		t.Fatalf("vectors.json: %v", err)
	}
	if len(vs) != len(vectorCases()) {
		t.Fatalf("vectors.json has %d entries, definitions have %d (regenerate with -rewrite)", len(vs), len(vectorCases()))
	}
	for i, v := range vs {
		c := vectorCases()[i]
		b, err := os.ReadFile(filepath.Join(vectorDir, v.File))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, c.shard()) {
			t.Errorf("%s: committed file differs from its definition (regenerate with -rewrite)", v.File)
		}
		s, err := Parse(b)
		if got := ShortName(err); got != v.Error || (err != nil) == v.OK {
			t.Errorf("%s: Parse error = %v (short %q), want %q", v.File, err, got, v.Error)
			continue
		}
		checkVerifyAgrees(t, v.File, b, s, err)
		if !v.OK {
			continue
		}
		if s.Job != v.Job || s.Epoch != v.Epoch || s.Rank != v.Rank || s.NRanks != v.NRanks || s.CreatedNs != v.CreatedNs {
			t.Errorf("%s: header = %+v, want job %q epoch %d rank %d/%d created %d", v.File, s.Header, v.Job, v.Epoch, v.Rank, v.NRanks, v.CreatedNs)
		}
		if got := fmt.Sprintf("%#016x", s.Checksum); got != v.Checksum {
			t.Errorf("%s: checksum = %s, want %s", v.File, got, v.Checksum)
		}
		if len(s.Regions) != len(v.Regions) {
			t.Fatalf("%s: %d regions, want %d", v.File, len(s.Regions), len(v.Regions))
		}
		regions := make([]Region, len(v.Regions))
		for j, r := range v.Regions {
			g := s.Regions[j]
			if g.ID != r.ID || g.ElemSize != r.ElemSize || g.Count != r.Count || hex.EncodeToString(g.Data) != r.PayloadHex {
				t.Errorf("%s region %d: got id %d elem %d count %d data %x, want %+v", v.File, j, g.ID, g.ElemSize, g.Count, g.Data, r)
			}
			regions[j] = g
		}
		// Encoding the parsed shard again must give the same bytes.
		again, err := Encode(s.Header, regions)
		if err != nil || !bytes.Equal(again, b) {
			t.Errorf("%s: Encode(Parse(b)) differs from b (err %v)", v.File, err)
		}
	}
}
