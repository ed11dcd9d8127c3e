package erasure

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func validHeader() Header {
	return Header{Job: "heat", Epoch: 3, Group: 1, Index: 1, K: 2, M: 2, Stripe: 500,
		Data: []Member{{Rank: 0, Bytes: 300, Sum: 1}, {Rank: 5, Bytes: 500, Sum: 2}}}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(h *Header)
		field string // "": valid
	}{
		{"valid", func(h *Header) {}, ""},
		{"longest job", func(h *Header) { h.Job = strings.Repeat("j", 63) }, ""},
		{"UTF-8 job", func(h *Header) { h.Job = "wärme-μ" }, ""},
		{"256 pieces", func(h *Header) { h.M = 254 }, ""},
		{"empty job", func(h *Header) { h.Job = "" }, "Job"},
		{"long job", func(h *Header) { h.Job = strings.Repeat("j", 64) }, "Job"},
		{"job with NUL", func(h *Header) { h.Job = "he\x00at" }, "Job"},
		{"job not UTF-8", func(h *Header) { h.Job = "he\xffat" }, "Job"},
		{"epoch 0", func(h *Header) { h.Epoch = 0 }, "Epoch"},
		{"negative group", func(h *Header) { h.Group = -1 }, "Group"},
		{"group past u32", func(h *Header) { h.Group = 1 << 32 }, "Group"},
		{"M 0", func(h *Header) { h.M = 0; h.Index = 0 }, "M 0"},
		{"K 0", func(h *Header) { h.K = 0 }, "K 0"},
		{"257 pieces", func(h *Header) { h.M = 255 }, "K 2, M 255"},
		{"index M", func(h *Header) { h.Index = 2 }, "Index"},
		{"negative index", func(h *Header) { h.Index = -1 }, "Index"},
		{"K not members", func(h *Header) { h.K = 3 }, "Data"},
		{"negative rank", func(h *Header) { h.Data[0].Rank = -1 }, "Data[0].Rank"},
		{"ranks equal", func(h *Header) { h.Data[1].Rank = 0 }, "Data[1].Rank"},
		{"ranks decreasing", func(h *Header) { h.Data[0].Rank = 6 }, "Data[1].Rank"},
		{"shard too short", func(h *Header) { h.Data[0].Bytes = 135 }, "Data[0].Bytes"},
		{"stripe too short", func(h *Header) { h.Stripe = 499 }, "Stripe"},
		{"stripe too long", func(h *Header) { h.Stripe = 501 }, "Stripe"},
		{"file too large", func(h *Header) { h.Data[1].Bytes = 1<<63 - 1; h.Stripe = h.Data[1].Bytes }, "Stripe"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := validHeader()
			h.Data = append([]Member(nil), h.Data...)
			c.edit(&h)
			err := h.Validate()
			switch {
			case c.field == "" && err != nil:
				t.Fatalf("Validate: got %v, want nil", err)
			case c.field != "" && (!errors.Is(err, ErrBadHeader) || !strings.Contains(err.Error(), c.field)):
				t.Fatalf("Validate: got %v, want %v naming %s", err, ErrBadHeader, c.field)
			}
		})
	}
}

func TestSameGroup(t *testing.T) {
	cases := []struct {
		name string
		edit func(h *Header)
		want bool
	}{
		{"same", func(h *Header) {}, true},
		{"other row", func(h *Header) { h.Index = 0 }, true},
		{"job", func(h *Header) { h.Job = "cool" }, false},
		{"epoch", func(h *Header) { h.Epoch++ }, false},
		{"group", func(h *Header) { h.Group++ }, false},
		{"K", func(h *Header) { h.K++ }, false},
		{"M", func(h *Header) { h.M++ }, false},
		{"stripe", func(h *Header) { h.Stripe++ }, false},
		{"rank", func(h *Header) { h.Data[1].Rank++ }, false},
		{"bytes", func(h *Header) { h.Data[0].Bytes++ }, false},
		{"sum", func(h *Header) { h.Data[0].Sum++ }, false},
		{"members", func(h *Header) { h.Data = h.Data[:1] }, false},
	}
	for _, c := range cases {
		o := validHeader()
		c.edit(&o)
		if got := validHeader().SameGroup(o); got != c.want {
			t.Errorf("%s: SameGroup got %v, want %v", c.name, got, c.want)
		}
	}
}

