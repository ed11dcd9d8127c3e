package files

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestCachePutAndPlace(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	if err := c.Put(sum("abc"), strings.NewReader("abd")); !errors.Is(err, ErrHashMismatch) {
		t.Fatalf("Put with wrong content: %v, want ErrHashMismatch", err)
	}
	if c.Has(sum("abc")) {
		t.Fatal("a mismatching upload was stored")
	}
	if err := c.Put(sum("abc"), strings.NewReader("abc")); err != nil {
		t.Fatal(err)
	}
	job := t.TempDir()
	s := Stage{Name: "bin/prog", Sum: sum("abc"), Mode: 0o755}
	for i := 0; i < 2; i++ { // the second time finds it in place
		if err := c.Place(job, s); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(filepath.Join(job, "bin/prog"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("placed file: %v, mode %v", err, st.Mode())
	}
	if err := c.Place(job, Stage{Name: "x", Sum: sum("zzz"), Mode: 0o644}); !errors.Is(err, ErrNotCached) {
		t.Errorf("Place of an uncached file: %v, want ErrNotCached", err)
	}
}

func TestParseStage(t *testing.T) {
	good := Stage{Name: "heat", Sum: sum("x"), Mode: 0o755}
	got, err := ParseStage(good.String())
	if err != nil || got != good {
		t.Fatalf("ParseStage(%q) = %+v, %v", good.String(), got, err)
	}
	for _, bad := range []string{"", "heat", "heat=abc:755", "/abs=" + sum("x") + ":644", "../up=" + sum("x") + ":644", "a=" + sum("x") + ":9z"} {
		if _, err := ParseStage(bad); !errors.Is(err, ErrBadStage) {
			t.Errorf("ParseStage(%q) = %v, want ErrBadStage", bad, err)
		}
	}
}
