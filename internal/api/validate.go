package api

import (
	"fmt"
	"maps"
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
)

// ValidJobID reports whether s can be a job id: 1 to 63 bytes of [A-Za-z0-9._-],
// not "." or ".." (docs/launcher-protocol.md, SHOAL_JOB).
func ValidJobID(s string) bool {
	if len(s) == 0 || len(s) > 63 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// MaxRanks bounds the ranks of a job (and so a rank number, which is below it):
// 65536 is 512 nodes of 128 cores, or 1024 of 64, each core running one rank; a
// cluster of phones, lab PCs and spot VMs held together by gossip stays well below
// that. Above it nothing Shoal keeps per job stays small: the rank traffic matrix
// holds ranks² counters (64 Ki ranks: 4 Gi of them), and every rank of Open MPI's TCP
// transport may open a connection to each other one.
const MaxRanks = 1 << 16

// MaxOversubscribe bounds the ranks per core a job may allow on a node. MPI ranks
// poll for messages; at 64 ranks on one core each gets under 2% of it, slower than
// waiting for another node would be, so more is a typo, not a plan.
const MaxOversubscribe = 64

// ValidSHA256 reports whether s is a hex SHA-256 in lower case.
func ValidSHA256(s string) bool { return len(s) == 64 && isHex(s) }

// controlIn describes the first control character in s, or returns "" when
// there is none: a C0 control (bytes 0x00 to 0x1f), DEL (0x7f) or a C1
// control (U+0080 to U+009F), with its byte offset. A tab passes when tab is
// true: words and values may hold one (sort -t "$(printf '\t')"), names may
// not. A NUL ends a word at exec (the job failed only then, with "fork/exec:
// invalid argument"), and the others, shown in the terminal of whoever lists
// the job or reads a log, can rewrite what they see there (escape sequences,
// carriage returns, newlines that forge a line).
func controlIn(s string, tab bool) string {
	for i, r := range s {
		switch {
		case r == 0:
			return fmt.Sprintf("contains a NUL byte (byte %d)", i)
		case r == '\t' && tab:
		case r < 0x20 || r == 0x7f:
			return fmt.Sprintf("contains control byte 0x%02x (byte %d)", r, i)
		case r >= 0x80 && r <= 0x9f:
			return fmt.Sprintf("contains control character %U (byte %d)", r, i)
		}
	}
	return ""
}

// envProblem describes the first problem of an environment, by name, or
// returns "": a name must not be empty nor hold '=' or a control character, a
// value must hold no control character but tab.
func envProblem(env map[string]string) string {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		switch {
		case k == "" || strings.Contains(k, "="):
			return fmt.Sprintf("env key %q: want a non-empty name without '='", k)
		case controlIn(k, false) != "":
			return fmt.Sprintf("env key %q: %s", k, controlIn(k, false))
		case controlIn(env[k], true) != "":
			return fmt.Sprintf("env %q: value %s", k, controlIn(env[k], true))
		}
	}
	return ""
}

// argvProblem describes the first word of argv with a control character but
// tab, or returns "".
func argvProblem(argv []string) string {
	for i, w := range argv {
		if why := controlIn(w, true); why != "" {
			return fmt.Sprintf("argv[%d]: %s", i, why)
		}
	}
	return ""
}

// Engines are the accepted JobSpec.Engine values ("" means the first).
var Engines = []string{"openmpi", "mpich"}

