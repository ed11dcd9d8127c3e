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
	File    string `json:"file"`
	OK      bool   `json:"ok"`
	Error   string `json:"error,omitempty"`
	Version uint32 `json:"version"`
	// ISA and LongDouble are the writer's ABI codes (version 3).
	ISA        uint8          `json:"isa,omitempty"`
	LongDouble uint8          `json:"long_double,omitempty"`
	Job        string         `json:"job"`
	Epoch      uint64         `json:"epoch"`
	Rank       uint32         `json:"rank"`
	NRanks     uint32         `json:"nranks"`
	CreatedNs  uint64         `json:"created_ns"`
	Regions    []vectorRegion `json:"regions"`
	Checksum   string         `json:"checksum"`
}

type badVector struct {
	File  string `json:"file"`
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

// vectorRegion is a region of a vector: kind "plain", "block", "subarray" or
// "replicated", its datatype code, a block's global and offset, a subarray's order ("C"
// or "Fortran"), sizes, subsizes and starts.
type vectorRegion struct {
	ID         int32    `json:"id"`
	ElemSize   uint32   `json:"elem_size"`
	Count      uint64   `json:"count"`
	Kind       string   `json:"kind"`
	Datatype   uint16   `json:"datatype"`
	Flags      uint8    `json:"flags,omitempty"`
	Global     *uint64  `json:"global,omitempty"`
	Offset     *uint64  `json:"offset,omitempty"`
	Order      string   `json:"order,omitempty"`
	Sizes      []uint64 `json:"sizes,omitempty"`
	Subsizes   []uint64 `json:"subsizes,omitempty"`
	Starts     []uint64 `json:"starts,omitempty"`
	PayloadHex string   `json:"payload_hex"`
	// For malformed vectors: the entry's kind field and its descriptor's bytes,
	// instead of those Kind and the fields above give.
	rawKind *uint16
	rawDesc []byte
}

func (g vectorRegion) kindCode() uint16 {
	if g.rawKind != nil {
		return *g.rawKind
	}
	return map[string]uint16{"plain": 0, "block": 1, "subarray": 2, "replicated": 3}[g.Kind]
}

// desc lays the descriptor out field by field, as docs/shard-format.md gives it.
func (g vectorRegion) desc() []byte {
	if g.rawDesc != nil {
		return g.rawDesc
	}
	var b bytes.Buffer
	put := func(v any) { binary.Write(&b, binary.LittleEndian, v) }
	switch g.Kind {
	case "block":
		put(*g.Global)
		put(*g.Offset)
	case "subarray":
		put(uint32(len(g.Sizes)))
		put(map[string]uint32{"C": 0, "Fortran": 1}[g.Order])
		for _, list := range [][]uint64{g.Sizes, g.Subsizes, g.Starts} {
			for _, v := range list {
				put(v)
			}
		}
	}
	return b.Bytes()
}

// rawShard builds shard bytes field by field, deliberately not through Encode, so the
// vectors check Encode and Parse instead of agreeing with them by construction.
type rawShard struct {
	magic             string
	version, hdrSize  uint32
	epoch             uint64
	rank, nranks      uint32
	nregions          int    // -1: len(regions)
	reserved1         uint32 // version 3: its upper 2 bytes, after isa and longDouble
	isa, longDouble   uint8  // version 3
	payloadAdjust     int64
	job               string
	created           uint64
	reserved2         uint64
	regions           []vectorRegion
	regionBytesAdjust int64
	regionReserved    uint64 // version 1: the entries' reserved field
	descAdjust        int64  // added to the header's descriptor bytes (version 2)
	descPad           []byte // bytes after the descriptors, in the area
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
	if r.version >= 3 {
		put(r.isa)
		put(r.longDouble)
		put(uint16(r.reserved1))
	} else {
		put(r.reserved1)
	}
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
	var desc []byte
	for _, g := range r.regions {
		desc = append(desc, g.desc()...)
	}
	desc = append(desc, r.descPad...)
	if r.version >= 2 {
		put(uint64(int64(len(desc)) + r.descAdjust))
	} else {
		put(r.reserved2)
	}
	for i, g := range r.regions {
		put(g.ID)
		put(g.ElemSize)
		put(g.Count)
		nb := int64(len(g.PayloadHex) / 2)
		if i == 0 {
			nb += r.regionBytesAdjust
		}
		put(uint64(nb))
		if r.version >= 3 {
			put(uint8(g.kindCode()))
			put(g.Flags)
			put(g.Datatype)
			put(uint32(len(g.desc())))
		} else if r.version == 2 {
			put(g.kindCode())
			put(g.Datatype)
			put(uint32(len(g.desc())))
		} else {
			put(r.regionReserved)
		}
	}
	if r.version >= 2 {
		b.Write(desc)
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
			{ID: 0, ElemSize: 8, Count: 4, Kind: "plain", PayloadHex: "000000000000f03f0000000000000040000000000000084000000000000010c0"},
			{ID: 7, ElemSize: 4, Count: 3, Kind: "plain", PayloadHex: "2a000000ffffffff00000080"},
		},
	}
}

