package jobdir

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"shoal/internal/shard"
)

func writeShard(t *testing.T, d Dir, h shard.Header) {
	t.Helper()
	b, err := shard.Encode(h, []shard.Region{{ID: 1, ElemSize: 8, Count: 2, Data: make([]byte, 16)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(d.EpochPath(h.Epoch), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.ShardPath(h.Epoch, int(h.Rank)), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestJobDirVerify(t *testing.T) {
	d := Dir{Root: t.TempDir(), Job: "heat"}
	for _, e := range []uint64{2, 3} {
		for r := uint32(0); r < 2; r++ {
			writeShard(t, d, shard.Header{Job: "heat", Epoch: e, Rank: r, NRanks: 2, CreatedNs: 7})
		}
	}
	os.MkdirAll(filepath.Join(d.Path(), "e0000000x"), 0o755) // not an epoch
	os.WriteFile(d.ShardPath(3, 1)+".tmp", nil, 0o644)       // being written: not counted
	epochs, err := d.Epochs()
	if err != nil || !reflect.DeepEqual(epochs, []uint64{2, 3}) {
		t.Fatalf("Epochs() = %v, %v; want [2 3]", epochs, err)
	}
	if n := d.ShardCount(3); n != 2 {
		t.Errorf("ShardCount(3) = %d, want 2", n)
	}
	if h, err := d.VerifyEpoch(3, 2); err != nil || h.CreatedNs != 7 {
		t.Errorf("VerifyEpoch(3) = %+v, %v", h, err)
	}
	// A shard of another job, another rank, or the wrong rank count is refused.
	writeShard(t, d, shard.Header{Job: "other", Epoch: 2, Rank: 0, NRanks: 2})
	if _, err := d.VerifyEpoch(2, 2); !errors.Is(err, shard.ErrWrongShard) {
		t.Errorf("shard of another job: err %v, want shard.ErrWrongShard", err)
	}
	os.Rename(d.ShardPath(3, 0), d.ShardPath(3, 1))
	if _, err := d.VerifyShard(3, 1, 2); !errors.Is(err, shard.ErrWrongShard) {
		t.Errorf("shard of another rank: err %v, want shard.ErrWrongShard", err)
	}
	if _, err := d.VerifyShard(3, 0, 2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing shard: err %v, want not-exist", err)
	}
	// A flipped byte is a checksum mismatch and names the file.
	writeShard(t, d, shard.Header{Job: "heat", Epoch: 3, Rank: 0, NRanks: 2})
	b, _ := os.ReadFile(d.ShardPath(3, 0))
	b[140] ^= 1
	os.WriteFile(d.ShardPath(3, 0), b, 0o644)
	_, err = d.VerifyShard(3, 0, 2)
	var se *shard.Error
	if !errors.Is(err, shard.ErrChecksum) || !errors.As(err, &se) || se.Path != d.ShardPath(3, 0) {
		t.Errorf("corrupt shard: err %v, want shard.ErrChecksum naming the path", err)
	}
	// CheckShard reads the header only: the flipped payload byte passes, a shard cut
	// short, another rank's, or a missing one do not.
	writeShard(t, d, shard.Header{Job: "heat", Epoch: 3, Rank: 1, NRanks: 2, CreatedNs: 9})
	b[140] ^= 1
	b[len(b)-9] ^= 1 // the payload's last byte
	os.WriteFile(d.ShardPath(3, 0), b, 0o644)
	if _, err := d.VerifyShard(3, 0, 2); !errors.Is(err, shard.ErrChecksum) {
		t.Errorf("payload byte flipped: VerifyShard err %v, want shard.ErrChecksum", err)
	}
	if h, err := d.CheckEpoch(3, 2); err != nil || h.Rank != 0 {
		t.Errorf("CheckEpoch(3) with a flipped payload byte = %+v, %v; want rank 0's header", h, err)
	}
	os.WriteFile(d.ShardPath(3, 0), b[:len(b)-3], 0o644)
	if _, err := d.CheckShard(3, 0, 2); !errors.Is(err, shard.ErrBadHeader) || !errors.As(err, &se) {
		t.Errorf("shard cut short: err %v, want shard.ErrBadHeader naming the path", err)
	}
	if _, err := d.CheckShard(3, 1, 3); !errors.Is(err, shard.ErrWrongShard) {
		t.Errorf("shard of another rank count: err %v, want shard.ErrWrongShard", err)
	}
	os.Remove(d.ShardPath(3, 0))
	if _, err := d.CheckEpoch(3, 2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing shard: err %v, want not-exist", err)
	}
}

func TestReadManifest(t *testing.T) {
	d := Dir{Root: t.TempDir(), Job: "j"}
	if m, err := d.ReadManifest(); err != nil || m != nil {
		t.Fatalf("missing manifest: %v, %v; want empty", m, err)
	}
	os.MkdirAll(d.Path(), 0o755)
	os.WriteFile(filepath.Join(d.Path(), "manifest"), []byte("epoch 2 nranks 4 created_ns 10\nepoch 3 nranks 4 created_ns 20\nrun program 6f06530bc79921bd args c85ca5391809cfa3 argv --steps 3\n"), 0o644)
	m, err := d.ReadManifest()
	want := []ManifestEntry{{2, 4, 10}, {3, 4, 20}}
	if err != nil || !reflect.DeepEqual(m, want) {
		t.Fatalf("ReadManifest = %v, %v; want %v", m, err, want)
	}
	os.WriteFile(filepath.Join(d.Path(), "manifest"), []byte("epoch 2 nranks 4 created_ns 10\nepoch three\n"), 0o644)
	if _, err := d.ReadManifest(); err == nil {
		t.Fatal("malformed manifest accepted")
	}
}

// A shard moved aside while a reader waited for its lock (libshoal keeping a pruned
// shard to write the next one over) is reported missing, not read as the file the
// path named when it was opened.
func TestCheckShardWaitsForTheLockAndSeesAMove(t *testing.T) {
	d := Dir{Root: t.TempDir(), Job: "heat"}
	writeShard(t, d, shard.Header{Job: "heat", Epoch: 3, Rank: 0, NRanks: 1})
	path := d.ShardPath(3, 0)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := d.CheckShard(3, 0, 1)
		done <- err
	}()
	// Either order of the reader's open and this move must end the same way.
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("CheckShard returned %v while the shard was locked exclusively", err)
	default:
	}
	if err := os.Rename(path, filepath.Join(d.Path(), "r000000.spare")); err != nil {
		t.Fatal(err)
	}
	syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	if err := <-done; !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CheckShard of a shard moved aside = %v, want not-exist", err)
	}
}
func TestParseShardName(t *testing.T) {
	for name, want := range map[string]int{"r000000.shard": 0, "r000042.shard": 42, "r1000000.shard": 1000000} {
		if got, ok := ParseShardName(name); !ok || got != want {
			t.Errorf("ParseShardName(%q) = %d, %v", name, got, ok)
		}
	}
	for _, name := range []string{"r00042.shard", "r0000042.shard", "r000042.shard.tmp", "r-00001.shard", "x000001.shard", "r+00001.shard", ".shard"} {
		if _, ok := ParseShardName(name); ok {
			t.Errorf("ParseShardName(%q) accepted", name)
		}
	}
}

// A retired epoch's shards become their ranks' spares, except where a rank has one
// already, is not to keep one, or a reader holds the shard, which stays whole for
// that reader.
func TestRetireEpochKeepsSpares(t *testing.T) {
	d := Dir{Root: t.TempDir(), Job: "heat"}
	for r := uint32(0); r < 4; r++ {
		writeShard(t, d, shard.Header{Job: "heat", Epoch: 3, Rank: r, NRanks: 4})
	}
	first, err := os.Stat(d.ShardPath(3, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(d.SparePath(1), []byte("rank 1's spare"), 0o644); err != nil {
		t.Fatal(err)
	}
	held, _, err := OpenShard(d.Tree(), d.ShardPath(3, 2))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := d.RetireEpoch(3, func(rank int) bool { return rank != 3 }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.EpochPath(3)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("epoch 3's directory after RetireEpoch: %v", err)
	}
	if now, err := os.Stat(d.SparePath(0)); err != nil || !os.SameFile(now, first) {
		t.Errorf("rank 0's spare is not its epoch 3 shard's file (%v)", err)
	}
	if b, _ := os.ReadFile(d.SparePath(1)); string(b) != "rank 1's spare" {
		t.Errorf("rank 1's spare was replaced: %q", b)
	}
	if _, err := os.Stat(d.SparePath(2)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rank 2's held shard became a spare: %v", err)
	}
	if _, err := os.Stat(d.SparePath(3)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("rank 3, not to keep one, has a spare: %v", err)
	}
	st, _ := held.Stat()
	if h, _, err := shard.Verify(held, st.Size()); err != nil || h.Rank != 2 || h.Epoch != 3 {
		t.Errorf("the held shard after RetireEpoch: %+v, %v", h, err)
	}
	// RemoveEpoch, which frees the space, keeps nothing.
	writeShard(t, d, shard.Header{Job: "heat", Epoch: 4, Rank: 2, NRanks: 3})
	if err := d.RemoveEpoch(4); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.SparePath(2)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("RemoveEpoch kept a spare: %v", err)
	}
}

// Spares lists a job's spares by rank and nothing else of its directory;
// RemoveSpares keeps those it is told to; ShardRanks names the ranks with a
// shard in the epochs given.
func TestSpares(t *testing.T) {
	d := Dir{Root: t.TempDir(), Job: "heat"}
	if spares, err := d.Spares(); err != nil || len(spares) != 0 {
		t.Fatalf("Spares of a job with no directory: %v, %v", spares, err)
	}
	writeShard(t, d, shard.Header{Job: "heat", Epoch: 5, Rank: 1, NRanks: 8})
	writeShard(t, d, shard.Header{Job: "heat", Epoch: 6, Rank: 7, NRanks: 8})
	for _, name := range []string{"r000001.spare", "r000004.spare", "r000007.spare", "r00002.spare", "notes.spare", "r000009.spare.tmp"} {
		if err := os.WriteFile(filepath.Join(d.Path(), name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	spares, err := d.Spares()
	if err != nil || len(spares) != 3 || spares[1] != d.SparePath(1) || spares[4] != d.SparePath(4) || spares[7] != d.SparePath(7) {
		t.Fatalf("Spares = %v, %v; want ranks 1, 4 and 7", spares, err)
	}
	if got := d.ShardRanks([]uint64{5, 6, 9}); len(got) != 2 || !got[1] || !got[7] {
		t.Errorf("ShardRanks(5, 6, 9) = %v, want ranks 1 and 7", got)
	}
	live := d.ShardRanks([]uint64{5, 6})
	kept, err := d.RemoveSpares(func(rank int) bool { return live[rank] })
	if err != nil {
		t.Fatal(err)
	}
	if spares, _ = d.Spares(); len(spares) != 2 || spares[4] != "" || !reflect.DeepEqual(kept, spares) {
		t.Errorf("spares after removing those of ranks with no shard: %v (said kept: %v), want ranks 1 and 7", spares, kept)
	}
	if kept, err = d.RemoveSpares(nil); err != nil {
		t.Fatal(err)
	}
	if spares, _ = d.Spares(); len(spares) != 0 || len(kept) != 0 {
		t.Errorf("spares after removing all: %v (said kept: %v)", spares, kept)
	}
	if _, err := os.Stat(filepath.Join(d.Path(), "notes.spare")); err != nil {
		t.Errorf("a file not named as a spare was removed: %v", err)
	}
}