// Validate reports every problem of the spec in one error wrapping
// [ErrBadRequest], naming each field, separated by "; ".
func (s JobSpec) Validate() error {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	if s.ID != "" && !ValidJobID(s.ID) {
		bad("id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", s.ID)
	}
	if s.ResumeEpoch > 0 && (s.ID == "" || s.Farm != nil) {
		bad("resume_epoch %d: want a job id (the shards') and no farm", s.ResumeEpoch)
	}
	if f := s.Farm; f != nil {
		if s.Ranks != 0 {
			bad("ranks %d: a task farm has none (want 0)", s.Ranks)
		}
		if len(f.Tasks) > MaxTasks {
			bad("farm.tasks: %d tasks, want at most %d", len(f.Tasks), MaxTasks)
		}
		for i, t := range f.Tasks {
			if len(t) > MaxTaskBytes {
				bad("farm.tasks[%d]: %d bytes, want at most %d", i, len(t), MaxTaskBytes)
				break
			}
			if why := controlIn(t, true); why != "" {
				bad("farm.tasks[%d]: %s", i, why)
				break
			}
		}
		if f.Prefetch < 0 || f.Prefetch > MaxPrefetch {
			bad("farm.prefetch %d: want 0 to %d", f.Prefetch, MaxPrefetch)
		}
		if f.Retries < 0 || f.Retries > MaxRetries {
			bad("farm.retries %d: want 0 to %d", f.Retries, MaxRetries)
		}
		if f.Dispatch != "" && f.Dispatch != "cyclic" && f.Dispatch != "block" {
			bad("farm.dispatch %q: want cyclic, block or nothing (the least loaded node)", f.Dispatch)
		}
	} else if s.Ranks < 1 || s.Ranks > MaxRanks {
		bad("ranks %d: want 1 to %d", s.Ranks, MaxRanks)
	}
	if o := s.Owner; o != nil && (o.UID <= 0 || o.GID < 0) {
		bad("owner uid %d gid %d: want a user other than root (omit it for the agents' user)", o.UID, o.GID)
	}
	if o := s.Owner; o != nil && controlIn(o.Name, false) != "" {
		bad("owner.name %q: %s", o.Name, controlIn(o.Name, false))
	} else if o != nil && len(o.Name) > maxUserName {
		bad("owner.name: %d bytes, want at most %d", len(o.Name), maxUserName)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		bad("argv: want the program and its arguments, program not empty")
	}
	if why := argvProblem(s.Argv); why != "" {
		bad("%s", why)
	}
	seen := map[string]bool{}
	for i, f := range s.Files {
		if why := controlIn(f.Name, false); why != "" {
			bad("files[%d].name %q: %s", i, f.Name, why)
		} else if f.Name == "" || path.IsAbs(f.Name) || path.Clean(f.Name) != f.Name || f.Name == ".." || strings.HasPrefix(f.Name, "../") {
			bad("files[%d].name %q: want a clean relative path inside the job directory", i, f.Name)
		}
		if seen[f.Name] {
			bad("files[%d].name %q: given twice", i, f.Name)
		}
		seen[f.Name] = true
		if !ValidSHA256(f.SHA256) {
			bad("files[%d].sha256 %q: want 64 lower-case hex digits", i, f.SHA256)
		}
		if f.Size < 0 {
			bad("files[%d].size %d: want ≥ 0", i, f.Size)
		}
		if f.Mode&^0o777 != 0 {
			bad("files[%d].mode %#o: want permission bits only", i, f.Mode)
		}
	}
	if why := envProblem(s.Env); why != "" {
		bad("%s", why)
	}
	if why := controlIn(s.ResumeFrom, false); why != "" {
		bad("resume_from %q: %s", s.ResumeFrom, why)
	}
	if s.Engine != "" && !slices.Contains(Engines, s.Engine) {
		bad("engine %q: want %s", s.Engine, strings.Join(Engines, " or "))
	}
	if s.Layout != "" && s.Layout != "blocks" && s.Layout != "cyclic" && s.Layout != "packed" {
		bad("layout %q: want blocks, cyclic, packed or nothing (the planner)", s.Layout)
	}
	if s.Relocation != "" && s.Relocation != "rank" && s.Relocation != "block" {
		bad("relocation %q: want rank or block", s.Relocation)
	}
	if s.CheckpointInterval < 0 {
		bad("checkpoint_interval %v: want ≥ 0", s.CheckpointInterval)
	}
	if s.CheckpointAuto && s.CheckpointInterval != 0 {
		bad("checkpoint_auto with checkpoint_interval %v: want one of them", s.CheckpointInterval)
	}
	if s.MTBF < 0 {
		bad("mtbf %v: want > 0, or unset for the cluster's failure record", s.MTBF)
	}
	if s.MTBF > 0 && !s.CheckpointAuto {
		bad("mtbf %v without checkpoint_auto: it only sets the automatic interval", s.MTBF)
	}
	if s.MaxRestarts < 0 {
		bad("max_restarts %d: want ≥ 0", s.MaxRestarts)
	}
	if !(s.MaxOversubscribe >= 0 && s.MaxOversubscribe <= MaxOversubscribe) {
		bad("max_oversubscribe %g: want 0 (the default, 1) or more, up to %d ranks per core", s.MaxOversubscribe, MaxOversubscribe)
	}
	if s.RanksPerNode < 0 || s.RanksPerNode > MaxRanks {
		bad("ranks_per_node %d: want 0 (no bound) to %d", s.RanksPerNode, MaxRanks)
	}
	if s.WaitForNodes < 0 {
		bad("wait_for_nodes %v: want ≥ 0", s.WaitForNodes)
	}
	if s.AutoRebalance != 0 && !(s.AutoRebalance >= 1) {
		bad("auto_rebalance %g: want 0 (off) or at least 1", s.AutoRebalance)
	}
	if s.Keep < 0 && s.Keep != KeepForever {
		bad("keep %v: want ≥ 0, or %v to keep the job's data until it is removed by hand", s.Keep, KeepForever)
	}
	if s.Redundancy < 0 {
		bad("redundancy %d: want ≥ 0", s.Redundancy)
	}
	if p := s.Parity; p != nil {
		switch {
		case p.K < 1 || p.M < 1 || p.K+p.M > MaxParity:
			bad("parity rs:%d+%d: want K ≥ 1 data shards and M ≥ 1 parity rows, K+M ≤ %d", p.K, p.M, MaxParity)
		case s.Redundancy != 0:
			bad("redundancy %d with parity rs:%d+%d: choose copies or parity", s.Redundancy, p.K, p.M)
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrBadRequest, strings.Join(problems, "; "))
	}
	return nil
}