func u64(v uint64) *uint64 { return &v }
func u16(v uint16) *uint16 { return &v }

// kinds is a version 2 shard with a region of each kind: a plain double, a block of
// 4 ints at 3 of 10, a 2x3 box at (1, 2) of a 4x6 C-order array of shorts, and a
// replicated step counter.
func kinds() rawShard {
	r := base()
	r.version = 2
	r.regions = []vectorRegion{
		{ID: 1, ElemSize: 8, Count: 1, Kind: "plain", Datatype: 14, PayloadHex: "000000000000f03f"},
		{ID: 2, ElemSize: 4, Count: 4, Kind: "block", Datatype: 7, Global: u64(10), Offset: u64(3),
			PayloadHex: "03000000040000000500000006000000"},
		{ID: 3, ElemSize: 2, Count: 6, Kind: "subarray", Datatype: 5, Order: "C",
			Sizes: []uint64{4, 6}, Subsizes: []uint64{2, 3}, Starts: []uint64{1, 2},
			PayloadHex: "080009000a000e000f001000"},
		{ID: 4, ElemSize: 4, Count: 1, Kind: "replicated", Datatype: 7, PayloadHex: "2a000000"},
	}
	return r
}

type vectorCase struct {
	file string
	// written names the instruction set whose libshoal wrote the file
	// (scripts/abi-shards.sh): the file is committed as written, and raw says what
	// it must hold but its created_ns, which the writer's clock gave.
	written string
	raw     rawShard
	edit    func([]byte) []byte // applied after the checksum
	err     string              // "" for a valid shard
}

