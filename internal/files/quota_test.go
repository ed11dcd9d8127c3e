package files

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"
)

// TestRoom: an upload is given its size, or all that is left when its size
// is unknown, if that fits beside what the user has and is uploading.
func TestRoom(t *testing.T) {
	tests := []struct {
		quota, used, held, size int64
		want                    int64
		err                     error
	}{
		{100, 0, 0, 100, 100, nil},
		{100, 60, 0, 40, 40, nil},
		{100, 60, 0, 41, 0, ErrOverQuota},
		{100, 40, 20, 40, 40, nil},
		{100, 40, 20, 41, 0, ErrOverQuota},
		{100, 0, 0, 101, 0, ErrLargerThanQuota},
		{100, 90, 0, 101, 0, ErrLargerThanQuota},
		{100, 30, 20, -1, 50, nil},
		{100, 80, 20, -1, 0, ErrOverQuota},
		{100, 120, 0, 0, 0, ErrOverQuota}, // over already (the quota was lowered)
		{100, 100, 0, 0, 0, nil},
	}
	for _, tt := range tests {
		got, err := room(tt.quota, tt.used, tt.held, tt.size)
		if got != tt.want || !errors.Is(err, tt.err) || (err == nil) != (tt.err == nil) {
			t.Errorf("room(quota %d, used %d, held %d, size %d) = %d, %v; want %d, %v", tt.quota, tt.used, tt.held, tt.size, got, err, tt.want, tt.err)
		}
	}
}

// put uploads content as uid through q, as the agent does.
func put(q *Quota, uid int, content string, size int64) error {
	return q.Put(uid, sum(content), size, strings.NewReader(content), func(r io.Reader) error {
		return q.Cache.Put(sum(content), r)
	})
}

// TestQuota: a user's files count while they are cached, once each; the
// upload that would pass the quota is refused, with a message naming the
// quota and the use, and stores nothing; the count survives a new Quota on
// the same record, and forgets what retention removed.
func TestQuota(t *testing.T) {
	dir := t.TempDir()
	cache := Cache{Dir: filepath.Join(dir, "files")}
	q := &Quota{Cache: cache, Dir: filepath.Join(dir, "uploads"), Bytes: 10}
	const alice, bob = 1001, 1002
	used := func(q *Quota, uid int) int64 {
		t.Helper()
		n, err := q.Used(uid)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []string{"aaaa", "bbbb", "aaaa"} {
		if err := put(q, alice, c, int64(len(c))); err != nil {
			t.Fatalf("alice puts %q: %v", c, err)
		}
	}
	if got := used(q, alice); got != 8 {
		t.Fatalf("alice's use after aaaa, bbbb and aaaa again: %d bytes, want 8", got)
	}
	err := put(q, alice, "ccc", 3)
	var qe *QuotaError
	if !errors.Is(err, ErrOverQuota) || !errors.As(err, &qe) || qe.Used != 8 || qe.Quota != 10 {
		t.Fatalf("alice's 3 bytes more: %v, want over the quota with 8 used of 10", err)
	}
	if want := "files: uid 1001 has 8 B of files in this node's cache (uploads in progress included) and a quota of 10 B: no room for a file of 3 B"; err.Error() != want {
		t.Errorf("refusal: got %q, want %q", err, want)
	}
	if cache.Has(sum("ccc")) {
		t.Error("the refused file was stored")
	}
	if err := put(q, alice, "ccc", -1); !errors.Is(err, ErrOverQuota) || !strings.Contains(err.Error(), "passed the 2 B left") {
		t.Errorf("alice's 3 bytes more of unknown size: %v, want cut over the quota", err)
	}
	if cache.Has(sum("ccc")) {
		t.Error("the upload cut at the quota was stored")
	}
	if err := put(q, bob, strings.Repeat("x", 11), 11); !errors.Is(err, ErrLargerThanQuota) || !strings.Contains(err.Error(), "a file of 11 B is larger than the quota of 10 B") {
		t.Errorf("bob's file of 11 bytes: %v, want larger than the quota", err)
	}
	err = q.Put(bob, sum("bbbb"), 4, iotest.ErrReader(errors.New("read")), func(r io.Reader) error {
		return q.Cache.Put(sum("bbbb"), r)
	})
	if err != nil {
		t.Errorf("bob uploads alice's bbbb, already cached: %v, want done without reading it", err)
	}
	if got := used(q, bob); got != 0 {
		t.Errorf("bob's use: %d, want 0 (alice's files are hers, and cost him nothing)", got)
	}

	// Room given and not yet used counts; given back, it is free again.
	u, err := q.take(alice, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.take(alice, 1); !errors.Is(err, ErrOverQuota) {
		t.Errorf("1 byte beside an upload of 2 in progress: %v, want over the quota", err)
	}
	u.done("", false)
	if u, err = q.take(alice, 2); err != nil {
		t.Errorf("2 bytes once the upload in progress gave up: %v", err)
	}
	u.done("", false)

	again := &Quota{Cache: cache, Dir: q.Dir, Bytes: 10}
	if got := used(again, alice); got != 8 {
		t.Errorf("alice's use counted anew from the record: %d, want 8", got)
	}
	if err := cache.Remove(sum("aaaa")); err != nil {
		t.Fatal(err)
	}
	if got := used(again, alice); got != 4 {
		t.Errorf("alice's use once retention removed aaaa: %d, want 4", got)
	}
	if _, err := os.Stat(filepath.Join(q.Dir, "1001", sum("aaaa"))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the record of a removed file is kept: %v", err)
	}
	if st, err := os.Stat(q.Dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the record's directory: %v, %v; want mode 0700", st.Mode(), err)
	}
}

func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"4096", 4096, true},
		{"0", 0, true},
		{"10G", 10 << 30, true},
		{"10GiB", 10 << 30, true},
		{"512M", 512 << 20, true},
		{"1T", 1 << 40, true},
		{"3K", 3 << 10, true},
		{"", 0, false},
		{"G", 0, false},
		{"10GB", 0, false},
		{"1.5G", 0, false},
		{"-1", 0, false},
		{"10 G", 0, false},
		{"9000000000T", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseBytes(tt.in)
		if got != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParseBytes(%q) = %d, %v; want %d, ok %v", tt.in, got, err, tt.want, tt.ok)
		}
	}
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1 KiB", 1536: "1.5 KiB", 10 << 30: "10 GiB", 9_663_676_416: "9 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
