package durable

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"shoal/internal/shard"
)

var heat = Identity{Program: "heat", Args: []string{"--steps", "3000"}, Ranks: 3}

// shards returns a source of the shards of job's epoch over id's ranks.
func shards(t *testing.T, job string, epoch uint64, id Identity) func(int) (io.ReadCloser, error) {
	t.Helper()
	return func(r int) (io.ReadCloser, error) {
		b, err := shard.Encode(shard.Header{Job: job, Epoch: epoch, Rank: uint32(r), NRanks: uint32(id.Ranks), CreatedNs: 1000 + epoch},
			[]shard.Region{{ID: 1, ElemSize: 8, Count: 2, Data: bytes.Repeat([]byte{byte(r), byte(epoch)}, 8)}})
		if err != nil {
			t.Fatal(err)
		}
		return io.NopCloser(bytes.NewReader(b)), nil
	}
}

// spoilt is src with rank's shard passed through spoil.
func spoilt(src func(int) (io.ReadCloser, error), rank int, spoil func([]byte) []byte) func(int) (io.ReadCloser, error) {
	return func(r int) (io.ReadCloser, error) {
		rc, err := src(r)
		if err != nil || r != rank {
			return rc, err
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return nil, err
		}
		return io.NopCloser(bytes.NewReader(spoil(b))), nil
	}
}

