package files

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
		if err := c.Place(job, "", s); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(filepath.Join(job, "bin/prog"))
	if err != nil || st.Mode().Perm() != 0o755 {
		t.Fatalf("placed file: %v, mode %v", err, st.Mode())
	}
	if err := c.Place(job, "", Stage{Name: "x", Sum: sum("zzz"), Mode: 0o644}); !errors.Is(err, ErrNotCached) {
		t.Errorf("Place of an uncached file: %v, want ErrNotCached", err)
	}
}

func TestParseStage(t *testing.T) {
	for _, good := range []Stage{{Name: "heat", Sum: sum("x"), Mode: 0o755}, {Name: "heat", Sum: sum("x"), Mode: 0o755, Arch: "arm64"}} {
		got, err := ParseStage(good.String())
		if err != nil || got != good {
			t.Fatalf("ParseStage(%q) = %+v, %v", good.String(), got, err)
		}
	}
	if got := (Stage{Name: "heat", Sum: sum("x"), Mode: 0o755, Arch: "arm64"}).String(); got != "heat="+sum("x")+":755:arm64" {
		t.Errorf("String() = %q", got)
	}
	for _, bad := range []string{"", "heat", "heat=abc:755", "/abs=" + sum("x") + ":644", "../up=" + sum("x") + ":644", "a=" + sum("x") + ":9z", "a=" + sum("x") + ":755:ARM", "a=" + sum("x") + ":755:arm 64"} {
		if _, err := ParseStage(bad); !errors.Is(err, ErrBadStage) {
			t.Errorf("ParseStage(%q) = %v, want ErrBadStage", bad, err)
		}
	}
}

// TestCacheUseListRemove: Use marks a cached file used now, List reports it
// with that time and skips files being written, and Remove deletes it.
func TestCacheUseListRemove(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	if got, err := c.List(); err != nil || len(got) != 0 {
		t.Fatalf("List of an empty cache: %v, %v", got, err)
	}
	if c.Use(sum("abc")) {
		t.Fatal("Use of a file not cached: true")
	}
	if err := c.Put(sum("abc"), strings.NewReader("abc")); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(c.Path(sum("abc")), old, old); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.Dir, ".put-123"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := c.List()
	if err != nil || len(got) != 1 || got[0].Sum != sum("abc") || got[0].Size != 3 || got[0].Used.After(old.Add(time.Second)) {
		t.Fatalf("List() = %+v, %v; want abc, 3 bytes, used an hour ago", got, err)
	}
	if !c.Use(sum("abc")) {
		t.Fatal("Use of a cached file: false")
	}
	if got, _ := c.List(); len(got) != 1 || time.Since(got[0].Used) > time.Minute {
		t.Fatalf("after Use: %+v, want used now", got)
	}
	if err := c.Remove(sum("abc")); err != nil || c.Has(sum("abc")) {
		t.Fatalf("Remove: %v, still there %v", err, c.Has(sum("abc")))
	}
	if err := c.Remove(sum("abc")); err != nil {
		t.Errorf("Remove of a file not there: %v", err)
	}
	if err := c.Remove("../x"); err == nil {
		t.Error("Remove(\"../x\"): no error")
	}
}

// TestPlaceStamps: a placed file is hashed once after it was copied, then known
// by its stamp, and any change to it (even one that keeps its size and puts its
// modification time back) is found and undone.
func TestPlaceStamps(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	if err := c.Put(sum("abc"), strings.NewReader("abc")); err != nil {
		t.Fatal(err)
	}
	hashes := 0
	hashMatches = func(path, s string) bool { hashes++; return sameContent(path, s) }
	t.Cleanup(func() { hashMatches, clock = sameContent, time.Now })
	job, stamps := t.TempDir(), filepath.Join(t.TempDir(), "staged")
	s := Stage{Name: "in/data", Sum: sum("abc"), Mode: 0o644}
	dst := filepath.Join(job, "in/data")
	// sameTick sets the clock to the placed file's ctime: the tick it changed in.
	sameTick := func() {
		t.Helper()
		st, err := os.Stat(dst)
		if err != nil {
			t.Fatal(err)
		}
		rec, _ := stampOf(s.Sum, st)
		clock = func() time.Time { return time.Unix(0, rec.ctime) }
	}
	later := func() { clock = func() time.Time { return time.Now().Add(time.Second) } }
	place := func(wantHashes int, what string) {
		t.Helper()
		hashes = 0
		if err := c.Place(job, stamps, s); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if b, err := os.ReadFile(dst); err != nil || string(b) != "abc" {
			t.Fatalf("%s: placed file holds %q, %v", what, b, err)
		}
		if hashes != wantHashes {
			t.Fatalf("%s: %d hashes, want %d", what, hashes, wantHashes)
		}
	}
	place(0, "first place (a copy)")
	sameTick()
	place(1, "in the tick of the copy (hashed, not stamped)")
	place(1, "again in that tick")
	later()
	place(1, "a tick later (hashed and stamped)")
	place(0, "stamped")
	place(0, "stamped, again")

	// Same size, other content, modification time put back: the ctime moved.
	st, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * clockTick)
	if err := os.WriteFile(dst, []byte("xyz"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(dst, st.ModTime(), st.ModTime()); err != nil {
		t.Fatal(err)
	}
	place(1, "after a change (hashed, found different, copied again)")
	sameTick()
	place(1, "in the tick of the new copy")
	later()
	place(1, "a tick later")
	place(0, "stamped anew")

	// A damaged stamp vouches for nothing.
	if err := os.WriteFile(stampPath(stamps, s.Name), []byte("junk\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	place(1, "with a junk stamp")
	place(0, "stamped again")
	// Without a stamps directory every Place hashes.
	hashes = 0
	for i := 0; i < 2; i++ {
		if err := c.Place(job, "", s); err != nil {
			t.Fatal(err)
		}
	}
	if hashes != 2 {
		t.Errorf("without stamps: %d hashes in 2 places, want 2", hashes)
	}
}
