package jobdir

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"shoal/internal/shard"
	"shoal/internal/userdir"
)

// Dir is the directory of one job's shards on one node: root/job, laid out as in
// docs/shard-format.md. Its methods are safe for concurrent use by readers; writers
// are libshoal's ranks. The directory may belong to the job's owner, who can change
// anything in it: its methods resolve every path below Root without following a
// symbolic link ([userdir.Tree]), and Root must be the agent's own.
type Dir struct {
	Root string
	Job  string
}

// Tree is the tree of Root, through which every file of the job is reached.
func (d Dir) Tree() userdir.Tree { return userdir.Tree{Base: d.Root} }

// Path returns the directory of the job.
func (d Dir) Path() string { return filepath.Join(d.Root, d.Job) }

// EpochPath returns the directory of one epoch.
func (d Dir) EpochPath(epoch uint64) string {
	return filepath.Join(d.Path(), EpochName(epoch))
}

// EpochName is the name of the directory of one epoch in its job's directory.
func EpochName(epoch uint64) string { return fmt.Sprintf("e%08d", epoch) }

// ShardPath returns the file of one shard.
func (d Dir) ShardPath(epoch uint64, rank int) string {
	return filepath.Join(d.EpochPath(epoch), fmt.Sprintf("r%06d.shard", rank))
}

// SparePath returns the file a retired shard of rank is kept in (RetireEpoch), for
// the next shard of rank stored on this node to be written over: libshoal's writer
// and the agent's shard store both take it when they write one.
func (d Dir) SparePath(rank int) string {
	return filepath.Join(d.Path(), fmt.Sprintf("r%06d.spare", rank))
}

// ParseShardName returns the rank of a final shard file name, r<6 digits>.shard
// (more digits for ranks beyond 999999, as %06d writes them).
func ParseShardName(name string) (int, bool) { return parseRankName(name, ".shard") }

// parseRankName returns the rank of a file name r<6 digits><suffix>.
func parseRankName(name, suffix string) (int, bool) {
	if len(name) < len("r000000")+len(suffix) || name[0] != 'r' || !strings.HasSuffix(name, suffix) {
		return 0, false
	}
	rank, err := strconv.Atoi(name[1 : len(name)-len(suffix)])
	if err != nil || rank < 0 || fmt.Sprintf("r%06d%s", rank, suffix) != name {
		return 0, false
	}
	return rank, true
}

// Epochs lists the epoch directories present, oldest first, complete or not.
func (d Dir) Epochs() ([]uint64, error) {
	ents, err := d.Tree().ReadDir(d.Path())
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	return EpochsIn(ents), nil
}