// Validate checks a launch request; errors wrap [ErrBadRequest].
func (l LaunchRequest) Validate() error {
	if !ValidJobID(l.Job) {
		return fmt.Errorf("%w: job %q: want 1 to 63 bytes of [A-Za-z0-9._-]", ErrBadRequest, l.Job)
	}
	if len(l.Argv) == 0 || l.Argv[0] == "" {
		return fmt.Errorf("%w: argv: want the command to run", ErrBadRequest)
	}
	for _, why := range []string{argvProblem(l.Argv), envProblem(l.Env)} {
		if why != "" {
			return fmt.Errorf("%w: %s", ErrBadRequest, why)
		}
	}
	return nil
}

// Validate checks a grant request, reporting every bad field in one error
// wrapping [ErrBadRequest]. The service may bound TTL further.
func (g GrantRequest) Validate() error {
	var problems []string
	if !ValidJobID(g.Job) {
		problems = append(problems, fmt.Sprintf("job %q: want 1 to 63 bytes of [A-Za-z0-9._-]", g.Job))
	}
	if !ValidJobID(g.Coordinator) { // node names follow the same rule
		problems = append(problems, fmt.Sprintf("coordinator %q: want a node name, 1 to 63 bytes of [A-Za-z0-9._-]", g.Coordinator))
	}
	if g.Ranks < 1 || g.Ranks > MaxRanks {
		problems = append(problems, fmt.Sprintf("ranks %d: want 1 to %d", g.Ranks, MaxRanks))
	}
	if g.TTL < 0 {
		problems = append(problems, fmt.Sprintf("ttl %v: want ≥ 0 (0: %v)", g.TTL, DefaultGrantTTL))
	}
	if o := g.Owner; o != nil && (o.UID <= 0 || o.GID < 0) {
		problems = append(problems, fmt.Sprintf("owner uid %d gid %d: want a user other than root (omit it for the agents' user)", o.UID, o.GID))
	}
	for i, sum := range g.Files {
		if !ValidSHA256(sum) {
			problems = append(problems, fmt.Sprintf("files[%d] %q: want a lower-case hex SHA-256", i, sum))
			break
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrBadRequest, strings.Join(problems, "; "))
	}
	return nil
}

// Validate checks a fetch request; errors wrap [ErrBadRequest].
func (f FetchRequest) Validate() error { return checkFrom("from", f.From, "holding the shard") }

// MaxParity bounds a Reed–Solomon group: data shards plus parity rows
// (the code works over GF(2^8)).
const MaxParity = 256