// smallParity returns a valid parity file of a small group and its header.
func smallParity(t *testing.T) ([]byte, Header) {
	g := newFakeGroup(t, rand.New(rand.NewPCG(21, 22)), 2, []int{140, 200})
	return g.parity[1], g.row(1)
}

func TestVerify(t *testing.T) {
	file, want := smallParity(t)
	got, err := Verify(bytes.NewReader(file), int64(len(file)))
	if err != nil {
		t.Fatalf("Verify of a valid file: %v", err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Verify: got %+v, want %+v", got, want)
	}
	if size := want.Size(); size != int64(len(file)) || size != 128+24*2+200+8 {
		t.Fatalf("Size: got %d, file has %d bytes", size, len(file))
	}
}

func TestVerifyFlippedBit(t *testing.T) {
	file, _ := smallParity(t)
	for i := range file {
		want := ErrChecksum
		switch {
		case i < 8:
			want = ErrBadMagic
		case i < 12:
			want = ErrVersion
		}
		for bit := range 8 {
			b := bytes.Clone(file)
			b[i] ^= 1 << bit
			if _, err := Verify(bytes.NewReader(b), int64(len(b))); !errors.Is(err, want) {
				t.Fatalf("bit %d of byte %d flipped: got %v, want %v", bit, i, err, want)
			}
		}
	}
}

func TestVerifyTruncated(t *testing.T) {
	file, _ := smallParity(t)
	for n := range len(file) {
		want := ErrChecksum // the last 8 bytes are no longer the checksum
		if n < 136 {
			want = ErrTruncated
		}
		if _, err := Verify(bytes.NewReader(file[:n]), int64(n)); !errors.Is(err, want) {
			t.Fatalf("first %d of %d bytes: got %v, want %v", n, len(file), err, want)
		}
	}
}

// TestVerifyBadHeader edits fields and fixes the checksum: a file written wrong, not
// damaged.
func TestVerifyBadHeader(t *testing.T) {
	file, _ := smallParity(t) // k 2, m 2, index 1; members of 140 and 200 bytes
	le := binary.LittleEndian
	const table = 128
	cases := []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{"version 2", func(b []byte) []byte { le.PutUint32(b[8:], 2); return b }, ErrVersion},
		{"header_size", func(b []byte) []byte { le.PutUint32(b[12:], 128); return b }, ErrBadHeader},
		{"epoch 0", func(b []byte) []byte { le.PutUint64(b[16:], 0); return b }, ErrBadHeader},
		{"index m", func(b []byte) []byte { le.PutUint16(b[28:], 2); return b }, ErrBadHeader},
		{"k 0", func(b []byte) []byte { le.PutUint16(b[30:], 0); le.PutUint32(b[12:], 128); return b }, ErrBadHeader},
		{"k 3", func(b []byte) []byte { le.PutUint16(b[30:], 3); le.PutUint32(b[12:], 128+72); return b }, ErrBadHeader},
		{"m 0", func(b []byte) []byte { le.PutUint16(b[32:], 0); return b }, ErrBadHeader},
		{"k+m 257", func(b []byte) []byte { le.PutUint16(b[32:], 255); return b }, ErrBadHeader},
		{"reserved at 34", func(b []byte) []byte { b[34] = 1; return b }, ErrBadHeader},
		{"reserved at 36", func(b []byte) []byte { b[39] = 1; return b }, ErrBadHeader},
		{"reserved at 112", func(b []byte) []byte { b[127] = 1; return b }, ErrBadHeader},
		{"stripe not the longest", func(b []byte) []byte { le.PutUint64(b[40:], 199); return b }, ErrBadHeader},
		{"stripe huge", func(b []byte) []byte { le.PutUint64(b[40:], 1<<63); return b }, ErrBadHeader},
		{"job empty", func(b []byte) []byte { clear(b[48:112]); return b }, ErrBadHeader},
		{"job without NUL", func(b []byte) []byte { copy(b[48:112], strings.Repeat("j", 64)); return b }, ErrBadHeader},
		{"job not UTF-8", func(b []byte) []byte { b[49] = 0xff; return b }, ErrBadHeader},
		{"job byte after NUL", func(b []byte) []byte { b[111] = 'x'; return b }, ErrBadHeader},
		{"member reserved", func(b []byte) []byte { b[table+4] = 1; return b }, ErrBadHeader},
		{"ranks not increasing", func(b []byte) []byte { le.PutUint32(b[table:], 4); return b }, ErrBadHeader},
		{"member below a shard", func(b []byte) []byte { le.PutUint64(b[table+8:], 135); return b }, ErrBadHeader},
		{"member past the stripe", func(b []byte) []byte { le.PutUint64(b[table+8:], 201); return b }, ErrBadHeader},
		{"file one byte longer", func(b []byte) []byte { return append(b[:len(b)-8:len(b)-8], 0, 1, 2, 3, 4, 5, 6, 7, 8) }, ErrBadHeader},
		{"file one byte shorter", func(b []byte) []byte { return append(b[:len(b)-10:len(b)-10], 1, 2, 3, 4, 5, 6, 7, 8) }, ErrBadHeader},
		{"table past the end", func(b []byte) []byte { return append(b[:140:140], 1, 2, 3, 4, 5, 6, 7, 8) }, ErrBadHeader},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.edit(bytes.Clone(file))
			fixSum(b)
			if _, err := Verify(bytes.NewReader(b), int64(len(b))); !errors.Is(err, c.want) {
				t.Fatalf("Verify: got %v, want %v", err, c.want)
			}
		})
	}
}

