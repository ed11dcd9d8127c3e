package shardstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/shard"
	"shoal/internal/traffic"
)

// makeShard returns a valid shard of job at epoch for rank of nranks, with payload
// bytes derived from its identity (so shards of different ranks differ).
func makeShard(t *testing.T, job string, epoch uint64, rank, nranks, payload int) []byte {
	t.Helper()
	data := make([]byte, payload)
	for i := range data {
		data[i] = byte(i*7 + rank*13 + int(epoch))
	}
	b, err := shard.Encode(shard.Header{Job: job, Epoch: epoch, Rank: uint32(rank), NRanks: uint32(nranks), CreatedNs: 1000 * epoch},
		[]shard.Region{{ID: 0, ElemSize: 1, Count: uint64(payload), Data: data}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// place writes b where libshoal would write the shard of ref.
func place(t *testing.T, s *Store, ref shard.Ref, b []byte) string {
	t.Helper()
	path := s.path(ref)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x40
	return c
}

func ref(epoch uint64, rank int) shard.Ref {
	return shard.Ref{Job: "heat", Epoch: epoch, Rank: rank}
}

func TestIndex(t *testing.T) {
	s := New(t.TempDir())
	good := map[shard.Ref][]byte{}
	for _, r := range []shard.Ref{ref(3, 0), ref(3, 1), ref(4, 0)} {
		good[r] = makeShard(t, "heat", r.Epoch, r.Rank, 2, 100+r.Rank)
		place(t, s, r, good[r])
	}
	place(t, s, ref(4, 1), flip(makeShard(t, "heat", 4, 1, 2, 100), 150)) // damaged payload
	place(t, s, ref(4, 2), makeShard(t, "heat", 4, 1, 3, 100))            // rank 1's shard under rank 2's name
	place(t, s, ref(5, 0), makeShard(t, "heat", 5, 0, 2, 100)[:90])       // truncated
	place(t, s, ref(5, 1), makeShard(t, "other", 5, 1, 2, 100))           // another job's shard
	// Not shards: being written, odd names, stray files and directories.
	dir := s.jobDir("heat").EpochPath(5)
	for _, name := range []string{"r000003.shard.tmp", "r000004.shard.1a2b.tmp", "r3.shard", "r0000005.shard", "rabcdef.shard", "notes"} {
		os.WriteFile(filepath.Join(dir, name), makeShard(t, "heat", 5, 3, 8, 10), 0o644)
	}
	os.Mkdir(filepath.Join(s.jobDir("heat").Path(), "e1"), 0o755)
	os.WriteFile(filepath.Join(s.jobDir("heat").Path(), "manifest"), []byte("epoch 3 nranks 2 created_ns 3000\n"), 0o644)

	idx, err := s.Index("heat")
	if err != nil {
		t.Fatal(err)
	}
	var gotGood []string
	for _, si := range idx.Shards {
		r := si.Ref("heat")
		b := good[r]
		if b == nil {
			t.Errorf("listed %s, which is not a good shard", r)
			continue
		}
		want := shard.Info{Epoch: r.Epoch, Rank: r.Rank, NRanks: 2, Size: int64(len(b)), CreatedNs: 1000 * r.Epoch,
			Checksum: ckptChecksum(b), PerRank: []int32{0}}
		if !reflect.DeepEqual(si, want) {
			t.Errorf("shard %s: %+v, want %+v", r, si, want)
		}
		gotGood = append(gotGood, r.String())
	}
	if want := []string{"heat/3/0", "heat/3/1", "heat/4/0"}; !reflect.DeepEqual(gotGood, want) {
		t.Errorf("good shards %v, want %v", gotGood, want)
	}
	var gotBad []string
	for _, b := range idx.Bad {
		gotBad = append(gotBad, fmt.Sprintf("%d/%d %s", b.Epoch, b.Rank, b.Error))
		if !strings.Contains(b.Detail, b.Error) {
			t.Errorf("bad shard %d/%d: detail %q does not contain %q", b.Epoch, b.Rank, b.Detail, b.Error)
		}
	}
	want := []string{"4/1 checksum mismatch", "4/2 wrong shard", "5/0 truncated", "5/1 wrong shard"}
	if !reflect.DeepEqual(gotBad, want) {
		t.Errorf("bad shards %v, want %v", gotBad, want)
	}

	// Unknown job: empty index. Bad job ids never reach the file system.
	if idx, err := s.Index("nothing"); err != nil || len(idx.Shards)+len(idx.Bad) != 0 {
		t.Errorf("Index of an unknown job = %+v, %v; want empty", idx, err)
	}
	for _, job := range []string{"..", "a/b", "", strings.Repeat("x", 64)} {
		if _, err := s.Index(job); !errors.Is(err, errkind.BadRequest) {
			t.Errorf("Index(%q): %v, want ErrBadRequest", job, err)
		}
	}
}

func ckptChecksum(b []byte) uint64 {
	s, err := shard.Parse(b)
	if err != nil {
		panic(err)
	}
	return s.Checksum
}

// TestIndexCaches shows that a verified file version is not read again: bytes
// changed behind the store's back while size and mtime are kept are not
// noticed, a change of mtime or a replaced file is.
func TestIndexCaches(t *testing.T) {
	s := New(t.TempDir())
	b := makeShard(t, "heat", 1, 0, 1, 1000)
	path := place(t, s, ref(1, 0), b)
	if idx, _ := s.Index("heat"); len(idx.Shards) != 1 {
		t.Fatalf("index %+v, want one good shard", idx)
	}
	fi, _ := os.Stat(path)
	f, _ := os.OpenFile(path, os.O_WRONLY, 0)
	f.WriteAt([]byte{b[500] ^ 1}, 500)
	f.Close()
	os.Chtimes(path, fi.ModTime(), fi.ModTime())
	if idx, _ := s.Index("heat"); len(idx.Shards) != 1 {
		t.Fatalf("same version: index %+v, want the cached good result", idx)
	}
	later := fi.ModTime().Add(time.Second)
	os.Chtimes(path, later, later)
	idx, _ := s.Index("heat")
	if len(idx.Shards) != 0 || len(idx.Bad) != 1 || idx.Bad[0].Error != "checksum mismatch" {
		t.Fatalf("new mtime: index %+v, want the shard re-verified as bad", idx)
	}
	// Replaced by rename (a new inode), same size and mtime as the bad one.
	tmp := path + ".new"
	os.WriteFile(tmp, b, 0o644)
	os.Chtimes(tmp, later, later)
	os.Rename(tmp, path)
	if idx, _ := s.Index("heat"); len(idx.Shards) != 1 {
		t.Fatalf("replaced file: index %+v, want it re-verified as good", idx)
	}
	// Entries of files gone are dropped.
	os.Remove(path)
	s.Index("heat")
	if n := len(s.cache["heat"]); n != 0 {
		t.Errorf("cache holds %d entries after the shard was removed", n)
	}
}

// writeSums leaves beside the shard file at path the block sums file its writer
// would: the sums of b's blocks, keyed by the file's version now.
func writeSums(t *testing.T, path string, b []byte) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sums := newBlockSums()
	sums.Write(b)
	out := shard.Sums{BlockSize: BlockSize, ShardSize: fi.Size(), Checksum: binary.LittleEndian.Uint64(b[len(b)-shard.TrailerSize:]),
		Ino: fi.Sys().(*syscall.Stat_t).Ino, MtimeNs: fi.ModTime().UnixNano(), Blocks: sums.Sums()}
	if err := os.WriteFile(jobdir.SumsPath(path), out.Encode(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A shard whose writer left its block sums beside it is not read back: the
// store takes its sums, header and checksum as they are (so a payload damaged
// before the sums were taken is listed as good), for that version of the file
// only; a shard changed since, or whose sums file does not describe it, is
// verified whole.
func TestIndexTakesWritersSums(t *testing.T) {
	s := New(t.TempDir())
	b := makeShard(t, "heat", 1, 0, 1, 3*BlockSize+100)
	damaged := flip(b, 2*BlockSize+7)
	path := place(t, s, ref(1, 0), damaged)
	writeSums(t, path, damaged)
	idx, _ := s.Index("heat")
	if len(idx.Shards) != 1 || idx.Shards[0].Checksum != ckptChecksum(b) {
		t.Fatalf("index %+v, want the shard taken from its sums as good", idx)
	}
	e := s.cache["heat"][path]
	want := newBlockSums()
	want.Write(damaged)
	if !reflect.DeepEqual(e.blocks, want.Sums()) {
		t.Errorf("blocks' sums not taken from the sums file")
	}

	// Another version of the file: verified whole.
	fi, _ := os.Stat(path)
	later := fi.ModTime().Add(time.Second)
	os.Chtimes(path, later, later)
	idx, _ = s.Index("heat")
	if len(idx.Shards) != 0 || len(idx.Bad) != 1 || idx.Bad[0].Error != "checksum mismatch" {
		t.Fatalf("changed since its sums: index %+v, want it verified whole, as bad", idx)
	}

	// Sums files that do not describe the shard, beside good and damaged shards.
	for name, mangle := range map[string]func(shard.Sums) shard.Sums{
		"another inode":    func(x shard.Sums) shard.Sums { x.Ino++; return x },
		"another mtime":    func(x shard.Sums) shard.Sums { x.MtimeNs--; return x },
		"another checksum": func(x shard.Sums) shard.Sums { x.Checksum++; return x },
		"another size":     func(x shard.Sums) shard.Sums { x.ShardSize--; return x },
		"another block":    func(x shard.Sums) shard.Sums { x.BlockSize /= 2; x.Blocks = append(x.Blocks, x.Blocks...); return x },
	} {
		for _, damage := range []bool{false, true} {
			s := New(t.TempDir())
			path := place(t, s, ref(2, 0), makeShard(t, "heat", 2, 0, 1, 3*BlockSize+100))
			good, _ := os.ReadFile(path)
			if damage {
				os.WriteFile(path, flip(good, 2*BlockSize+7), 0o644)
			}
			writeSums(t, path, good)
			sf, _ := os.ReadFile(jobdir.SumsPath(path))
			parsed, err := shard.ParseSums(sf)
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(jobdir.SumsPath(path), mangle(parsed).Encode(), 0o644)
			idx, _ := s.Index("heat")
			if listed := len(idx.Shards) == 1; listed == damage {
				t.Errorf("%s, damaged %v: index %+v, want the shard verified whole", name, damage, idx)
			}
		}
	}
}

// The index says which regions of a shard are per-rank, whether the shard was
// verified whole or taken from its writer's sums (which reads its table alone):
// an epoch whose shards list none can be restored on another number of ranks.
func TestIndexPerRank(t *testing.T) {
	data := make([]byte, 16)
	tests := []struct {
		name    string
		regions []shard.Region
		want    []int32
	}{
		{"version 1, all plain", []shard.Region{{ID: 1, ElemSize: 4, Count: 1, Data: data[:4]}, {ID: 2, ElemSize: 8, Count: 1, Data: data[:8]}}, []int32{1, 2}},
		{"distributed and replicated", []shard.Region{
			{ID: 1, ElemSize: 4, Count: 1, Kind: shard.KindReplicated, Datatype: 7, Data: data[:4]},
			{ID: 2, ElemSize: 8, Count: 2, Kind: shard.KindBlock, Datatype: 14, Block: shard.Block{Global: 8, Offset: 2}, Data: data},
		}, nil},
		{"one plain among them", []shard.Region{
			{ID: -4, ElemSize: 1, Count: 3, Kind: shard.KindPlain, Datatype: 4, Data: data[:3]},
			{ID: 2, ElemSize: 8, Count: 2, Kind: shard.KindSubarray, Datatype: 14,
				Subarray: shard.Subarray{Order: shard.OrderC, Sizes: []uint64{4, 4}, Subsizes: []uint64{1, 2}, Starts: []uint64{3, 0}}, Data: data},
		}, []int32{-4}},
	}
	for _, tt := range tests {
		for _, sums := range []bool{false, true} {
			s := New(t.TempDir())
			b, err := shard.Encode(shard.Header{Job: "heat", Epoch: 1, NRanks: 1, CreatedNs: 1}, tt.regions)
			if err != nil {
				t.Fatal(err)
			}
			path := place(t, s, ref(1, 0), b)
			if sums {
				writeSums(t, path, b)
			}
			idx, err := s.Index("heat")
			if err != nil || len(idx.Shards) != 1 {
				t.Fatalf("%s: index %+v, %v", tt.name, idx, err)
			}
			if got := idx.Shards[0].PerRank; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s (sums file %v): PerRank = %v, want %v", tt.name, sums, got, tt.want)
			}
		}
	}
}

// A copy committed while an Index scans keeps its verification: the scan read
// the epoch's directory before the copy was renamed into it, and forgetting the
// copy's entry would have the next scan hash the whole file again.
func TestIndexKeepsCopyStoredDuringScan(t *testing.T) {
	s := New(t.TempDir())
	old := place(t, s, ref(1, 0), makeShard(t, "heat", 1, 0, 2, 1000))
	gone := place(t, s, ref(1, 1), makeShard(t, "heat", 1, 1, 2, 1000))
	if idx, _ := s.Index("heat"); len(idx.Shards) != 2 {
		t.Fatalf("index %+v, want two good shards", idx)
	}
	os.Remove(gone)
	// What Index does around its scan: the scan begins, reads the epochs'
	// directories (epoch 1 holds only rank 0 now), and meanwhile a copy of
	// epoch 2 is stored; then it prunes.
	began := s.scanBegins()
	b := makeShard(t, "heat", 2, 0, 2, 1000)
	if _, err := s.Put(ref(2, 0), bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	s.prune("heat", map[string]bool{old: true}, began)
	stored := s.path(ref(2, 0))
	if _, ok := s.cache["heat"][stored]; !ok {
		t.Errorf("the copy stored during the scan lost its verification")
	}
	if _, ok := s.cache["heat"][gone]; ok {
		t.Errorf("the shard removed before the scan kept its verification")
	}
	if _, ok := s.cache["heat"][old]; !ok {
		t.Errorf("the shard the scan saw lost its verification")
	}
	// The next scan sees the copy and keeps it; one after its removal drops it.
	s.Index("heat")
	if _, ok := s.cache["heat"][stored]; !ok {
		t.Errorf("the next scan dropped the copy's verification")
	}
	os.Remove(stored)
	s.Index("heat")
	if _, ok := s.cache["heat"][stored]; ok {
		t.Errorf("a scan after the copy's removal kept its verification")
	}
}

func TestOpen(t *testing.T) {
	s := New(t.TempDir())
	b := makeShard(t, "heat", 2, 1, 2, 200<<10) // mapped for verification
	place(t, s, ref(2, 1), b)
	f, info, err := s.Open(ref(2, 1))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(f)
	f.Close()
	if !bytes.Equal(got, b) || info.Size != int64(len(b)) || info.NRanks != 2 {
		t.Errorf("Open: %d bytes, info %+v", len(got), info)
	}
	if _, _, err := s.Open(ref(2, 0)); !errors.Is(err, errkind.NotFound) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Open of a missing shard: %v, want ErrNotFound", err)
	}
	place(t, s, ref(2, 0), flip(makeShard(t, "heat", 2, 0, 2, 200<<10), 100<<10))
	_, _, err = s.Open(ref(2, 0))
	if !errors.Is(err, errkind.Corrupt) || !errors.Is(err, shard.ErrChecksum) || !strings.Contains(err.Error(), "heat/2/0") {
		t.Errorf("Open of a corrupt shard: %v, want ErrCorrupt and ckpt.ErrChecksum naming heat/2/0", err)
	}
	if _, _, err := s.Open(shard.Ref{Job: "heat", Epoch: 0, Rank: 0}); !errors.Is(err, errkind.BadRequest) {
		t.Errorf("Open of epoch 0: %v, want ErrBadRequest", err)
	}
}

func tmpFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, ".tmp") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

func TestPut(t *testing.T) {
	s := New(filepath.Join(t.TempDir(), "ckpt")) // created on first Put
	b := makeShard(t, "heat", 7, 3, 4, 300<<10)
	info, err := s.Put(ref(7, 3), bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if info.Size != int64(len(b)) || info.Checksum != ckptChecksum(b) || info.CreatedNs != 7000 {
		t.Errorf("Put info %+v", info)
	}
	stored := func() []byte {
		got, err := os.ReadFile(s.path(ref(7, 3)))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if !bytes.Equal(stored(), b) {
		t.Fatal("stored bytes differ")
	}

	// Bad uploads are rejected, name the failed check, and leave the good copy.
	tests := []struct {
		name string
		body []byte
		want error
	}{
		{"flipped bit", flip(b, 1000), shard.ErrChecksum},
		{"truncated", b[:len(b)-1], shard.ErrChecksum},
		{"short", b[:20], shard.ErrTruncated},
		{"empty", nil, shard.ErrTruncated},
		{"other rank", makeShard(t, "heat", 7, 2, 4, 10), shard.ErrWrongShard},
		{"other epoch", makeShard(t, "heat", 6, 3, 4, 10), shard.ErrWrongShard},
		{"other job", makeShard(t, "cold", 7, 3, 4, 10), shard.ErrWrongShard},
		{"not a shard", []byte(strings.Repeat("hello ", 100)), shard.ErrBadMagic},
	}
	for _, tt := range tests {
		_, err := s.Put(ref(7, 3), bytes.NewReader(tt.body), int64(len(tt.body)))
		if !errors.Is(err, errkind.BadRequest) || !errors.Is(err, tt.want) || !strings.Contains(err.Error(), "heat/7/3") {
			t.Errorf("%s: Put = %v, want ErrBadRequest and %v naming the shard", tt.name, err, tt.want)
		}
		if !bytes.Equal(stored(), b) {
			t.Fatalf("%s: the good copy was replaced", tt.name)
		}
	}
	// A whole shard that is not the size declared for it is refused too.
	for _, size := range []int64{int64(len(b)) - 1, int64(len(b)) + 1} {
		if _, err := s.Put(ref(7, 3), bytes.NewReader(b), size); !errors.Is(err, errkind.BadRequest) || !errors.Is(err, shard.ErrTruncated) {
			t.Errorf("Put of %d bytes declared as %d: %v, want ErrBadRequest and ErrTruncated", len(b), size, err)
		}
	}
	// A failing reader (the API's signed-body check) stores nothing.
	bodyErr := fmt.Errorf("%w: body does not match its signed SHA-256", errkind.Unauthorized)
	if _, err := s.Put(ref(7, 3), io.MultiReader(bytes.NewReader(b), errReader{bodyErr}), int64(len(b))); !errors.Is(err, errkind.Unauthorized) {
		t.Errorf("Put with a tampered body: %v, want ErrUnauthorized", err)
	}
	if _, err := s.Put(ref(8, 0), io.MultiReader(bytes.NewReader(b[:100]), errReader{io.ErrUnexpectedEOF}), int64(len(b))); !errors.Is(err, errkind.BadRequest) {
		t.Errorf("Put with a broken body: %v, want ErrBadRequest", err)
	}
	if _, err := os.Stat(s.path(ref(8, 0))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("broken upload left a shard: %v", err)
	}
	if tmp := tmpFiles(t, s.Dir); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
	if idx, _ := s.Index("heat"); len(idx.Shards) != 1 || len(idx.Bad) != 0 {
		t.Errorf("index after the uploads: %+v", idx)
	}
	// A good upload replaces a corrupt copy.
	place(t, s, ref(9, 0), flip(makeShard(t, "heat", 9, 0, 1, 10), 140))
	if _, err := s.Put(ref(9, 0), bytes.NewReader(makeShard(t, "heat", 9, 0, 1, 10)), -1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ref(9, 0)); err != nil {
		t.Errorf("after replacing a corrupt copy: %v", err)
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestConcurrent runs puts of the same shard, indexes and opens at once (run
// with -race).
func TestConcurrent(t *testing.T) {
	s := New(t.TempDir())
	b := makeShard(t, "heat", 1, 0, 1, 100<<10)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(3)
		go func() {
			defer wg.Done()
			if _, err := s.Put(ref(1, 0), bytes.NewReader(b), int64(len(b))); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			idx, err := s.Index("heat")
			if err != nil || len(idx.Bad) > 0 {
				t.Errorf("Index during puts: %+v, %v", idx, err)
			}
		}()
		go func() {
			defer wg.Done()
			if f, _, err := s.Open(ref(1, 0)); err == nil {
				f.Close()
			} else if !errors.Is(err, errkind.NotFound) {
				t.Errorf("Open during puts: %v", err)
			}
		}()
	}
	wg.Wait()
	if _, err := s.Stat(ref(1, 0)); err != nil {
		t.Error(err)
	}
}

// fakeSource serves shards from memory, or fails as told.
type fakeSource struct {
	shards map[shard.Ref][]byte
	err    error // returned by GetShard
	cut    int   // > 0: the body breaks after this many bytes
	hang   bool  // the body stops sending after cut bytes, until ctx ends
	calls  int
}

// hangingReader blocks until ctx ends, as a body whose link was cut does.
type hangingReader struct{ ctx context.Context }

func (h hangingReader) Read([]byte) (int, error) {
	<-h.ctx.Done()
	return 0, h.ctx.Err()
}

func (f *fakeSource) Addr() string { return "10.0.0.1:7947" }
func (f *fakeSource) GetShard(ctx context.Context, ref shard.Ref) (io.ReadCloser, int64, error) {
	f.calls++
	if f.err != nil {
		return nil, 0, f.err
	}
	b, ok := f.shards[ref]
	if !ok {
		return nil, 0, &api.Error{Status: 404, Code: "not_found", Message: "api: not found: shard " + ref.String() + " is not stored on this node"}
	}
	if f.hang {
		return io.NopCloser(io.MultiReader(bytes.NewReader(b[:f.cut]), hangingReader{ctx})), int64(len(b)), nil
	}
	if f.cut > 0 {
		return io.NopCloser(io.MultiReader(bytes.NewReader(b[:f.cut]), errReader{io.ErrUnexpectedEOF})), int64(len(b)), nil
	}
	return io.NopCloser(bytes.NewReader(b)), int64(len(b)), nil
}

func TestFetch(t *testing.T) {
	ctx := context.Background()
	s := New(t.TempDir())
	good := makeShard(t, "heat", 4, 1, 2, 100<<10)
	src := &fakeSource{shards: map[shard.Ref][]byte{ref(4, 1): good, ref(4, 0): flip(makeShard(t, "heat", 4, 0, 2, 10), 130)}}
	f, err := s.Fetch(ctx, ref(4, 1), src)
	if err != nil || !f.Copied || f.Shard.Checksum != ckptChecksum(good) {
		t.Fatalf("Fetch = %+v, %v", f, err)
	}
	// Already here: nothing transferred.
	f, err = s.Fetch(ctx, ref(4, 1), src)
	if err != nil || f.Copied || src.calls != 1 {
		t.Errorf("second Fetch = %+v, %v after %d calls; want no copy", f, err, src.calls)
	}
	// The source has it, but the bytes that arrive are bad.
	_, err = s.Fetch(ctx, ref(4, 0), src)
	if !errors.Is(err, errkind.Corrupt) || !errors.Is(err, shard.ErrChecksum) || !strings.Contains(err.Error(), "10.0.0.1:7947") {
		t.Errorf("Fetch of bad bytes: %v, want ErrCorrupt, ErrChecksum, naming the source", err)
	}
	// The source does not have it.
	if _, err = s.Fetch(ctx, ref(4, 2), src); !errors.Is(err, errkind.NotFound) || !strings.Contains(err.Error(), "10.0.0.1:7947") {
		t.Errorf("Fetch of a missing shard: %v, want ErrNotFound naming the source", err)
	}
	// The source's copy is corrupt: passed on as such.
	src.err = &api.Error{Status: 422, Code: "corrupt", Message: "api: corrupt: shard heat/4/3 fails verification: checksum mismatch"}
	if _, err = s.Fetch(ctx, ref(4, 3), src); !errors.Is(err, errkind.Corrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("Fetch from a corrupt source: %v, want ErrCorrupt", err)
	}
	// The source is unreachable or refuses: a gateway error, not its status.
	for _, e := range []error{
		fmt.Errorf("%w at 10.0.0.1:7947: connection refused", errkind.Unreachable),
		&api.Error{Status: 401, Code: "unauthorized", Message: "api: unauthorized: bad signature"},
	} {
		src.err = e
		_, err = s.Fetch(ctx, ref(4, 3), src)
		if !errors.Is(err, errkind.BadGateway) || errors.Is(err, errkind.Unauthorized) {
			t.Errorf("Fetch with source error %v: %v, want only ErrBadGateway", e, err)
		}
	}
	// The transfer breaks.
	src.err, src.cut = nil, 1000
	src.shards[ref(5, 0)] = makeShard(t, "heat", 5, 0, 1, 10<<10)
	if _, err = s.Fetch(ctx, ref(5, 0), src); !errors.Is(err, errkind.BadGateway) {
		t.Errorf("Fetch with a broken transfer: %v, want ErrBadGateway", err)
	}
	// The transfer stalls (a cut link): aborted after StallTimeout, not when
	// TCP gives up; the caller's own cancellation is reported as such.
	src.hang = true
	s.StallTimeout = 200 * time.Millisecond
	start := time.Now()
	_, err = s.Fetch(ctx, ref(5, 0), src)
	if !errors.Is(err, errkind.BadGateway) || !strings.Contains(err.Error(), "stalled") || time.Since(start) > 5*time.Second {
		t.Errorf("Fetch of a stalled transfer: %v after %v, want ErrBadGateway (stalled) after 200ms", err, time.Since(start))
	}
	s.StallTimeout = time.Minute
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = s.Fetch(cctx, ref(5, 0), src)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errkind.BadGateway) {
		t.Errorf("Fetch past the caller's deadline: %v, want context.DeadlineExceeded", err)
	}
	if idx, _ := s.Index("heat"); len(idx.Shards) != 1 || len(idx.Bad) != 0 {
		t.Errorf("index after the fetches: %+v, want only heat/4/1", idx)
	}
	if tmp := tmpFiles(t, s.Dir); len(tmp) > 0 {
		t.Errorf("temporary files left: %v", tmp)
	}
}

func TestRemove(t *testing.T) {
	s := New(t.TempDir())
	for e := uint64(1); e <= 5; e++ {
		place(t, s, ref(e, 0), makeShard(t, "heat", e, 0, 1, 10))
	}
	place(t, s, shard.Ref{Job: "cold", Epoch: 1}, makeShard(t, "cold", 1, 0, 1, 10))
	s.Index("heat")
	removed, err := s.RemoveBefore("heat", 4)
	if err != nil || !reflect.DeepEqual(removed, []uint64{1, 2, 3}) {
		t.Fatalf("RemoveBefore(4) = %v, %v", removed, err)
	}
	// Epochs 4 and 5, and the spare (epoch 1's shard, retired first).
	spare, ok := s.cache["heat"][s.jobDir("heat").SparePath(0)]
	if n := len(s.cache["heat"]); n != 3 || !ok || spare.info.Epoch != 1 {
		t.Errorf("cache holds %d entries (the spare's: %v, epoch %d), want 3 with the spare's of epoch 1", n, ok, spare.info.Epoch)
	}
	idx, _ := s.Index("heat")
	if len(idx.Shards) != 2 || idx.Shards[0].Epoch != 4 {
		t.Errorf("after RemoveBefore(4): %+v", idx)
	}
	if removed, err := s.RemoveBefore("heat", 4); err != nil || len(removed) != 0 {
		t.Errorf("RemoveBefore again = %v, %v; want nothing", removed, err)
	}
	if _, err := s.RemoveBefore("heat", 0); !errors.Is(err, errkind.BadRequest) {
		t.Errorf("RemoveBefore(0): %v, want ErrBadRequest", err)
	}
	if _, err := s.RemoveBefore("../x", 3); !errors.Is(err, errkind.BadRequest) {
		t.Errorf("RemoveBefore of a bad job id: %v, want ErrBadRequest", err)
	}
	place(t, s, ref(6, 0), makeShard(t, "heat", 6, 0, 1, 10))
	s.Index("heat")
	if err := s.RemoveEpoch("heat", 5); err != nil {
		t.Fatalf("RemoveEpoch(5): %v", err)
	}
	if idx, _ := s.Index("heat"); len(idx.Shards) != 2 || idx.Shards[0].Epoch != 4 || idx.Shards[1].Epoch != 6 {
		t.Errorf("after RemoveEpoch(5): %+v, want epochs 4 and 6", idx)
	}
	if err := s.RemoveEpoch("heat", 5); err != nil {
		t.Errorf("RemoveEpoch of an epoch not there: %v", err)
	}
	if err := s.RemoveEpoch("../x", 5); !errors.Is(err, errkind.BadRequest) {
		t.Errorf("RemoveEpoch of a bad job id: %v, want ErrBadRequest", err)
	}
	s.RequestCheckpoint("heat")
	removed, err = s.RemoveJob("heat")
	if err != nil || !reflect.DeepEqual(removed, []uint64{4, 6}) {
		t.Errorf("RemoveJob = %v, %v", removed, err)
	}
	if _, err := os.Stat(s.jobDir("heat").Path()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("job directory still there: %v", err)
	}
	if jobs, _ := s.Jobs(); !reflect.DeepEqual(jobs, []string{"cold"}) {
		t.Errorf("Jobs = %v, want [cold]", jobs)
	}
	if removed, err := s.RemoveJob("heat"); err != nil || len(removed) != 0 {
		t.Errorf("RemoveJob again = %v, %v", removed, err)
	}
}

// A shard RemoveBefore retires is its rank's spare, which the rank's next Put
// writes over and cuts to size; a shard a reader holds open is not taken.
func TestPutWritesOverSpare(t *testing.T) {
	s := New(t.TempDir())
	place(t, s, ref(1, 0), makeShard(t, "heat", 1, 0, 1, 40000))
	place(t, s, ref(2, 0), makeShard(t, "heat", 2, 0, 1, 40000))
	first, err := os.Stat(s.path(ref(1, 0)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RemoveBefore("heat", 2); err != nil {
		t.Fatal(err)
	}
	spare := s.jobDir("heat").SparePath(0)
	if now, err := os.Stat(spare); err != nil || !os.SameFile(now, first) {
		t.Fatalf("the spare is not epoch 1's shard's file (%v)", err)
	}
	if idx, err := s.Index("heat"); err != nil || len(idx.Shards) != 1 || idx.Shards[0].Epoch != 2 {
		t.Errorf("Index beside a spare = %+v, %v; want epoch 2 alone", idx, err)
	}
	b := makeShard(t, "heat", 3, 0, 1, 1000) // shorter than the file it is written over
	if _, err := s.Put(ref(3, 0), bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	if now, err := os.Stat(s.path(ref(3, 0))); err != nil || !os.SameFile(now, first) {
		t.Errorf("epoch 3's shard is not the spare's file (%v)", err)
	}
	if _, err := os.Stat(spare); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the spare after Put: %v", err)
	}
	if got, err := os.ReadFile(s.path(ref(3, 0))); err != nil || !bytes.Equal(got, b) {
		t.Errorf("epoch 3's shard holds %d bytes (%v), want the %d put", len(got), err, len(b))
	}

	held, _, err := s.Open(ref(2, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := s.RemoveBefore("heat", 3); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(spare); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a held shard became the spare: %v", err)
	}
	got, err := io.ReadAll(held)
	if want := makeShard(t, "heat", 2, 0, 1, 40000); err != nil || !bytes.Equal(got, want) {
		t.Errorf("the held shard reads %d bytes (%v) after RemoveBefore, want epoch 2's %d", len(got), err, len(want))
	}
	// With no spare, a new file.
	if _, err := s.Put(ref(4, 0), bytes.NewReader(makeShard(t, "heat", 4, 0, 1, 1000)), -1); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Open(ref(4, 0)); err != nil {
		t.Errorf("epoch 4 without a spare: %v", err)
	}
	// Removing every epoch is the job's end: no spare is kept, and none is left.
	if _, err := s.RemoveBefore("heat", 4); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(spare); err != nil {
		t.Fatalf("epoch 3 retired beside epoch 4 left no spare: %v", err)
	}
	if removed, err := s.RemoveBefore("heat", ^uint64(0)); err != nil || !reflect.DeepEqual(removed, []uint64{4}) {
		t.Fatalf("RemoveBefore(all) = %v, %v", removed, err)
	}
	if ents, _ := os.ReadDir(s.jobDir("heat").Path()); len(ents) != 0 {
		t.Errorf("the job's directory after its end holds %v", ents)
	}
	// NoSpares: retired shards are removed.
	s.NoSpares = true
	place(t, s, ref(5, 0), makeShard(t, "heat", 5, 0, 1, 100))
	place(t, s, ref(6, 0), makeShard(t, "heat", 6, 0, 1, 100))
	if removed, err := s.RemoveBefore("heat", 6); err != nil || !reflect.DeepEqual(removed, []uint64{5}) {
		t.Fatalf("RemoveBefore(6) = %v, %v", removed, err)
	}
	if _, err := os.Stat(spare); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("NoSpares kept a spare: %v", err)
	}
}

func TestRequestCheckpoint(t *testing.T) {
	s := New(filepath.Join(t.TempDir(), "ckpt"))
	for i := 0; i < 2; i++ { // repeating is harmless
		if err := s.RequestCheckpoint("heat"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "heat", jobdir.Request)); err != nil {
		t.Error(err)
	}
	if err := s.RequestCheckpoint(".."); !errors.Is(err, errkind.BadRequest) {
		t.Errorf("RequestCheckpoint(..): %v, want ErrBadRequest", err)
	}
	for i := 0; i < 2; i++ { // withdrawing none is no error
		if err := s.WithdrawRequest("heat"); err != nil {
			t.Errorf("WithdrawRequest #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(filepath.Join(s.Dir, "heat", jobdir.Request)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("request after WithdrawRequest: %v, want it gone", err)
	}
}

// TestFileShrinks: a shard truncated while it is verified is a damaged shard
// (truncated), not a failure to read it.
func TestFileShrinks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r000000.shard")
	b := makeShard(t, "heat", 1, 0, 1, 4<<20)
	os.WriteFile(path, b, 0o644)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Truncate(path, 4096); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = verifyFile(f, int64(len(b)))
	var vf *verifyFailure
	if !errors.As(err, &vf) || !errors.Is(err, shard.ErrTruncated) {
		t.Errorf("verifyFile of a shrunk file: %v, want a verifyFailure of ckpt.ErrTruncated", err)
	}
}

// TestWaitIndex: a wait on the index ends when a shard appears, is damaged or is
// removed, or when progress reaches another whole percent; not for files being
// written or for progress within the same percent.
func TestWaitIndex(t *testing.T) {
	s := New(t.TempDir())
	s.RescanInterval = 10 * time.Millisecond
	jobDir := s.jobDir("heat").Path()
	writeProgress := func(f string) func() {
		return func() {
			tmp := filepath.Join(jobDir, "progress.tmp")
			os.MkdirAll(jobDir, 0o755)
			os.WriteFile(tmp, []byte(f+"\n"), 0o644)
			os.Rename(tmp, filepath.Join(jobDir, "progress"))
		}
	}
	good := makeShard(t, "heat", 3, 0, 2, 100)
	tests := []struct {
		name   string
		change func()
		wakes  bool
	}{
		{"a shard being written", func() {
			os.MkdirAll(filepath.Dir(s.path(ref(3, 0))), 0o755)
			os.WriteFile(s.path(ref(3, 0))+".1a2b.tmp", good[:50], 0o644)
		}, false},
		{"a shard renamed into place", func() {
			os.WriteFile(s.path(ref(3, 0))+".1a2b.tmp", good, 0o644)
			os.Rename(s.path(ref(3, 0))+".1a2b.tmp", s.path(ref(3, 0)))
		}, true},
		{"first progress", writeProgress("0.421"), true},
		{"progress within the percent", writeProgress("0.4299"), false},
		{"progress to the next percent", writeProgress("0.43"), true},
		{"the same shard written again", func() {
			os.WriteFile(s.path(ref(3, 0))+".3c4d.tmp", good, 0o644)
			os.Rename(s.path(ref(3, 0))+".3c4d.tmp", s.path(ref(3, 0)))
		}, false},
		{"a damaged shard written", func() {
			os.WriteFile(s.path(ref(3, 0))+".5e6f.tmp", flip(good, 150), 0o644)
			os.Rename(s.path(ref(3, 0))+".5e6f.tmp", s.path(ref(3, 0)))
		}, true},
		{"an epoch removed", func() { s.RemoveBefore("heat", 4) }, true},
		{"an epoch written", func() { place(t, s, ref(5, 0), makeShard(t, "heat", 5, 0, 2, 100)) }, true},
		// Shards are renamed into place: a file changed in place leaves its
		// directory as it was, and shows at the next call (below).
		{"a shard damaged in place", func() { place(t, s, ref(5, 0), flip(makeShard(t, "heat", 5, 0, 2, 100), 150)) }, false},
	}
	// Directories modified long ago: what shows a change is its modification
	// time changing, not the fingerprint being too young to trust.
	age := func() {
		old := time.Now().Add(-time.Hour)
		filepath.WalkDir(jobDir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				os.Chtimes(path, old, old)
			}
			return nil
		})
	}
	for _, tt := range tests {
		before, err := s.WaitIndex(context.Background(), "heat", "")
		if err != nil || before.Tag == "" {
			t.Fatalf("%s: index %+v, %v", tt.name, before, err)
		}
		age()
		if fp, _ := s.fingerprint("heat"); !fp.settled {
			t.Fatalf("%s: a fingerprint of directories modified an hour ago is not settled", tt.name)
		}
		time.AfterFunc(50*time.Millisecond, tt.change)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		start := time.Now()
		after, err := s.WaitIndex(ctx, "heat", before.Tag)
		took := time.Since(start)
		cancel()
		switch {
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.wakes && (after.Tag == before.Tag || took >= 500*time.Millisecond):
			t.Errorf("%s: the wait ended after %v with tag %s (before: %s), want a change", tt.name, took, after.Tag, before.Tag)
		case !tt.wakes && (after.Tag != before.Tag || took < 500*time.Millisecond):
			t.Errorf("%s: the wait ended after %v with tag %s (before: %s), want the whole wait unchanged", tt.name, took, after.Tag, before.Tag)
		}
		time.Sleep(60 * time.Millisecond) // the change is done before the next case
	}
	// A stale tag answers at once.
	if idx, err := s.WaitIndex(context.Background(), "heat", "stale"); err != nil || idx.Tag == "stale" || len(idx.Bad) != 1 {
		t.Errorf("WaitIndex with a stale tag = %+v, %v; want at once, with the shard damaged in place", idx, err)
	}
}

// TestFingerprintSettles: a fingerprint with a directory modified within a
// second is not trusted to show a later change in that second.
func TestFingerprintSettles(t *testing.T) {
	s := New(t.TempDir())
	place(t, s, ref(3, 0), makeShard(t, "heat", 3, 0, 1, 100))
	if fp, err := s.fingerprint("heat"); err != nil || fp.settled || len(fp.epochs) != 1 {
		t.Errorf("fingerprint after a write = %+v, %v; want epoch 3, not settled", fp, err)
	}
	old := time.Now().Add(-2 * time.Second)
	os.Chtimes(s.jobDir("heat").EpochPath(3), old, old)
	if fp, err := s.fingerprint("heat"); err != nil || !fp.settled {
		t.Errorf("fingerprint 2 s after the write = %+v, %v; want settled", fp, err)
	}
	if fp, err := s.fingerprint("other"); err != nil || !fp.settled || len(fp.epochs) != 0 {
		t.Errorf("fingerprint of a job with no directory = %+v, %v; want empty and settled", fp, err)
	}
}

// BenchmarkRescan is what WaitIndex costs per look at an unchanged job
// directory (three epochs of four verified shards and a progress file): a
// fingerprint, and what listing the shards again would cost.
func BenchmarkRescan(b *testing.B) {
	s := New(b.TempDir())
	t := &testing.T{}
	for e := uint64(1); e <= 3; e++ {
		for r := 0; r < 4; r++ {
			place(t, s, ref(e, r), makeShard(t, "heat", e, r, 4, 1<<20))
		}
	}
	os.WriteFile(filepath.Join(s.jobDir("heat").Path(), "progress"), []byte("0.5\n"), 0o644)
	if _, err := s.Index("heat"); err != nil {
		b.Fatal(err)
	}
	b.Run("index", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := s.Index("heat"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fingerprint", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := s.fingerprint("heat"); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The index carries the ranks' traffic files, parsed, in rank order; a file
// that does not parse and a temporary one are left out.
func TestIndexTraffic(t *testing.T) {
	s := New(t.TempDir())
	place(t, s, ref(3, 0), makeShard(t, "heat", 3, 0, 2, 100))
	dir := filepath.Join(s.jobDir("heat").Path(), "traffic")
	os.MkdirAll(dir, 0o755)
	for name, content := range map[string]string{
		"1":     "shoal-traffic 1 rank 1 nranks 2 epoch 3 first_epoch 1 seconds_mpi 0.5 seconds_total 2\n0 4096 4\n",
		"0":     "shoal-traffic 1 rank 0 nranks 2 epoch 3 first_epoch 1 seconds_mpi 0.25 seconds_total 2\n",
		"7":     "not a traffic file\n",
		"0.tmp": "shoal-traffic 1 rank 0 nranks 2 epoch 4 first_epoch 1 seconds_mpi 0 seconds_total 3\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	idx, err := s.Index("heat")
	if err != nil {
		t.Fatal(err)
	}
	want := []traffic.Report{
		{Rank: 0, Epoch: 3, SecondsMPI: 0.25, SecondsTotal: 2},
		{Rank: 1, Epoch: 3, SecondsMPI: 0.5, SecondsTotal: 2, Sent: []traffic.PeerReport{{Peer: 0, Bytes: 4096, Messages: 4}}},
	}
	if !reflect.DeepEqual(idx.Traffic, want) {
		t.Errorf("index traffic = %+v, want %+v", idx.Traffic, want)
	}
}

// The index carries the interval rank 0 reported in the job's interval file;
// a malformed file is unknown, not an error.
func TestIndexInterval(t *testing.T) {
	s := New(t.TempDir())
	place(t, s, ref(3, 0), makeShard(t, "heat", 3, 0, 2, 100))
	path := filepath.Join(s.jobDir("heat").Path(), "interval")
	for _, c := range []struct {
		line string
		want *job.Interval
	}{
		{"interval 4.5 auto 1 cost 0.0125 mtbf 900\n", &job.Interval{Every: job.Duration(4500 * time.Millisecond), Auto: true,
			Cost: job.Duration(12500 * time.Microsecond), MTBF: job.Duration(15 * time.Minute)}},
		{"interval 30 auto 0 cost 0 mtbf 0\n", &job.Interval{Every: job.Duration(30 * time.Second)}},
		{"interval 0 auto 0 cost 0 mtbf 0\n", &job.Interval{}},
		{"interval 4.5 auto 2 cost 0 mtbf 0\n", nil},
		{"interval -1 auto 0 cost 0 mtbf 0\n", nil},
		{"interval 4.5 auto 1 cost 0.01\n", nil},
		{"interval NaN auto 1 cost 0.01 mtbf 9\n", nil},
		{"", nil},
	} {
		if err := os.WriteFile(path, []byte(c.line), 0o644); err != nil {
			t.Fatal(err)
		}
		idx, err := s.Index("heat")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(idx.Interval, c.want) {
			t.Errorf("%q: interval %+v, want %+v", c.line, idx.Interval, c.want)
		}
	}
	os.Remove(path)
	if idx, _ := s.Index("heat"); idx.Interval != nil {
		t.Errorf("no interval file: %+v", idx.Interval)
	}
}

// TestRemoveBeforeDropsSparesOfRanksGone: a rank with no shard in the epochs
// that remain (it moved to another node) keeps no spare here; the others do.
func TestRemoveBeforeDropsSparesOfRanksGone(t *testing.T) {
	s := New(t.TempDir())
	for e := uint64(1); e <= 2; e++ {
		for rank := 0; rank < 2; rank++ {
			place(t, s, ref(e, rank), makeShard(t, "heat", e, rank, 2, 4000))
		}
	}
	jd := s.jobDir("heat")
	if _, err := s.RemoveBefore("heat", 2); err != nil {
		t.Fatal(err)
	}
	if spares, err := jd.Spares(); err != nil || len(spares) != 2 {
		t.Fatalf("spares after epoch 1 retired: %v, %v; want ranks 0 and 1", spares, err)
	}
	// Rank 1 moved away: epoch 3 has only rank 0's shard here.
	place(t, s, ref(3, 0), makeShard(t, "heat", 3, 0, 2, 4000))
	if _, err := s.RemoveBefore("heat", 3); err != nil {
		t.Fatal(err)
	}
	if spares, err := jd.Spares(); err != nil || len(spares) != 1 || spares[0] == "" {
		t.Errorf("spares after epoch 2 retired: %v, %v; want rank 0's alone", spares, err)
	}
}
