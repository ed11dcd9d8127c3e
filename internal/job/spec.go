package job

import (
	"encoding/json"
	"fmt"
	"time"
)

// Spec is what POST /v1/jobs submits. [Spec.Validate] lists the rules.
type Spec struct {
	// Owner is the user the job runs as on every node, and the only one (with
	// root) who sees it: a local user who submits through an agent's socket
	// gets their own, set by the agent from the caller's credentials (naming
	// another is refused); root and holders of the secret may name any user
	// but root (shoal run --user). nil: the agents' user, root usually.
	Owner *Owner `json:"owner,omitempty"`
	// ID names the job; empty: the coordinator names it after the program with a
	// random suffix ("heat-3f9a2c"). 1 to 63 bytes of [A-Za-z0-9._-].
	ID string `json:"id,omitempty"`
	// Ranks is the job's rank count; for an elastic job (MinRanks or
	// MaxRanks set), the count of its first launch, or 0 for the
	// coordinator's choice (one rank per core).
	Ranks int `json:"ranks"`
	// MinRanks and MaxRanks make the job elastic: at every reconfiguration
	// (a node lost or leaving, a node joining, a rebalance) the coordinator
	// chooses its rank count within them, and the ranks restore from a
	// checkpoint of another count (libshoal's distributed regions,
	// docs/libshoal.md). 0: no bound on that side but the job's limits.
	MinRanks int `json:"min_ranks,omitempty"`
	MaxRanks int `json:"max_ranks,omitempty"`
	// RankMultiple and RanksPow2 constrain an elastic job's count: a
	// multiple of RankMultiple (0 or 1: any), a power of two.
	RankMultiple int  `json:"rank_multiple,omitempty"`
	RanksPow2    bool `json:"ranks_pow2,omitzero"`
	// MixArch lets one world span nodes of several instruction sets, each
	// running the build of its own (Files of one name, one per set); without
	// it a job runs on the nodes of one set. Open MPI 4.1 and MPICH 4.0 run
	// such a world between x86-64 and arm64 (docs/testbed.md).
	MixArch bool     `json:"mix_arch,omitzero"`
	Argv    []string `json:"argv"` // program (a staged file's name or an absolute path) and arguments
	// Files are staged to every node the job uses before launch: the program
	// and the inputs given with --file. Each must already be stored on the
	// submitting node (PUT /v1/files/{sha256}).
	Files              []File            `json:"files,omitempty"`
	Env                map[string]string `json:"env,omitempty"`
	Engine             string            `json:"engine,omitempty"` // "openmpi" (the default) or "mpich"
	CheckpointInterval Duration          `json:"checkpoint_interval,omitzero"`
	// CheckpointAuto has libshoal choose the interval between checkpoints from
	// their cost and the cluster's failure record (--ckpt-interval auto);
	// CheckpointInterval is then unset.
	CheckpointAuto bool `json:"checkpoint_auto,omitzero"`
	// MTBF is each node's mean time between failures as the user gives it
	// (--mtbf), for CheckpointAuto; unset, the cluster's failure record says.
	MTBF             Duration `json:"mtbf,omitzero"`
	MaxRestarts      int      `json:"max_restarts,omitempty"`
	MaxOversubscribe float64  `json:"max_oversubscribe,omitempty"` // ranks per core allowed (0.5: one per two cores); 0: 1
	// RanksPerNode bounds the ranks of any one node, whatever its cores: 1
	// spreads them one per node. 0: no bound but MaxOversubscribe's.
	RanksPerNode int `json:"ranks_per_node,omitempty"`
	// WaitForNodes is how long a job whose ranks do not fit the live nodes (at
	// MaxOversubscribe) waits for nodes to join before it fails. 0: do not wait;
	// a relaunch then oversubscribes the survivors rather than stop.
	WaitForNodes Duration `json:"wait_for_nodes,omitzero"`
	// AutoRebalance turns on automatic rebalancing: when nodes join, the job is
	// checkpointed and relaunched over the larger set if the estimated time saved
	// over the rest of the run exceeds AutoRebalance times the measured cost of a
	// checkpoint plus a restart. 0: off (the default); otherwise at least 1.
	AutoRebalance float64 `json:"auto_rebalance,omitempty"`
	Redundancy    int     `json:"redundancy,omitempty"` // copies of each shard; 0: default (2)
	// Parity, when set, protects the shards with Reed–Solomon parity instead
	// of copies (--redundancy rs:K+M); Redundancy must then be 0.
	Parity *Parity `json:"parity,omitempty"`
	// Relocation is how ranks are placed again after a node is lost: "rank" (the
	// default) places every rank anew over the remaining nodes; "block" moves the
	// lost node's ranks together to one survivor, as older systems do (for
	// comparison in benchmarks).
	Relocation string `json:"relocation,omitempty"`
	// Layout is how ranks are placed: "" (the planner: contiguous blocks, or
	// the layout it predicts at least 5 % faster from the measured links and
	// traffic), or, for comparison, "blocks" (contiguous blocks in proportion to
	// cores × speed), "cyclic" (rank i to the i-th node in turn) or "packed"
	// (nodes filled to their slots in name order: the fewest nodes).
	Layout string `json:"layout,omitempty"`
	// NoReplan keeps the job out of the planner: its ranks go in contiguous
	// blocks in proportion to cores × speed, they count no traffic, and the
	// job never moves for it. By default the planner places the job by the
	// measured links and the traffic learned while it runs: relaunches use
	// the profile, and when it shows a layout faster by more than a move
	// costs, the job moves there at a checkpoint.
	NoReplan bool `json:"no_replan,omitzero"`
	// MPIOverlay points the job's MPI between nodes at the overlay the agents
	// carry (device shoal0, docs/overlay.md) instead of the nodes' own
	// addresses: a pair of nodes that connects one way only still carries
	// the ranks' traffic both ways, encrypted. The job goes only on nodes
	// whose agent runs the overlay (shoal agent --overlay).
	MPIOverlay bool `json:"mpi_overlay,omitzero"`
	// MPIEncrypt puts every byte the job's MPI sends between nodes on the
	// overlay, whose tunnels are the agents' TLS connections (encrypted and
	// authenticated with the cluster's certificates): the job runs as with
	// MPIOverlay, and says it was asked for encryption, which a later way of
	// routing some pairs off the overlay would keep. Set by the job (shoal run
	// --mpi-encrypt) or at submit by an agent started with --mpi-encrypt; a job
	// cannot take it back off.
	MPIEncrypt bool `json:"mpi_encrypt,omitzero"`
	// HangAfter is how long the job's ranks may make no snapshot call, a rank
	// of them idle, before the run is declared hung and relaunched from its
	// newest complete epoch ([Hung]): 0 (the default) for the automatic rule,
	// ten times a rank's usual time between calls and at least 10 s
	// ([HangBound]); [HangOff] never. A program without libshoal makes no
	// calls and is never hung.
	HangAfter Duration `json:"hang_after,omitzero"`
	// Keep is how long every node keeps the job's data (shards, job and
	// coordinator directories, cached files) after the job ends: 0 means the
	// agents' retention policy for how it ended (docs/retention.md);
	// [KeepForever] keeps it until `shoal gc --job` removes it.
	Keep Duration `json:"keep,omitzero"`
	// ResumeEpoch, when set, makes the job begin as a restart from that epoch,
	// whose shards the submitter put into the live nodes' stores first (shoal
	// run --durable: an epoch kept outside the cluster); ResumeFrom says where
	// it was kept, for the restart line. ID must then be the shards' job id.
	ResumeEpoch uint64 `json:"resume_epoch,omitempty"`
	ResumeFrom  string `json:"resume_from,omitempty"`
	// ResumeWorld is the rank count of the run that wrote ResumeEpoch when it
	// had more ranks than the epoch has shards (its program gave libshoal a
	// communicator of its first ranks only); 0 when they are equal.
	ResumeWorld int `json:"resume_world,omitempty"`
	// Durable, when set, is the object store the job's coordinator keeps its
	// newest complete epoch in (shoal run --durable s3://…, outside Slurm): the
	// coordinator has the nodes upload each new one and writes its manifest
	// ([Job.CoordKeeps] says whether it can).
	Durable *DurableTarget `json:"durable,omitempty"`
	// Farm, when set, makes the job a task farm: Argv is run once per task,
	// as a plain process (no MPI), on whichever node has room, and Ranks is 0.
	Farm *FarmSpec `json:"farm,omitempty"`
}

