package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestUsesLibshoal(t *testing.T) {
	root := filepath.Join("..", "..")
	tests := []struct {
		rel         string
		uses, known bool
	}{
		{"build/examples/heat", true, true},
		{"build/examples/fortran/heat", true, true},
		{"build/examples/heat-plain", false, true},
		{"build/venv/bin/python", false, false}, // the script decides
		{"examples/python/heat.py", false, false},
	}
	for _, tt := range tests {
		p := filepath.Join(root, tt.rel)
		if _, err := os.Stat(p); err != nil {
			if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
				t.Fatalf("%s missing: make build did not produce it", tt.rel)
			}
			t.Logf("skipping %s: not built", tt.rel)
			continue
		}
		uses, known := usesLibshoal(p)
		if uses != tt.uses || known != tt.known {
			t.Errorf("usesLibshoal(%s) = %v, %v; want %v, %v", tt.rel, uses, known, tt.uses, tt.known)
		}
	}
}