func vectorCases() []vectorCase {
	with := func(f func(*rawShard)) rawShard { r := base(); f(&r); return r }
	return []vectorCase{
		{file: "valid-2regions.shard", raw: base()},
		{file: "valid-empty.shard", raw: with(func(r *rawShard) { r.regions = nil; r.rank, r.nranks, r.epoch, r.job = 0, 1, 1, "empty-job" })},
		{file: "valid-zero-count.shard", raw: with(func(r *rawShard) { r.regions = []vectorRegion{{ID: 5, ElemSize: 16, Count: 0, Kind: "plain"}} })},
		{file: "valid-negative-id.shard", raw: with(func(r *rawShard) {
			r.regions = []vectorRegion{{ID: -5, ElemSize: 1, Count: 5, Kind: "plain", PayloadHex: "68656c6c6f"}, {ID: 2, ElemSize: 2, Count: 1, Kind: "plain", PayloadHex: "feff"}}
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
		{file: "bad-version.shard", raw: with(func(r *rawShard) { r.version = 4 }), err: "unsupported version"},
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
		{file: "region-elem-size-zero.shard", raw: with(func(r *rawShard) { r.regions = []vectorRegion{{ID: 1, ElemSize: 0, Count: 0, Kind: "plain"}} }), err: "bad region table"},
		{file: "v1-kind-set.shard", raw: with(func(r *rawShard) { r.regionReserved = 1 << 0 }), err: "bad region table"},
		{file: "valid-v2-kinds.shard", raw: kinds()},
		{file: "valid-v2-fortran.shard", raw: v2(func(r *rawShard) {
			r.rank, r.nranks = 0, 2
			r.regions = []vectorRegion{{ID: -3, ElemSize: 8, Count: 4, Kind: "subarray", Datatype: 34, Order: "Fortran",
				Sizes: []uint64{2, 5, 3}, Subsizes: []uint64{2, 2, 1}, Starts: []uint64{0, 3, 2},
				PayloadHex: "0000000000000000000000000000f03f0000000000000040000000000000084000000000"[:64]}}
		})},
		{file: "valid-v2-empty-block.shard", raw: v2(func(r *rawShard) {
			r.regions = []vectorRegion{{ID: 9, ElemSize: 16, Count: 0, Kind: "block", Global: u64(100), Offset: u64(100)}}
		})},
		{file: "v2-unknown-kind.shard", raw: v2(func(r *rawShard) { r.regions[3].rawKind = u16(4) }), err: "bad region table"},
		{file: "v2-block-beyond-global.shard", raw: v2(func(r *rawShard) { r.regions[1].Offset = u64(7) }), err: "bad region table"},
		{file: "v2-block-desc-short.shard", raw: v2(func(r *rawShard) { r.regions[1].rawDesc = r.regions[1].desc()[:8] }), err: "bad region table"},
		{file: "v2-subarray-count-wrong.shard", raw: v2(func(r *rawShard) {
			r.regions[2].Subsizes = []uint64{3, 2}
			r.regions[2].Count = 5
			r.regions[2].PayloadHex = r.regions[2].PayloadHex[:20]
		}), err: "bad region table"},
		{file: "v2-subarray-beyond-size.shard", raw: v2(func(r *rawShard) { r.regions[2].Starts = []uint64{3, 2} }), err: "bad region table"},
		{file: "v2-subarray-no-dims.shard", raw: v2(func(r *rawShard) {
			r.regions[2].rawDesc = []byte{0, 0, 0, 0, 0, 0, 0, 0}
		}), err: "bad region table"},
		{file: "v2-subarray-bad-order.shard", raw: v2(func(r *rawShard) { d := r.regions[2].desc(); d[4] = 2; r.regions[2].rawDesc = d }), err: "bad region table"},
		{file: "v2-replicated-with-desc.shard", raw: v2(func(r *rawShard) { r.regions[3].rawDesc = make([]byte, 16) }), err: "bad region table"},
		{file: "v2-desc-bytes-unused.shard", raw: v2(func(r *rawShard) { r.descPad = make([]byte, 8) }), err: "bad region table"},
		{file: "v2-desc-size-wrong.shard", raw: v2(func(r *rawShard) { r.descAdjust = 8 }), err: "bad header"},
		{file: "v2-reserved-set.shard", raw: v2(func(r *rawShard) { r.reserved1 = 1 }), err: "bad header"},
		{file: "valid-v3-abi.shard", raw: v3()},
		{file: "v3-reserved-set.shard", raw: v3With(func(r *rawShard) { r.reserved1 = 1 }), err: "bad header"},
		{file: "v3-unknown-flag.shard", raw: v3With(func(r *rawShard) { r.regions[0].Flags = 4 }), err: "bad region table"},
		{file: "v3-unknown-kind.shard", raw: v3With(func(r *rawShard) { r.regions[3].rawKind = u16(4) }), err: "bad region table"},
		{file: "abi-amd64.shard", written: "amd64", raw: abiShard("amd64")},
		{file: "abi-arm64.shard", written: "arm64", raw: abiShard("arm64")},
	}
}

// v3 is the kinds() shard in version 3, written on arm64, with two regions of derived
// datatypes: one holding long double, one with holes.
func v3() rawShard {
	r := kinds()
	r.version, r.isa, r.longDouble = 3, 2, 2
	r.regions = append(r.regions,
		vectorRegion{ID: 5, ElemSize: 32, Count: 1, Kind: "plain", Flags: FlagLongDouble,
			PayloadHex: "0000000000000000000000000000ff3f" + "00000000000000000000000000000040"},
		vectorRegion{ID: 6, ElemSize: 16, Count: 1, Kind: "replicated", Flags: FlagABIBound,
			PayloadHex: "01000000000000000000000000000000"})
	return r
}

// v3With is the v3() shard, changed by f.
func v3With(f func(*rawShard)) rawShard { r := v3(); f(&r); return r }

// v2 is the kinds() shard, changed by f.
func v2(f func(*rawShard)) rawShard { r := kinds(); f(&r); return r }

func (c vectorCase) shard() []byte {
	if c.written != "" {
		b, err := os.ReadFile(filepath.Join(vectorDir, c.file))
		if err != nil {
			panic(fmt.Sprintf("%s, written on %s by scripts/abi-shards.sh: %v", c.file, c.written, err))
		}
		return b
	}
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
	v := vector{File: c.file, OK: true, Version: c.raw.version, ISA: c.raw.isa, LongDouble: c.raw.longDouble}
	{
		b := c.shard()
		v.Job, v.Epoch, v.Rank, v.NRanks, v.CreatedNs = c.raw.job, c.raw.epoch, c.raw.rank, c.raw.nranks, c.raw.created
		if c.written != "" {
			v.CreatedNs = binary.LittleEndian.Uint64(b[112:])
		}
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
		if c.written != "" {
			// Committed as written; raw states what it must hold.
		} else if err := os.WriteFile(filepath.Join(vectorDir, c.file), c.shard(), 0o644); err != nil {
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
		if c.written != "" {
			if got := c.raw.bytes(); !writtenAsDefined(b, got) {
				t.Errorf("%s: the shard written on %s differs from its definition beyond created_ns and the checksum", v.File, c.written)
			}
		} else if !bytes.Equal(b, c.shard()) {
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
		if s.ABI != (ABI{ISA: v.ISA, LongDouble: v.LongDouble}) {
			t.Errorf("%s: ABI = %+v, want isa %d long double %d", v.File, s.ABI, v.ISA, v.LongDouble)
		}
		if s.Job != v.Job || s.Epoch != v.Epoch || s.Rank != v.Rank || s.NRanks != v.NRanks || s.CreatedNs != v.CreatedNs || s.Version != v.Version {
			t.Errorf("%s: header = %+v, want version %d job %q epoch %d rank %d/%d created %d", v.File, s.Header, v.Version, v.Job, v.Epoch, v.Rank, v.NRanks, v.CreatedNs)
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
			if got, want := describe(g), describeVector(r); got != want {
				t.Errorf("%s region %d: got %s, want %s", v.File, j, got, want)
			}
			regions[j] = g
		}
		var perRank []int32
		for _, r := range v.Regions {
			if r.Kind == "plain" {
				perRank = append(perRank, r.ID)
			}
		}
		if got := s.PerRank(); fmt.Sprint(got) != fmt.Sprint(perRank) {
			t.Errorf("%s: PerRank() = %v, want %v", v.File, got, perRank)
		}
		// Encoding the parsed shard again must give the same bytes.
		again, err := Encode(s.Header, regions)
		if err != nil || !bytes.Equal(again, b) {
			t.Errorf("%s: Encode(Parse(b)) differs from b (err %v)", v.File, err)
		}
	}
}

// describe and describeVector put a parsed region's layout and a vector's in words,
// to compare them.
func describe(r Region) string {
	s := fmt.Sprintf("%s datatype %d flags %d", r.Kind, r.Datatype, r.Flags)
	switch r.Kind {
	case KindBlock:
		s += fmt.Sprintf(" global %d offset %d", r.Block.Global, r.Block.Offset)
	case KindSubarray:
		order := map[Order]string{OrderC: "C", OrderFortran: "Fortran"}[r.Subarray.Order]
		s += fmt.Sprintf(" order %s sizes %v subsizes %v starts %v", order, r.Subarray.Sizes, r.Subarray.Subsizes, r.Subarray.Starts)
	}
	return s
}

func describeVector(g vectorRegion) string {
	s := fmt.Sprintf("%s datatype %d flags %d", g.Kind, g.Datatype, g.Flags)
	switch g.Kind {
	case "block":
		s += fmt.Sprintf(" global %d offset %d", *g.Global, *g.Offset)
	case "subarray":
		s += fmt.Sprintf(" order %s sizes %v subsizes %v starts %v", g.Order, g.Sizes, g.Subsizes, g.Starts)
	}
	return s
}