// checkFrom checks field, the API address of a node, which is named "the node
// " + what in an error.
func checkFrom(field, from, what string) error {
	host, port, err := net.SplitHostPort(from)
	p, perr := strconv.Atoi(port)
	if err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%w: %s %q: want the API address of the node %s, HOST:PORT", ErrBadRequest, field, from, what)
	}
	return nil
}

// checkMembers checks a parity group's data shards: ranks ascending, lengths
// those of a shard (at least 136 bytes); lost says whether a member may have
// no source.
func checkMembers(data []Member, m int, lost bool) error {
	switch {
	case len(data) == 0:
		return fmt.Errorf("%w: data: want the group's shards, at least one", ErrBadRequest)
	case m < 1 || len(data)+m > MaxParity:
		return fmt.Errorf("%w: m %d: want 1 to %d parity rows beside %d data shards", ErrBadRequest, m, MaxParity-len(data), len(data))
	}
	for i, d := range data {
		switch {
		case d.Rank < 0 || d.Rank >= MaxRanks || i > 0 && d.Rank <= data[i-1].Rank:
			return fmt.Errorf("%w: data[%d]: rank %d: want ranks from 0 to %d, ascending", ErrBadRequest, i, d.Rank, MaxRanks-1)
		case d.Bytes < 136:
			return fmt.Errorf("%w: data[%d]: bytes %d: a shard has at least 136", ErrBadRequest, i, d.Bytes)
		case d.From == "" && lost:
		default:
			if err := checkFrom(fmt.Sprintf("data[%d].from", i), d.From, "holding the shard"); err != nil {
				return err
			}
		}
	}
	return nil
}

// Validate checks an encode request; errors wrap [ErrBadRequest].
func (e EncodeRequest) Validate() error {
	if e.Group < 0 {
		return fmt.Errorf("%w: group %d: want ≥ 0", ErrBadRequest, e.Group)
	}
	if err := checkMembers(e.Data, e.M, false); err != nil {
		return err
	}
	if e.Row < 0 || e.Row >= e.M {
		return fmt.Errorf("%w: row %d: want 0 to %d", ErrBadRequest, e.Row, e.M-1)
	}
	for i, p := range e.Push {
		if p.Row < 0 || p.Row >= e.M || p.Row == e.Row || slices.ContainsFunc(e.Push[:i], func(q ParityPush) bool { return q.Row == p.Row }) {
			return fmt.Errorf("%w: push[%d]: row %d: want a row from 0 to %d other than row and the other pushes'", ErrBadRequest, i, p.Row, e.M-1)
		}
		if err := checkFrom(fmt.Sprintf("push[%d].to", i), p.To, "to store the row"); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks a rebuild request for the shard of rank; errors wrap
// [ErrBadRequest].
func (q RebuildRequest) Validate(rank int) error {
	if q.Group < 0 {
		return fmt.Errorf("%w: group %d: want ≥ 0", ErrBadRequest, q.Group)
	}
	if err := checkMembers(q.Data, q.M, true); err != nil {
		return err
	}
	if !slices.ContainsFunc(q.Data, func(d Member) bool { return d.Rank == rank }) {
		return fmt.Errorf("%w: rank %d is not a member of the group", ErrBadRequest, rank)
	}
	have := 0
	for _, d := range q.Data {
		if d.From != "" && d.Rank != rank {
			have++
		}
	}
	for i, p := range q.Parity {
		if p.Row < 0 || p.Row >= q.M || i > 0 && p.Row <= q.Parity[i-1].Row {
			return fmt.Errorf("%w: parity[%d]: row %d: want rows from 0 to %d, ascending", ErrBadRequest, i, p.Row, q.M-1)
		}
		if err := checkFrom(fmt.Sprintf("parity[%d].from", i), p.From, "holding the row"); err != nil {
			return err
		}
		have++
	}
	if have < len(q.Data) {
		return fmt.Errorf("%w: %d pieces of the group to rebuild from: want %d", ErrBadRequest, have, len(q.Data))
	}
	return nil
}

// maxUserName bounds JobSpec.Owner.Name, which only names the owner to people
// and to the job's environment (USER, where a node knows no name for the uid).
// Login names vary (a directory's user@domain): no narrower alphabet is imposed
// than no control characters.
const maxUserName = 256
