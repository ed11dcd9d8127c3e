package localrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/job"
	"shoal/internal/jobdir"
	"shoal/internal/retention"
	"shoal/internal/userdir"
)

// Files of a job's run directory (RunRoot/ID) this package keeps.
const (
	RecordFile = "run.json" // the job's [Record]
	LockFile   = "lock"     // held by the shoal run that runs the job, with its pid
)

// Store is where `shoal run` keeps the jobs it runs on this machine alone:
// CkptRoot/ID holds a job's checkpoints (on tmpfs where there is one), RunRoot/ID
// its run state, with the job's record and lock. Both roots are the user's own
// (userdir.Private). Its methods may be called from several processes at once:
// the lock of a job keeps a run and a collection of it apart.
type Store struct {
	CkptRoot, RunRoot string
}

func (s Store) runDir(id string) string  { return filepath.Join(s.RunRoot, id) }
func (s Store) ckptDir(id string) string { return filepath.Join(s.CkptRoot, id) }

// Read returns the record of job id; nil, and no error, when there is none.
func (s Store) Read(id string) (*Record, error) {
	b, err := os.ReadFile(filepath.Join(s.runDir(id), RecordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("record of job %s: %w", id, err)
	}
	if r.Format != Format || r.Job != id {
		return nil, fmt.Errorf("record of job %s: format %d of job %q, want format %d", id, r.Format, r.Job, Format)
	}
	return &r, nil
}

// Write replaces the record of r.Job, crash-safely: a temporary file, synced,
// renamed over the record, and the directory synced.
func (s Store) Write(r Record) error {
	r.Format = Format
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	dir := s.runDir(r.Job)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp := filepath.Join(dir, RecordFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, RecordFile))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("record of job %s: %w", r.Job, err)
	}
	return userdir.Tree{Base: s.RunRoot}.SyncDir(dir)
}

// Held reports whether checkpoints of job id are kept: its checkpoint
// directory holds an epoch.
func (s Store) Held(id string) bool {
	epochs, err := jobdir.Dir{Root: s.CkptRoot, Job: id}.Epochs()
	return err == nil && len(epochs) > 0
}

// Clear removes what earlier runs of job id left (its checkpoints, its run
// directory but the lock): a run started afresh (--fresh).
func (s Store) Clear(id string) error {
	if err := (userdir.Tree{Base: s.CkptRoot}).RemoveAll(s.ckptDir(id)); err != nil {
		return err
	}
	ents, err := os.ReadDir(s.runDir(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	for _, e := range ents {
		if e.Name() != LockFile {
			if err := (userdir.Tree{Base: s.RunRoot}).RemoveAll(filepath.Join(s.runDir(id), e.Name())); err != nil {
				return err
			}
		}
	}
	return err
}

// Lock is a job's lock, held while a shoal run runs it or a collection
// removes its data.
type Lock struct{ f *os.File }

// Lock takes the lock of job id, creating its run directory, and writes pid
// into it (0: a collection, which writes none). It fails with [ErrRunning]
// when another process holds it.
func (s Store) Lock(id string, pid int) (*Lock, error) {
	dir := s.runDir(id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	path := filepath.Join(dir, LockFile)
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, err
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			f.Close()
			if !errors.Is(err, unix.EWOULDBLOCK) {
				return nil, err
			}
			if holder, _ := strconv.Atoi(strings.TrimSpace(string(b[:n]))); holder > 0 {
				return nil, &Error{ErrRunning, fmt.Sprintf("job %s is running on this machine (pid %d)", id, holder)}
			}
			return nil, &Error{ErrRunning, fmt.Sprintf("job %s is in use on this machine (its data is being collected)", id)}
		}
		// A collection may have removed the directory, lock and all, between
		// the open and the lock: only the file still at path counts.
		held, _ := f.Stat()
		if now, err := os.Lstat(path); err != nil || !userdir.SameFile(held, now) {
			f.Close()
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			continue
		}
		if pid > 0 {
			f.Truncate(0)
			f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0)
		}
		return &Lock{f: f}, nil
	}
}