// A shard several times the copy buffer is saved and verified in pieces, and read back
// whole and unchanged.
func TestSaveLargeShard(t *testing.T) {
	dir := t.TempDir()
	id := Identity{Program: "heat", Ranks: 1}
	data := make([]byte, 3*copyBuf+5*8)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b, err := shard.Encode(shard.Header{Job: "heat-2", Epoch: 1, Rank: 0, NRanks: 1, CreatedNs: 42},
		[]shard.Region{{ID: 1, ElemSize: 8, Count: uint64(len(data) / 8), Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	src := func(int) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
	if err := Save(dir, Manifest{Identity: id, Job: "heat-2", Epoch: 1}, src); err != nil {
		t.Fatal(err)
	}
	m, err := Newest(dir, id)
	if err != nil {
		t.Fatal(err)
	}
	if m.Shards[0].Size != int64(len(b)) || m.Shards[0].Checksum != shard.Checksum(b[:len(b)-shard.TrailerSize]) || m.CreatedNs != 42 {
		t.Errorf("manifest %+v: want size %d, CreatedNs 42 and the shard's checksum", m, len(b))
	}
	got, err := os.ReadFile(ShardPath(dir, m, 0))
	if err != nil || !bytes.Equal(got, b) {
		t.Errorf("the saved shard differs from the one sent (%v)", err)
	}
}

func save(t *testing.T, dir string, epoch uint64) {
	t.Helper()
	m := Manifest{Identity: heat, Job: "heat-1", SlurmJob: "7", Epoch: epoch}
	if err := Save(dir, m, shards(t, "heat-1", epoch, heat)); err != nil {
		t.Fatalf("Save epoch %d: %v", epoch, err)
	}
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func TestComplete(t *testing.T) {
	tests := []struct {
		names []string
		want  []uint64
	}{
		{nil, nil},
		{[]string{"epoch-3", "epoch-12", ".epoch-13.tmp", "notes.txt"}, []uint64{12, 3}},
		{[]string{"epoch-0", "epoch-", "epoch-x", "epoch-007", "epoch-4x"}, nil},
	}
	for _, tt := range tests {
		if got := Complete(tt.names); !slices.Equal(got, tt.want) {
			t.Errorf("Complete(%q) = %v, want %v", tt.names, got, tt.want)
		}
	}
}

func TestSaveKeepsOnlyTheNewest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "durable")
	save(t, dir, 2)
	save(t, dir, 5)
	if got, want := names(t, dir), []string{"epoch-5"}; !slices.Equal(got, want) {
		t.Fatalf("dir holds %q, want %q", got, want)
	}
	m, err := Newest(dir, heat)
	if err != nil {
		t.Fatal(err)
	}
	if m.Epoch != 5 || m.Job != "heat-1" || m.SlurmJob != "7" || m.CreatedNs != 1005 || len(m.Shards) != 3 {
		t.Errorf("Newest = %+v, want epoch 5 of job heat-1 from Slurm job 7, created 1005, 3 shards", m)
	}
}

// A save that fails midway (a shard that cannot be read, or another epoch's) leaves
// the complete epoch as it was, and no temporary directory.
func TestSaveFailsLeavingTheLastEpoch(t *testing.T) {
	dir := t.TempDir()
	save(t, dir, 2)
	good := shards(t, "heat-1", 3, heat)
	for name, src := range map[string]func(int) (io.ReadCloser, error){
		"unreadable": func(r int) (io.ReadCloser, error) {
			if r == 2 {
				return nil, errors.New("node gone")
			}
			return good(r)
		},
		"wrong epoch":               shards(t, "heat-1", 4, heat),
		"wrong job":                 shards(t, "other-1", 3, heat),
		"a byte flipped on the way": spoilt(good, 1, func(b []byte) []byte { b[len(b)/2] ^= 1; return b }),
		"cut short":                 spoilt(good, 0, func(b []byte) []byte { return b[:len(b)-3] }),
	} {
		if err := Save(dir, Manifest{Identity: heat, Job: "heat-1", Epoch: 3}, src); err == nil {
			t.Errorf("%s: Save succeeded", name)
		}
		if got, want := names(t, dir), []string{"epoch-2"}; !slices.Equal(got, want) {
			t.Errorf("%s: dir holds %q, want %q", name, got, want)
		}
	}
	if m, err := Newest(dir, heat); err != nil || m.Epoch != 2 {
		t.Errorf("Newest = epoch %d, %v; want epoch 2", m.Epoch, err)
	}
}

func TestNewestRefuses(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(dir string)
		want  Identity
		err   error
	}{
		{"no dir", func(dir string) { os.RemoveAll(dir) }, heat, ErrNoEpoch},
		{"only a temporary epoch", func(dir string) {
			os.Rename(filepath.Join(dir, "epoch-4"), filepath.Join(dir, ".epoch-4.tmp"))
		}, heat, ErrNoEpoch},
		{"another program", func(string) {}, Identity{Program: "mandelbrot", Args: heat.Args, Ranks: 3}, ErrForeign},
		{"other arguments", func(string) {}, Identity{Program: "heat", Ranks: 3}, ErrForeign},
		{"another rank count", func(string) {}, Identity{Program: "heat", Args: heat.Args, Ranks: 4}, ErrForeign},
		{"an elastic run of another program", func(string) {}, Identity{Program: "mandelbrot", Args: heat.Args, Elastic: true}, ErrForeign},
		{"a flipped byte", func(dir string) {
			p := filepath.Join(dir, "epoch-4", "rank-1.shard")
			b, _ := os.ReadFile(p)
			b[len(b)/2] ^= 1
			os.WriteFile(p, b, 0o600)
		}, heat, ErrCorrupt},
		{"a shard cut short", func(dir string) {
			p := filepath.Join(dir, "epoch-4", "rank-0.shard")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-1], 0o600)
		}, heat, ErrCorrupt},
		{"a shard missing", func(dir string) { os.Remove(filepath.Join(dir, "epoch-4", "rank-2.shard")) }, heat, ErrCorrupt},
		{"no manifest", func(dir string) { os.Remove(filepath.Join(dir, "epoch-4", ManifestName)) }, heat, ErrCorrupt},
		{"a renamed epoch", func(dir string) {
			os.Rename(filepath.Join(dir, "epoch-4"), filepath.Join(dir, "epoch-9"))
		}, heat, ErrCorrupt},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		save(t, dir, 4)
		tt.spoil(dir)
		before := names2(dir)
		_, err := Newest(dir, tt.want)
		if !errors.Is(err, tt.err) {
			t.Errorf("%s: Newest: %v, want %v", tt.name, err, tt.err)
		}
		// Peek reads no shard: it finds all but what is wrong in one.
		var wantPeek error
		if !strings.Contains(tt.name, "shard") && !strings.Contains(tt.name, "byte") {
			wantPeek = tt.err
		}
		if _, err := Peek(dir, tt.want); !errors.Is(err, wantPeek) || (wantPeek == nil && err != nil) {
			t.Errorf("%s: Peek: %v, want %v", tt.name, err, wantPeek)
		}
		if after := names2(dir); !slices.Equal(before, after) {
			t.Errorf("%s: Newest changed the dir from %q to %q", tt.name, before, after)
		}
	}
}

func names2(dir string) []string {
	var out []string
	filepath.WalkDir(dir, func(p string, _ os.DirEntry, _ error) error {
		out = append(out, p)
		return nil
	})
	return out
}