// DurableTarget is where a job's coordinator keeps the job's newest complete
// epoch outside the cluster: an object store, never a directory (the agents do
// not write a path the job's user named).
type DurableTarget struct {
	Location string `json:"location"` // s3://BUCKET/PREFIX, never a credential
	// Endpoint is the object store's URL (--durable-endpoint); "": the agents'
	// own AWS_ENDPOINT_URL_S3 ….
	Endpoint string `json:"endpoint,omitempty"`
	// Rate bounds the bytes a second each node's upload may take
	// (--durable-rate); 0: no bound.
	Rate int64 `json:"rate,omitempty"`
}

// FarmSpec is what makes a job a task farm (`shoal farm`).
type FarmSpec struct {
	// Tasks are the tasks' lines: task n (from 0) runs Argv with "{}" replaced
	// by Tasks[n] and "{#}" by n; without "{}", the line is the last argument.
	Tasks []string `json:"tasks"`
	// Prefetch is how many tasks each node holds beyond its cores, waiting to
	// start the moment a core is free. 0 to [MaxPrefetch].
	Prefetch int `json:"prefetch"`
	// Retries is how many times a task that exits non-zero by itself runs
	// again before it is given up. 0 to [MaxRetries].
	Retries int `json:"retries"`
	// Dispatch is how tasks go to nodes: "" (the least loaded node with room)
	// or, for comparison in benchmarks, a static schedule fixed over the
	// nodes up at the start: "cyclic" (task t to node t mod n) or "block"
	// (contiguous ranges).
	Dispatch string `json:"dispatch,omitempty"`
	// Rerun, when the id is the submitter's ended farm, starts it again with
	// this command line and files though they changed: the tasks it stored a
	// result for keep it, the others run (the tasks must be the same).
	Rerun bool `json:"rerun,omitempty"`
}