// Release lets the lock go.
func (l *Lock) Release() {
	if l != nil && l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// Removal is one item of a collection and what became of it.
type Removal struct {
	retention.Item
	Path  string
	Bytes int64 // its size, for what is (or, in a dry run, would be) removed
	Err   error // why removing it failed
}

// Collect applies the retention policy p at now to every job of the store,
// as an agent does to its node's (retention.Decide): a failed or cancelled
// run's data goes p.Failed after its end, a succeeded one's with --keep-for D
// D after, --keep never; data no run recorded is kept. With drop set it
// removes everything of that job instead, whatever its grace (retention.Drop;
// [ErrRunning] while a run holds it). Jobs a run holds are not touched; a
// record left running by a killed shoal run counts as failed when its data
// last changed. With dryRun nothing is removed.
func (s Store) Collect(p retention.Policy, now time.Time, drop string, dryRun bool) ([]Removal, error) {
	ids, err := s.ids()
	if err != nil {
		return nil, err
	}
	node := retention.Node{Jobs: map[string]retention.Held{}}
	var jobs []retention.Job
	locks := map[string]*Lock{}
	defer func() {
		for _, l := range locks {
			l.Release()
		}
	}()
	for _, id := range ids {
		d := jobdir.Dir{Root: s.CkptRoot, Job: id}
		var h retention.Held
		if fi, err := os.Lstat(d.Path()); err == nil && fi.IsDir() {
			h.Shards = true
			h.Epochs, _ = d.Epochs()
			spares, _ := d.Spares()
			h.Spares = len(spares) > 0
		}
		if fi, err := os.Lstat(s.runDir(id)); err == nil && fi.IsDir() {
			h.JobDir = true
		}
		node.Jobs[id] = h
		if _, err := os.Lstat(filepath.Join(s.runDir(id), RecordFile)); err != nil {
			// No record (an agent's job, in a data dir shared with one, or
			// data of an older shoal): unknown, kept until removed by name.
			continue
		}
		l, err := s.Lock(id, 0)
		if errors.Is(err, ErrRunning) {
			if id == drop {
				return nil, err
			}
			jobs = append(jobs, retention.Job{ID: id, State: job.Running})
			continue
		}
		if err != nil {
			return nil, err
		}
		locks[id] = l
		rec, err := s.Read(id)
		if err != nil || rec == nil {
			continue // unknown: kept until removed by name
		}
		rj := retention.Job{ID: id, State: rec.State, Ended: rec.Ended, Keep: time.Duration(rec.Keep)}
		if !job.Terminal(rec.State) || rec.Ended.IsZero() {
			rj.State, rj.Ended = job.Failed, s.lastChange(id)
		}
		jobs = append(jobs, rj)
	}
	var plan retention.Plan
	if drop != "" {
		if plan, err = retention.Drop(p, now, jobs, node, drop); err != nil {
			return nil, err
		}
	} else {
		plan = retention.Decide(p, now, jobs, node)
	}
	var out []Removal
	failed := map[string]bool{}
	for _, it := range plan.Items {
		r := Removal{Item: it, Path: s.path(it)}
		if it.Remove || dryRun {
			r.Bytes = s.usage(it)
		}
		if it.Remove && !dryRun {
			if failed[it.Job] && it.Kind == retention.KindJobDir {
				// The record goes last, and not while other data of the job
				// stays: without it, that data would be kept forever.
				r.Remove, r.Err = false, errors.New("kept while the job's other data could not be removed")
			} else if err := s.remove(it); err != nil {
				r.Remove, r.Err = false, err
				failed[it.Job] = true
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// ids lists the jobs of which the store holds a directory.
func (s Store) ids() ([]string, error) {
	var ids []string
	for _, root := range []string{s.CkptRoot, s.RunRoot} {
		ents, err := os.ReadDir(root)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.IsDir() && job.ValidID(e.Name()) && !slices.Contains(ids, e.Name()) {
				ids = append(ids, e.Name())
			}
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// lastChange is when job id's data last changed: its record, checkpoint
// directory (an epoch written or pruned changes it) or launcher log. A killed
// run ended no earlier. (Not the run directory's: a collection's lock touches
// it.)
func (s Store) lastChange(id string) time.Time {
	var t time.Time
	for _, p := range []string{filepath.Join(s.runDir(id), RecordFile), s.ckptDir(id), filepath.Join(s.runDir(id), "launcher.log")} {
		if fi, err := os.Lstat(p); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		}
	}
	return t
}

func (s Store) path(it retention.Item) string {
	switch it.Kind {
	case retention.KindShards:
		return s.ckptDir(it.Job)
	case retention.KindEpoch:
		return jobdir.Dir{Root: s.CkptRoot, Job: it.Job}.EpochPath(it.Epoch)
	case retention.KindSpares:
		return filepath.Join(s.ckptDir(it.Job), "r*.spare")
	case retention.KindJobDir:
		return s.runDir(it.Job)
	}
	return ""
}

func (s Store) tree(it retention.Item) userdir.Tree {
	if it.Kind == retention.KindJobDir {
		return userdir.Tree{Base: s.RunRoot}
	}
	return userdir.Tree{Base: s.CkptRoot}
}

// usage is the size of an item's files in bytes; what it cannot read counts
// as nothing.
func (s Store) usage(it retention.Item) int64 {
	if it.Kind != retention.KindSpares {
		n, _ := s.tree(it).Usage(s.path(it))
		return n
	}
	spares, _ := jobdir.Dir{Root: s.CkptRoot, Job: it.Job}.Spares()
	var n int64
	for _, path := range spares {
		if fi, err := os.Lstat(path); err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
	}
	return n
}

func (s Store) remove(it retention.Item) error {
	if !job.ValidID(it.Job) {
		return fmt.Errorf("job id %q: not one", it.Job) // never a path outside the roots
	}
	switch it.Kind {
	case retention.KindShards, retention.KindEpoch, retention.KindJobDir:
		return s.tree(it).RemoveAll(s.path(it))
	case retention.KindSpares:
		_, err := jobdir.Dir{Root: s.CkptRoot, Job: it.Job}.RemoveSpares(func(int) bool { return false })
		return err
	}
	return fmt.Errorf("%s: not kept by a run on this machine", it.Kind)
}