func TestClear(t *testing.T) {
	dir := t.TempDir()
	save(t, dir, 4)
	os.Mkdir(filepath.Join(dir, ".epoch-5.tmp"), 0o700)
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600)
	if err := Clear(dir); err != nil {
		t.Fatal(err)
	}
	if got, want := names(t, dir), []string{"notes.txt"}; !slices.Equal(got, want) {
		t.Errorf("dir holds %q after Clear, want %q", got, want)
	}
	if _, err := Newest(dir, heat); !errors.Is(err, ErrNoEpoch) {
		t.Errorf("Newest after Clear: %v, want %v", err, ErrNoEpoch)
	}
	if err := Clear(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("Clear of a missing dir: %v", err)
	}
}

// An elastic run resumes an epoch of its program and arguments written by any
// number of ranks, whether the writer was elastic or not; a run of a fixed count
// resumes only an epoch of that count, whoever wrote it.
func TestResumedBy(t *testing.T) {
	fixed3 := heat
	elastic3 := Identity{Program: "heat", Args: heat.Args, Ranks: 3, Elastic: true}
	for _, tt := range []struct {
		name      string
		epoch     Identity
		run       Identity
		resumable bool
	}{
		{"the same fixed count", fixed3, Identity{Program: "heat", Args: heat.Args, Ranks: 3}, true},
		{"another fixed count", fixed3, Identity{Program: "heat", Args: heat.Args, Ranks: 4}, false},
		{"an elastic run, a fixed epoch", fixed3, Identity{Program: "heat", Args: heat.Args, Elastic: true}, true},
		{"an elastic run, an elastic epoch", elastic3, Identity{Program: "heat", Args: heat.Args, Elastic: true}, true},
		{"a fixed run of the elastic epoch's count", elastic3, Identity{Program: "heat", Args: heat.Args, Ranks: 3}, true},
		{"a fixed run of another count", elastic3, Identity{Program: "heat", Args: heat.Args, Ranks: 2}, false},
		{"an elastic run, other arguments", elastic3, Identity{Program: "heat", Elastic: true}, false},
	} {
		if got := tt.epoch.ResumedBy(tt.run); got != tt.resumable {
			t.Errorf("%s: epoch of %s resumed by %s: %v, want %v", tt.name, tt.epoch, tt.run, got, tt.resumable)
		}
	}
	if got, want := (Identity{Program: "heat", Args: []string{"--steps", "3000"}, Elastic: true}).String(), "heat --steps 3000 on any number of ranks"; got != want {
		t.Errorf("String of an elastic run = %q, want %q", got, want)
	}
}

// An elastic run resumes from a directory whose epoch another count wrote.
func TestNewestElastic(t *testing.T) {
	dir := t.TempDir()
	m := Manifest{Identity: Identity{Program: "heat", Args: heat.Args, Ranks: 3, Elastic: true}, Job: "heat-1", Epoch: 2}
	if err := Save(dir, m, shards(t, "heat-1", 2, heat)); err != nil {
		t.Fatal(err)
	}
	got, err := Newest(dir, Identity{Program: "heat", Args: heat.Args, Elastic: true})
	if err != nil || got.Epoch != 2 || got.Ranks != 3 {
		t.Fatalf("Newest for an elastic run = epoch %d of %d ranks, %v; want epoch 2 of 3", got.Epoch, got.Ranks, err)
	}
}

// TestNewestSubCommunicator: an epoch of 3 shards written by a run of 4 ranks
// whose program gave libshoal a communicator of its first 3 (World 4) is resumed
// by a run of 4, not of 3; a world no larger than the shards is refused.
func TestNewestSubCommunicator(t *testing.T) {
	dir := t.TempDir()
	m := Manifest{Identity: heat, World: 4, Job: "heat-1", Epoch: 2}
	if err := Save(dir, m, shards(t, "heat-1", 2, heat)); err != nil {
		t.Fatal(err)
	}
	four := Identity{Program: "heat", Args: heat.Args, Ranks: 4}
	got, err := Newest(dir, four)
	if err != nil || got.Ranks != 3 || got.World != 4 {
		t.Fatalf("Newest for 4 ranks = %d shards of a world of %d, %v; want 3 of 4", got.Ranks, got.World, err)
	}
	if _, err := Newest(dir, heat); !errors.Is(err, ErrForeign) || !strings.Contains(err.Error(), "on 4 ranks") {
		t.Errorf("Newest for 3 ranks: %v, want %v naming the 4 ranks that wrote it", err, ErrForeign)
	}
	bad := Manifest{Identity: heat, World: 3, Job: "heat-1", Epoch: 3}
	if err := Save(t.TempDir(), bad, shards(t, "heat-1", 3, heat)); err == nil || !strings.Contains(err.Error(), "world 3") {
		t.Errorf("Save of a world of 3 over 3 shards: %v, want the world refused", err)
	}
}