// Bounds of a [FarmSpec].
const (
	MaxTasks     = 1000000
	MaxTaskBytes = 4096 // of one task's line
	MaxPrefetch  = 64
	MaxRetries   = 100
)

// KeepForever is the Spec.Keep of a job whose data stays until removed by
// hand (`shoal run --keep`); on the wire, "-1ns".
const KeepForever = Duration(-1)

// File is one staged file of a job.
type File struct {
	Name   string `json:"name"`   // relative path in the job directory
	SHA256 string `json:"sha256"` // hex content hash
	Size   int64  `json:"size"`
	Mode   uint32 `json:"mode,omitempty"` // permission bits; 0: 0644 (0755 for the program)
	// Arch, when set, is the instruction set the file is built for (Go's
	// GOARCH: amd64, arm64), and only nodes of that set get it: the builds of
	// one program share its Name, one per set (shoal run --program-for), and
	// the job runs on the nodes of one of them. "": every node gets it.
	Arch string `json:"arch,omitempty"`
}

// ProgramArches are the instruction sets the job's program is built for (the
// Arch of each staged file of its name), or nil when it runs on any: a script,
// a program run by its path, a build that names no set.
func (s Spec) ProgramArches() []string {
	if len(s.Argv) == 0 {
		return nil
	}
	var arches []string
	for _, f := range s.Files {
		if f.Name == s.Argv[0] {
			if f.Arch == "" {
				return nil
			}
			arches = append(arches, f.Arch)
		}
	}
	return arches
}

// FilesFor are the files staged to a node of instruction set arch: those of no
// set and those built for arch.
func (s Spec) FilesFor(arch string) []File {
	var out []File
	for _, f := range s.Files {
		if f.Arch == "" || f.Arch == arch {
			out = append(out, f)
		}
	}
	return out
}

// Owner is a local user, by number: user and group ids must mean the same user
// on every node, as for a shared file system.
type Owner struct {
	UID  int    `json:"uid"`
	GID  int    `json:"gid"`
	Name string `json:"name,omitempty"` // the login name on the submitting node, for people
}

// String names the owner: "alice (uid 1001)".
func (o *Owner) String() string {
	if o == nil {
		return "the agents' user"
	}
	if o.Name != "" {
		return fmt.Sprintf("%s (uid %d)", o.Name, o.UID)
	}
	return fmt.Sprintf("uid %d", o.UID)
}

// Duration is a time.Duration written in JSON as a Go duration string ("1.5s").
type Duration time.Duration

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"30s\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration string such as \"30s\", got %q", s)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) String() string { return time.Duration(d).String() }

// Parity is a job's Reed–Solomon code: groups of up to K shards, each with M
// parity rows on other nodes; any M nodes lost at once lose no epoch.
type Parity struct {
	K int `json:"k"`
	M int `json:"m"`
}

// OverlayFlag names the option that puts the job's MPI between nodes on the
// overlay: "--mpi-encrypt" (which wins), "--mpi-overlay", or "" for neither.
func (s Spec) OverlayFlag() string {
	switch {
	case s.MPIEncrypt:
		return "--mpi-encrypt"
	case s.MPIOverlay:
		return "--mpi-overlay"
	}
	return ""
}

// OnOverlay reports whether the job's MPI between nodes runs on the overlay.
func (s Spec) OnOverlay() bool { return s.MPIOverlay || s.MPIEncrypt }
