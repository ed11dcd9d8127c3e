package ckpt

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
