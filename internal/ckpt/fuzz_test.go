package ckpt

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
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