// EpochsIn returns the epochs whose directories are among ents, a listing of a
// job's directory, oldest first.
func EpochsIn(ents []fs.DirEntry) []uint64 {
	var out []uint64
	for _, e := range ents {
		n := e.Name()
		if !e.IsDir() || len(n) != 9 || n[0] != 'e' {
			continue
		}
		if v, err := strconv.ParseUint(n[1:], 10, 64); err == nil && v > 0 {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// ShardCount returns how many ranks' shards of epoch are present under their final
// names (written completely, not yet verified).
func (d Dir) ShardCount(epoch uint64) int {
	ents, err := d.Tree().ReadDir(d.EpochPath(epoch))
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".shard") {
			n++
		}
	}
	return n
}

// VerifyShard reads and fully verifies the shard of rank at epoch, including that it
// is the shard asked for. It reads the file a piece at a time ([shard.Verify]).
func (d Dir) VerifyShard(epoch uint64, rank, nranks int) (shard.Header, error) {
	return d.readShard(epoch, rank, nranks, func(r io.Reader, size int64) (shard.Header, error) {
		h, _, err := shard.Verify(r, size)
		return h, err
	})
}

// CheckShard reads the header of the shard of rank at epoch and checks that it is
// the shard asked for, whole as its header describes it ([shard.ReadHeader]); its
// checksum is left for [Dir.VerifyShard].
func (d Dir) CheckShard(epoch uint64, rank, nranks int) (shard.Header, error) {
	return d.readShard(epoch, rank, nranks, shard.ReadHeader)
}

func (d Dir) readShard(epoch uint64, rank, nranks int, read func(io.Reader, int64) (shard.Header, error)) (shard.Header, error) {
	path := d.ShardPath(epoch, rank)
	f, st, err := OpenShard(d.Tree(), path)
	if err != nil {
		return shard.Header{}, err
	}
	defer f.Close()
	h, err := read(f, st.Size())
	if err != nil {
		if shard.ShortName(err) == "" {
			return shard.Header{}, err // a failure to read, not a bad shard
		}
		return shard.Header{}, &shard.Error{Path: path, Err: err}
	}
	want := shard.Header{Job: d.Job, Epoch: epoch, Rank: uint32(rank), NRanks: uint32(nranks)}
	if err := h.Check(want); err != nil {
		return shard.Header{}, &shard.Error{Path: path, Err: err}
	}
	return h, nil
}

// VerifyEpoch verifies every rank's shard of epoch and returns rank 0's header.
func (d Dir) VerifyEpoch(epoch uint64, nranks int) (shard.Header, error) {
	return d.eachShard(epoch, nranks, d.VerifyShard)
}

// CheckEpoch checks every rank's shard of epoch as [Dir.CheckShard] does and
// returns rank 0's header.
func (d Dir) CheckEpoch(epoch uint64, nranks int) (shard.Header, error) {
	return d.eachShard(epoch, nranks, d.CheckShard)
}

func (d Dir) eachShard(epoch uint64, nranks int, read func(epoch uint64, rank, nranks int) (shard.Header, error)) (shard.Header, error) {
	var h0 shard.Header
	for r := 0; r < nranks; r++ {
		h, err := read(epoch, r, nranks)
		if err != nil {
			return shard.Header{}, fmt.Errorf("rank %d: %w", r, err)
		}
		if r == 0 {
			h0 = h
		}
	}
	return h0, nil
}

// RemoveEpoch deletes one epoch directory.
func (d Dir) RemoveEpoch(epoch uint64) error { return d.Tree().RemoveAll(d.EpochPath(epoch)) }

// RetireEpoch deletes one epoch directory that newer epochs have replaced, keeping
// each shard of a rank in keep as the rank's spare (SparePath) where the rank has
// none: the file's pages are written over by the rank's next shard instead of new
// ones taken from the kernel (on a virtual machine that hands freed memory back to
// its host, new pages of a tmpfs fault in from the host, several times the cost of
// the copy). A shard a reader holds (OpenShard) is removed instead, and stays
// whole for the reader. A spare costs a shard's worth of storage between
// checkpoints.
func (d Dir) RetireEpoch(epoch uint64, keep func(rank int) bool) error {
	dir := d.EpochPath(epoch)
	ents, _ := d.Tree().ReadDir(dir)
	for _, e := range ents {
		if rank, ok := ParseShardName(e.Name()); ok && keep(rank) && e.Type().IsRegular() {
			keepAsSpare(d.Tree(), filepath.Join(dir, e.Name()), d.SparePath(rank))
		}
	}
	return d.Tree().RemoveAll(dir)
}

// ShardRanks returns the ranks with a shard (rNNNNNN.shard) in any of epochs.
func (d Dir) ShardRanks(epochs []uint64) map[int]bool {
	ranks := map[int]bool{}
	for _, e := range epochs {
		ents, _ := d.Tree().ReadDir(d.EpochPath(e))
		for _, ent := range ents {
			if rank, ok := ParseShardName(ent.Name()); ok {
				ranks[rank] = true
			}
		}
	}
	return ranks
}

// Spares returns the job's spares (RetireEpoch) by rank.
func (d Dir) Spares() (map[int]string, error) {
	ents, err := d.Tree().ReadDir(d.Path())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	spares := map[int]string{}
	for _, e := range ents {
		if rank, ok := parseRankName(e.Name(), ".spare"); ok {
			spares[rank] = filepath.Join(d.Path(), e.Name())
		}
	}
	return spares, nil
}

// RemoveSpares deletes the job's spares but those of the ranks in keep (nil:
// all of them), and returns the spares kept, by rank.
func (d Dir) RemoveSpares(keep func(rank int) bool) (map[int]string, error) {
	spares, err := d.Spares()
	if err != nil {
		return nil, err
	}
	for rank, path := range spares {
		if keep != nil && keep(rank) {
			continue
		}
		if err := d.Tree().Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		delete(spares, rank)
	}
	return spares, nil
}

// keepAsSpare gives the shard file at path the name spare if no reader holds it
// and spare names nothing. The link and the removal happen under an exclusive
// lock, so a reader that opened path before sees it gone once it has its lock.
func keepAsSpare(t userdir.Tree, path, spare string) {
	f, err := t.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		return
	}
	if t.Link(path, spare) == nil {
		t.Remove(path)
	}
}

// ManifestEntry is one complete epoch as recorded in a manifest line.
type ManifestEntry struct {
	Epoch     uint64
	NRanks    int
	CreatedNs uint64
}

// WriteManifest replaces the job's manifest with entries (oldest first), through a
// temporary file and a rename, so a reader sees the old list or the new one.
func (d Dir) WriteManifest(entries []ManifestEntry) error {
	var b strings.Builder
	for _, e := range entries {
		fmt.Fprintf(&b, "epoch %d nranks %d created_ns %d\n", e.Epoch, e.NRanks, e.CreatedNs)
	}
	return d.Tree().WriteFile(filepath.Join(d.Path(), Manifest), []byte(b.String()), 0o644)
}

// ReadManifest returns the complete epochs recorded in the job's manifest, in file
// order (oldest first). A missing manifest is an empty one; a malformed line is an
// error naming the line; the run line of a standalone manifest is skipped.
func (d Dir) ReadManifest() ([]ManifestEntry, error) {
	f, err := d.Tree().Open(filepath.Join(d.Path(), Manifest))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ManifestEntry
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		if strings.HasPrefix(sc.Text(), "run ") {
			continue // standalone libshoal's program binding (shard-format.md): not an epoch
		}
		var e ManifestEntry
		if _, err := fmt.Sscanf(sc.Text(), "epoch %d nranks %d created_ns %d", &e.Epoch, &e.NRanks, &e.CreatedNs); err != nil {
			return nil, fmt.Errorf("%s line %d: %q: not \"epoch E nranks N created_ns T\"", f.Name(), line, sc.Text())
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// OpenShard opens the shard file at path in t for reading, under a shared lock
// held until the file is closed. A shard is moved aside to be written over
// (libshoal's store.c, recycle_or_remove; RetireEpoch) only when it can be locked
// exclusively; a shard moved between the open and the lock is not the file at path
// any more, which is then reported missing, as a removed one is.
func OpenShard(t userdir.Tree, path string) (*os.File, os.FileInfo, error) {
	f, err := t.Open(path)
	if err != nil {
		return nil, nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if now, err := t.Lstat(path); err != nil || !userdir.SameFile(st, now) {
		f.Close()
		return nil, nil, &os.PathError{Op: "open", Path: path, Err: os.ErrNotExist}
	}
	return f, st, nil
}

// SumsPath is the block sums file of the shard file at shardPath.
func SumsPath(shardPath string) string { return strings.TrimSuffix(shardPath, ".shard") + ".sums" }
