package shard

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"

	"shoal/internal/job"
	"shoal/internal/traffic"
)

// BlockSize is the length of the blocks a shard's changes are counted in
// (POST /v1/shards/{job}/{epoch}/{rank}/changes); a shard's last block may be
// shorter.
const BlockSize = 256 << 10

// Ref names one checkpoint shard.
type Ref struct {
	Job   string
	Epoch uint64
	Rank  int
}

func (s Ref) String() string { return fmt.Sprintf("%s/%d/%d", s.Job, s.Epoch, s.Rank) }

// ParityRef names one parity file of a job (--redundancy rs:K+M): row Row of
// group Group of epoch Epoch.
type ParityRef struct {
	Job   string
	Epoch uint64
	Group int
	Row   int
}

func (p ParityRef) String() string {
	return fmt.Sprintf("%s/%d/parity/%d/%d", p.Job, p.Epoch, p.Group, p.Row)
}

// Info is one shard stored on a node that passed full verification
// (docs/shard-format.md) and holds the job, epoch and rank its path names.
type Info struct {
	Epoch     uint64 `json:"epoch"`
	Rank      int    `json:"rank"`
	NRanks    int    `json:"nranks"`
	Size      int64  `json:"size"`       // bytes
	CreatedNs uint64 `json:"created_ns"` // when the checkpoint was taken, ns since the Unix epoch
	Checksum  uint64 `json:"checksum"`   // the shard's XXH3-64 (its last 8 bytes): equal copies have equal checksums
	// PerRank lists the ids of the shard's per-rank (plain) regions, which a restart
	// on another number of ranks cannot restore: an epoch whose shards have none can
	// be restored onto any count (docs/shard-format.md, "Region kinds").
	PerRank []int32 `json:"per_rank,omitempty"`
}

// Ref returns the reference of the shard of job described by i.
func (i Info) Ref(job string) Ref { return Ref{Job: job, Epoch: i.Epoch, Rank: i.Rank} }

// Bad is a file stored under a shard's name that fails verification: it
// is never served, fetched or counted.
type Bad struct {
	Epoch uint64 `json:"epoch"`
	Rank  int    `json:"rank"`
	// Error is the short name of the failed check from docs/shard-format.md
	// ("truncated", "bad magic", "unsupported version", "checksum mismatch",
	// "bad header", "bad region table", "wrong shard"), or "unreadable".
	Error  string `json:"error"`
	Detail string `json:"detail,omitempty"` // the whole message, for people
}

// Index is the answer of GET /v1/shards/{job}: the job's shards on the
// answering node, by epoch then rank.
type Index struct {
	Job    string `json:"job"`
	Shards []Info `json:"shards"`
	Bad    []Bad  `json:"bad"`
	// Parity lists the verified Reed–Solomon parity files of the job on this
	// node (--redundancy rs:K+M), by epoch, group, row.
	Parity []ParityInfo `json:"parity,omitempty"`
	// Progress is the job's progress as its rank 0 last reported it on this node
	// (shoal_progress); absent when no rank 0 of the job has run here.
	Progress *job.Progress `json:"progress,omitempty"`
	// Traffic is what the job's ranks on this node reported of their traffic
	// (not part of the tag: it changes with every checkpoint anyway).
	Traffic []traffic.Report `json:"traffic,omitempty"`
	// Interval is the checkpoint interval the job's rank 0 on this node uses,
	// as it last reported it (not part of the tag: it changes at checkpoints).
	Interval *job.Interval `json:"interval,omitempty"`
	// Silent lists the job's ranks on this node that run and made no snapshot
	// call for longer than [job.SilentAfter] their usual time between calls,
	// by rank; empty while every rank calls (docs/api.md).
	Silent []job.Silent `json:"silent,omitempty"`
	// Tag names what the index says, as [Index.ComputeTag] digests it: a
	// client passes it back as ?known= to wait for the next change.
	Tag string `json:"tag"`
}

// ComputeTag returns the tag of idx: a digest of its shards (epoch, rank,
// size, checksum), its bad shards (epoch, rank, failed check), its silent
// ranks (rank, calls and whether it is idle: a silence and what the hang
// rule weighs of it, not its length) and its progress in whole
// percents. Progress is rounded so that a rank 0 reporting every
// second changes the tag at most once per percent: a client waiting for news
// of the shards wakes up no more often than that.
func (idx Index) ComputeTag() string {
	h := fnv.New64a()
	var b [8]byte
	put := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		h.Write(b[:])
	}
	put(uint64(len(idx.Shards)))
	for _, s := range idx.Shards {
		put(s.Epoch)
		put(uint64(s.Rank))
		put(uint64(s.Size))
		put(s.Checksum)
	}
	put(uint64(len(idx.Parity)))
	for _, p := range idx.Parity {
		put(p.Epoch)
		put(uint64(p.Group))
		put(uint64(p.Row))
		put(p.Checksum)
	}
	put(uint64(len(idx.Bad)))
	for _, s := range idx.Bad {
		put(s.Epoch)
		put(uint64(s.Rank))
		h.Write([]byte(s.Error))
		h.Write([]byte{0})
	}
	put(uint64(len(idx.Silent)))
	for _, s := range idx.Silent {
		put(uint64(s.Rank))
		put(uint64(s.Calls))
		// A client weighs the Busy of the silence's last report: a rank that
		// computed a while before it stopped is reported busy first, and is
		// hung only once a report says idle.
		if s.Idle() {
			put(1)
		} else {
			put(0)
		}
	}
	if p := idx.Progress; p != nil {
		put(1 + uint64(math.Floor(p.Fraction*100)))
	} else {
		put(0)
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// ParityInfo is one Reed–Solomon parity file stored on a node that passed
// full verification (docs/shard-format.md, "Parity files"): row Row of the
// parity of group Group of an epoch, over the shards of Ranks whose trailing
// checksums were Sums when it was computed.
type ParityInfo struct {
	Epoch    uint64   `json:"epoch"`
	Group    int      `json:"group"`
	Row      int      `json:"row"`
	K        int      `json:"k"`
	M        int      `json:"m"`
	Ranks    []int    `json:"ranks"`
	Sums     []uint64 `json:"sums"`
	Size     int64    `json:"size"`     // bytes
	Checksum uint64   `json:"checksum"` // the parity file's XXH3-64
}
