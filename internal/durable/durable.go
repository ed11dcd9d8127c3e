// Package durable keeps a job's newest complete checkpoint epoch where it outlives the
// job's nodes, so that a job whose every node was lost at once, or whose Slurm
// allocation ended, resumes from it instead of from the beginning. A [Store] is one of
// two backends: a directory of the cluster's shared file system (`--durable DIR`,
// [DirStore]) or a bucket of an S3-compatible object store (`--durable
// s3://BUCKET/PREFIX`, [S3Store]). [ParseLocation] tells them apart and [Open] opens
// either.
//
// A directory holds at most one complete epoch, plus the one being written:
//
//	DIR/epoch-N/manifest.json        what the epoch is and which job it belongs to
//	DIR/epoch-N/rank-R.shard         every rank's shard, as libshoal wrote it
//	DIR/.epoch-M.tmp/                the next epoch, until it is whole
//
// An epoch is written under its temporary name, every file fsynced, the manifest last,
// then renamed to epoch-N and the directory fsynced, and only then is the older epoch
// removed: a crash at any point leaves a complete epoch or a temporary directory that
// nothing reads, never a half epoch under a complete one's name. Shards verify
// themselves (docs/shard-format.md), so a reader checks every byte it resumes from.
//
// An object store has no rename, so there the manifest is what makes an epoch
// complete:
//
//	PREFIX/epoch-N/rank-R.shard      every rank's shard, uploaded first (multipart
//	                                 when large), each verified as it passes
//	PREFIX/epoch-N/manifest.json     written last, once every shard is in
//
// The newest epoch with a valid manifest is current. A save that stops between its
// shards and its manifest leaves objects no manifest names and the previous epoch
// current; the next save removes them. A store keeps the two newest complete epochs,
// not one: every object is verified when it is read (a shard by its own checksum, and
// against the manifest's size and checksum), and a corrupt object of the newest epoch
// is refused and the one before resumed, which costs one durable interval of work
// rather than the job. An epoch of another job is refused, never skipped.
package durable

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"shoal/internal/job"
)

// Errors of the durable package.
var (
	// ErrNoEpoch: the directory holds no complete epoch (a first run).
	ErrNoEpoch = errors.New("durable: no complete epoch")
	// ErrCorrupt: the newest complete epoch cannot be read or a shard of it fails
	// verification.
	ErrCorrupt = errors.New("durable: corrupt epoch")
	// ErrForeign: the newest complete epoch belongs to another job (another
	// program, other arguments, or another rank count for a job that is not
	// elastic).
	ErrForeign = errors.New("durable: epoch of another job")
	// ErrNoCredentials: this process has no credentials for the object store
	// (see [HasCredentials]).
	ErrNoCredentials = errors.New("durable: no credentials for the object store")
)

// Format is the version of the manifest this package writes and reads.
const Format = 1

// ManifestName is the manifest's file name in an epoch's directory.
const ManifestName = "manifest.json"

// Identity is what makes a durable epoch the same job's: the program's file name,
// its arguments and the number of ranks. A run with the same identity resumes from
// the epoch whoever wrote it (a requeued Slurm job, a new batch job, a user by hand);
// a run with another is refused rather than fed another program's state. An elastic
// run (--min-ranks/--max-ranks) resumes an epoch of its program and arguments written
// by any number of ranks: libshoal restores its distributed regions onto the new
// count, and refuses, naming the region, a per-rank one it cannot.
type Identity struct {
	Program string   `json:"program"` // the program's file name, without its directory
	Args    []string `json:"args"`
	// Ranks is, in a manifest, the number of ranks that wrote the epoch; in the
	// identity a run asks for, its fixed count (unused when Elastic).
	Ranks int `json:"ranks"`
	// Elastic: the job names a range of rank counts rather than one.
	Elastic bool `json:"elastic,omitempty"`
}

// String is the identity as a user would type it: "heat --steps 3000 on 6 ranks",
// or a run's elastic "heat --steps 3000 on any number of ranks".
func (id Identity) String() string {
	cmd := strings.Join(append([]string{id.Program}, id.Args...), " ")
	if id.Elastic && id.Ranks == 0 {
		return cmd + " on any number of ranks"
	}
	return fmt.Sprintf("%s on %d ranks", cmd, id.Ranks)
}

// ResumedBy reports whether a run asking for identity want may resume the epoch
// whose identity is id: the same program and arguments, and the same number of
// ranks unless want is elastic.
func (id Identity) ResumedBy(want Identity) bool {
	return id.Program == want.Program && slices.Equal(id.Args, want.Args) && (want.Elastic || id.Ranks == want.Ranks)
}

