package shardstore

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"shoal/internal/jobdir"
)

// TestUsersLinksNotFollowed: the directory of a user's job is the user's to
// change. Every entry the store writes, replaces, links, removes or reads there
// is planted as a symbolic link to a file outside, or as a FIFO, and the store's
// operations that meet it must leave the file outside as it was, and never hang.
func TestUsersLinksNotFollowed(t *testing.T) {
	top := t.TempDir()
	s := New(filepath.Join(top, "ckpt"))
	victim := filepath.Join(top, "victim")
	victimDir := filepath.Join(top, "victim-dir")
	want := []byte("not the job's\n")
	if err := os.WriteFile(victim, want, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(victimDir, 0o700); err != nil {
		t.Fatal(err)
	}
	untouched := func(when string) {
		t.Helper()
		if b, err := os.ReadFile(victim); err != nil || !bytes.Equal(b, want) {
			t.Errorf("%s: the file outside holds %d bytes beginning %.16q (%v), want it untouched", when, len(b), b, err)
		}
		if st, err := os.Stat(victim); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: the file outside changed mode: %v", when, err)
		}
		if ents, _ := os.ReadDir(victimDir); len(ents) != 0 {
			t.Errorf("%s: the directory outside holds %v, want nothing", when, ents)
		}
	}
	jd := s.jobDir("heat")
	link := func(target, path string) {
		t.Helper()
		os.RemoveAll(path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
	}
	put := func(epoch uint64) error {
		b := makeShard(t, "heat", epoch, 0, 1, 5000)
		_, err := s.Put(ref(epoch, 0), bytes.NewReader(b), int64(len(b)))
		return err
	}

	// An epoch directory that is a link: a copy into it is refused.
	link(victimDir, jd.EpochPath(1))
	if err := put(1); err == nil {
		t.Errorf("Put into an epoch directory that is a link: no error")
	}
	untouched("Put into a linked epoch")
	if idx, err := s.Index("heat"); err != nil || len(idx.Shards)+len(idx.Bad) != 0 {
		t.Errorf("Index with a linked epoch = %+v, %v; want nothing listed", idx, err)
	}
	if err := s.RemoveEpoch("heat", 1); err != nil {
		t.Errorf("RemoveEpoch of a linked epoch: %v", err)
	}
	untouched("RemoveEpoch of a linked epoch")

	// A spare that is a link: the next shard of its rank is not written
	// through it, but into a new file.
	link(victim, jd.SparePath(0))
	if err := put(2); err != nil {
		t.Errorf("Put beside a spare that is a link: %v", err)
	}
	untouched("Put over a linked spare")
	if _, _, err := s.Open(ref(2, 0)); err != nil {
		t.Errorf("the shard put beside a linked spare: %v", err)
	}

	// A spare that is a second name of a file outside (a user whose system
	// lets them link a file of root's): not written over either.
	os.Remove(jd.SparePath(0))
	if err := os.Link(victim, jd.SparePath(0)); err != nil {
		t.Fatal(err)
	}
	if err := put(3); err != nil {
		t.Errorf("Put beside a hard-linked spare: %v", err)
	}
	untouched("Put over a hard-linked spare")

	// A shard that is a link, retired: not kept as a spare (which the next
	// shard would be written over), the link removed with its epoch.
	os.Remove(jd.SparePath(0))
	link(victim, jd.ShardPath(2, 0))
	if _, err := s.RemoveBefore("heat", 3); err != nil {
		t.Errorf("RemoveBefore with a linked shard: %v", err)
	}
	if _, err := os.Lstat(jd.SparePath(0)); err == nil {
		if fi, _ := os.Stat(jd.SparePath(0)); fi != nil && os.SameFile(fi, mustStat(t, victim)) {
			t.Errorf("the linked shard's target became the rank's spare")
		}
	}
	untouched("RemoveBefore of a linked shard")

	// The checkpoint request, a link: replaced, not written through; taken
	// back, the link goes, not its target.
	link(victim, filepath.Join(jd.Path(), jobdir.Request))
	if err := s.RequestHold("heat"); err != nil {
		t.Errorf("RequestHold over a link: %v", err)
	}
	untouched("RequestHold")
	link(victim, filepath.Join(jd.Path(), jobdir.Request))
	if err := s.WithdrawRequest("heat"); err != nil {
		t.Errorf("WithdrawRequest of a link: %v", err)
	}
	untouched("WithdrawRequest")

	// The files a rank writes for the agent to read, as FIFOs and links: the
	// index is made without blocking and without reading through them.
	for _, name := range []string{"progress", "interval"} {
		p := filepath.Join(jd.Path(), name)
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	link(victimDir, filepath.Join(jd.Path(), "traffic"))
	if err := syscall.Mkfifo(filepath.Join(jd.EpochPath(3), "r000001.shard"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Index("heat"); done <- err }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Index beside FIFOs: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Index blocked on a FIFO")
	}

	// The whole job's directory, with links to a directory and a file in it.
	link(victimDir, filepath.Join(jd.Path(), "elsewhere"))
	link(victim, filepath.Join(jd.EpochPath(3), "r000002.shard"))
	if _, err := s.RemoveJob("heat"); err != nil {
		t.Errorf("RemoveJob: %v", err)
	}
	if _, err := os.Lstat(jd.Path()); err == nil {
		t.Errorf("the job's directory is still there after RemoveJob")
	}
	untouched("RemoveJob")
}

func mustStat(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}
