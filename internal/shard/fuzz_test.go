package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/zeebo/xxh3"
)

// FuzzParse checks that Parse never panics on arbitrary bytes and that every shard it
// accepts encodes back to the same bytes.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(vectorDir, "*.shard"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		checkVerifyAgrees(t, "input", b, s, err)
		if err != nil {
			return
		}
		again, err := Encode(s.Header, s.Regions)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted shard does not encode back (err %v)", err)
		}
	})
}

// FuzzParseSealed mutates shards and then writes the right checksum again, so that
// the checks behind the checksum (header, job id, region table) are what the fuzzer
// explores, not the checksum that would stop almost every mutation. Parse must never
// panic, and a shard it accepts must encode back to the same bytes.
func FuzzParseSealed(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join(vectorDir, "*.shard"))
	for _, name := range files {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) >= HeaderSize+TrailerSize {
			binary.LittleEndian.PutUint64(b[len(b)-TrailerSize:], xxh3.Hash(b[:len(b)-TrailerSize]))
		}
		s, err := Parse(b)
		checkVerifyAgrees(t, "input", b, s, err)
		if err != nil {
			if len(b) >= HeaderSize+TrailerSize && string(b[:8]) == Magic && errors.Is(err, ErrChecksum) {
				t.Fatalf("a sealed shard failed its checksum: %v", err)
			}
			return
		}
		if !utf8.ValidString(s.Job) || s.Job == "" || strings.IndexByte(s.Job, 0) >= 0 {
			t.Fatalf("accepted job id %q", s.Job)
		}
		again, err := Encode(s.Header, s.Regions)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted shard does not encode back (err %v)", err)
		}
	})
}

// checkVerifyAgrees checks that Verify, reading b as a stream, reaches Parse's
// verdict on it: the same failure, or the same header and checksum; and that a
// valid shard's stream ending a byte early is a truncated shard.
func checkVerifyAgrees(t *testing.T, name string, b []byte, s *Shard, parseErr error) {
	t.Helper()
	h, sum, err := Verify(bytes.NewReader(b), int64(len(b)))
	if ShortName(err) != ShortName(parseErr) || (err == nil) != (parseErr == nil) {
		t.Errorf("%s: Verify error = %v, Parse error = %v", name, err, parseErr)
		return
	}
	if err == nil && (h != s.Header || sum != s.Checksum) {
		t.Errorf("%s: Verify = %+v %#016x, Parse = %+v %#016x", name, h, sum, s.Header, s.Checksum)
	}
	// A Verifier written b in pieces of any size reaches the same verdict.
	// So does one told the size in advance.
	for _, piece := range []int{1, 3, TrailerSize - 1, TrailerSize, TrailerSize + 1, 4096, len(b) + 1} {
		for _, size := range []int64{-1, int64(len(b))} {
			v := NewVerifier(size)
			for rest := b; len(rest) > 0; {
				k := min(piece, len(rest))
				v.Write(rest[:k])
				rest = rest[k:]
			}
			vh, vsum, verr := v.Sum()
			if ShortName(verr) != ShortName(err) || (verr == nil) != (err == nil) || vh != h || vsum != sum {
				t.Errorf("%s: Verifier (size %d) in pieces of %d = %+v %#016x %v, Verify = %+v %#016x %v", name, size, piece, vh, vsum, verr, h, sum, err)
			}
			if int64(len(v.head)) > max(int64(len(b))-TrailerSize, HeaderSize) && size >= 0 {
				t.Errorf("%s: Verifier of a known size held %d bytes of header and table, more than the shard's %d", name, len(v.head), len(b))
			}
		}
	}
	if len(b) > 0 {
		for _, size := range []int64{int64(len(b)) - 1, int64(len(b)) + 1} {
			v := NewVerifier(size)
			v.Write(b)
			if _, _, err := v.Sum(); !errors.Is(err, ErrTruncated) {
				t.Errorf("%s: Verifier of %d bytes told %d = %v, want %v", name, len(b), size, err, ErrTruncated)
			}
		}
	}
	if parseErr == nil {
		if _, _, err := Verify(bytes.NewReader(b[:len(b)-1]), int64(len(b))); !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: Verify of a stream one byte short = %v, want %v", name, err, ErrTruncated)
		}
	}
	// ReadHeader checks all but the checksum: where Verify finds only a mismatch,
	// the layout may still be whole or not.
	rh, rerr := ReadHeader(bytes.NewReader(b), int64(len(b)))
	switch {
	case errors.Is(err, ErrChecksum):
		if rerr != nil && !errors.Is(rerr, ErrBadHeader) && !errors.Is(rerr, ErrRegionTable) {
			t.Errorf("%s: ReadHeader of a shard failing only its checksum = %v", name, rerr)
		}
	case ShortName(rerr) != ShortName(err) || (rerr == nil) != (err == nil):
		t.Errorf("%s: ReadHeader error = %v, Verify error = %v", name, rerr, err)
	case err == nil && rh != h:
		t.Errorf("%s: ReadHeader = %+v, Verify = %+v", name, rh, h)
	}
}