// IdentityOf is the identity of the job spec describes: its program's file
// name, its arguments and its rank count, or any count when it is elastic.
func IdentityOf(spec job.Spec) Identity {
	args := spec.Argv[1:]
	if args == nil {
		args = []string{}
	}
	if spec.Elastic() {
		return Identity{Program: filepath.Base(spec.Argv[0]), Args: args, Elastic: true}
	}
	return Identity{Program: filepath.Base(spec.Argv[0]), Args: args, Ranks: spec.Ranks}
}

// ForEpoch is the manifest, shards not yet listed, of epoch of job written as
// shards shards by a run of identity id: the epoch's own count, as an elastic
// job's changes from run to run, and a program that gave libshoal a
// communicator of its first ranks only wrote fewer shards than its run had
// ranks (the run's count is then World).
func (id Identity) ForEpoch(job string, epoch uint64, shards int) Manifest {
	m := Manifest{Identity: id, Job: job, Epoch: epoch}
	m.Ranks = shards
	if !id.Elastic && id.Ranks > shards {
		m.World = id.Ranks
	}
	return m
}

// Manifest describes one durable epoch. Job is the Shoal job id the shards carry in
// their headers, which the resumed job takes on; SlurmJob, the Slurm job that wrote
// it, is for people reading it, not part of the identity.
type Manifest struct {
	Format int `json:"format"`
	Identity
	Job       string `json:"job"`
	SlurmJob  string `json:"slurm_job,omitempty"`
	Epoch     uint64 `json:"epoch"`
	CreatedNs uint64 `json:"created_ns"` // when the checkpoint was taken
	// World is the rank count of the run that wrote the epoch when it had more
	// ranks than shards (Ranks): a program that gives libshoal a communicator of
	// its first ranks only, as NAS MG parks its surplus ranks; 0 when they are
	// equal. A run of that count resumes the epoch, its extra ranks getting no
	// shard, as they had none.
	World int `json:"world,omitempty"`
	// Shards are by rank, Ranks long: each shard's size and its XXH3-64 checksum
	// (the shard's last 8 bytes), checked against the shard when it is read.
	Shards []ShardEntry `json:"shards"`
}

// ShardEntry is one rank's shard in a [Manifest].
type ShardEntry struct {
	Size     int64  `json:"size"`
	Checksum uint64 `json:"checksum"`
}

// Validate checks that m is a manifest this package can resume from; its errors
// name the field.
func (m Manifest) Validate() error {
	switch {
	case m.Format != Format:
		return fmt.Errorf("format %d, want %d", m.Format, Format)
	case m.Program == "":
		return errors.New("no program")
	case m.Ranks < 1:
		return fmt.Errorf("ranks %d, want at least 1", m.Ranks)
	case m.Job == "":
		return errors.New("no job id")
	case m.Epoch == 0:
		return errors.New("epoch 0")
	case len(m.Shards) != m.Ranks:
		return fmt.Errorf("%d shards listed for %d ranks", len(m.Shards), m.Ranks)
	case m.World != 0 && m.World <= m.Ranks:
		return fmt.Errorf("world %d, want more than the %d ranks with a shard, or none", m.World, m.Ranks)
	}
	return nil
}

// Writer is the identity of the run that wrote the epoch: the manifest's, with
// the run's own rank count where it had ranks without a shard (World).
func (m Manifest) Writer() Identity {
	id := m.Identity
	id.Ranks = max(m.Ranks, m.World)
	return id
}

// epochDir is the name of complete epoch e's directory, tmpDir that of e while it
// is written.
func epochDir(e uint64) string { return fmt.Sprintf("epoch-%d", e) }
func tmpDir(e uint64) string   { return fmt.Sprintf(".epoch-%d.tmp", e) }

// shardName is rank's shard file in an epoch's directory.
func shardName(rank int) string { return fmt.Sprintf("rank-%d.shard", rank) }

// Complete returns the complete epochs among a directory's entry names, newest
// first; temporary directories and other names are ignored.
func Complete(names []string) []uint64 {
	var out []uint64
	for _, n := range names {
		if e, ok := parseEpochDir(n); ok {
			out = append(out, e)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}

// parseEpochDir returns the epoch a complete epoch's directory name names.
func parseEpochDir(name string) (uint64, bool) {
	var e uint64
	rest, ok := strings.CutPrefix(name, "epoch-")
	if !ok {
		return 0, false
	}
	if _, err := fmt.Sscanf(rest, "%d", &e); err != nil || e == 0 || epochDir(e) != name {
		return 0, false
	}
	return e, true
}