func TestReadHeader(t *testing.T) {
	file, want := smallParity(t)
	r := bytes.NewReader(file)
	got, err := ReadHeader(r)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadHeader: got %+v, %v, want %+v", got, err, want)
	}
	if rest := int64(r.Len()); rest != want.Stripe+8 {
		t.Fatalf("ReadHeader left %d bytes, want the %d of payload and checksum", rest, want.Stripe+8)
	}
	for n := range 128 + 24*2 {
		if _, err := ReadHeader(bytes.NewReader(file[:n])); !errors.Is(err, ErrTruncated) {
			t.Fatalf("first %d bytes of the header: got %v, want %v", n, err, ErrTruncated)
		}
	}
	if _, err := ReadHeader(io.MultiReader(bytes.NewReader(file[:100]), errReader{})); !errors.Is(err, errDisk) {
		t.Fatalf("read error: got %v, want %v", err, errDisk)
	}
}

func TestErrCorrupt(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{ErrTruncated, true},
		{ErrBadMagic, true},
		{ErrVersion, true},
		{ErrChecksum, true},
		{ErrBadHeader, true},
		{ErrWrongGroup, true},
		{ErrMismatch, true},
		{ErrTooFewPieces, false},
		{io.ErrUnexpectedEOF, false},
	}
	for _, c := range cases {
		wrapped := fmt.Errorf("parity row 1: %w", c.err)
		if got := errors.Is(wrapped, ErrCorrupt); got != c.want {
			t.Errorf("errors.Is(%v, ErrCorrupt): got %v, want %v", wrapped, got, c.want)
		}
		if !errors.Is(wrapped, c.err) {
			t.Errorf("errors.Is(%v, %v): got false", wrapped, c.err)
		}
	}
	if errors.Is(ErrChecksum, ErrTruncated) {
		t.Errorf("errors.Is(ErrChecksum, ErrTruncated): got true")
	}
}
