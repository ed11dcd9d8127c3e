package job

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
)

// ValidID reports whether s can be a job id: 1 to 63 bytes of [A-Za-z0-9._-],
// not "." or ".." (docs/launcher-protocol.md, SHOAL_JOB).
func ValidID(s string) bool {
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
func ValidSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ControlIn describes the first control character in s, or returns "" when
// there is none: a C0 control (bytes 0x00 to 0x1f), DEL (0x7f) or a C1
// control (U+0080 to U+009F), with its byte offset. A tab passes when tab is
// true: words and values may hold one (sort -t "$(printf '\t')"), names may
// not. A NUL ends a word at exec (the job failed only then, with "fork/exec:
// invalid argument"), and the others, shown in the terminal of whoever lists
// the job or reads a log, can rewrite what they see there (escape sequences,
// carriage returns, newlines that forge a line).
func ControlIn(s string, tab bool) string {
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

// EnvProblem describes the first problem of an environment, by name, or
// returns "": a name must not be empty nor hold '=' or a control character, a
// value must hold no control character but tab.
func EnvProblem(env map[string]string) string {
	for _, k := range slices.Sorted(maps.Keys(env)) {
		switch {
		case k == "" || strings.Contains(k, "="):
			return fmt.Sprintf("env key %q: want a non-empty name without '='", k)
		case ControlIn(k, false) != "":
			return fmt.Sprintf("env key %q: %s", k, ControlIn(k, false))
		case ControlIn(env[k], true) != "":
			return fmt.Sprintf("env %q: value %s", k, ControlIn(env[k], true))
		}
	}
	return ""
}

// ArgvProblem describes the first word of argv with a control character but
// tab, or returns "".
func ArgvProblem(argv []string) string {
	for i, w := range argv {
		if why := ControlIn(w, true); why != "" {
			return fmt.Sprintf("argv[%d]: %s", i, why)
		}
	}
	return ""
}

// Engines are the accepted Spec.Engine values ("" means the first).
var Engines = []string{"openmpi", "mpich"}

// Validate reports every problem of the spec in one [*Error] wrapping
// [ErrInvalid], naming each field, separated by "; ".
func (s Spec) Validate() error {
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	if s.ID != "" && !ValidID(s.ID) {
		bad("job id %q: want 1 to 63 bytes of [A-Za-z0-9._-]", s.ID)
	}
	if s.ResumeEpoch > 0 && (s.ID == "" || s.Farm != nil) {
		bad("resume_epoch %d: want a job id (the shards') and no farm", s.ResumeEpoch)
	}
	if s.ResumeWorld < 0 || s.ResumeWorld > 0 && s.ResumeEpoch == 0 {
		bad("resume_world %d: want 0, or the ranks of the run that wrote resume_epoch", s.ResumeWorld)
	}
	if s.MPIOverlay && s.Farm != nil {
		bad("mpi_overlay: a task farm runs no MPI (want false)")
	}
	if s.MPIEncrypt && s.Farm != nil {
		bad("mpi_encrypt: a task farm runs no MPI (want false)")
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
			if why := ControlIn(t, true); why != "" {
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
	} else if s.Elastic() {
		if why := s.RangeProblem(); why != "" {
			bad("%s", why)
		}
	} else if s.Ranks < 1 || s.Ranks > MaxRanks {
		bad("ranks %d: want 1 to %d", s.Ranks, MaxRanks)
	}
	if o := s.Owner; o != nil && (o.UID <= 0 || o.GID < 0) {
		bad("owner uid %d gid %d: want a user other than root (omit it for the agents' user)", o.UID, o.GID)
	}
	if o := s.Owner; o != nil && ControlIn(o.Name, false) != "" {
		bad("owner.name %q: %s", o.Name, ControlIn(o.Name, false))
	} else if o != nil && len(o.Name) > maxUserName {
		bad("owner.name: %d bytes, want at most %d", len(o.Name), maxUserName)
	}
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		bad("argv: want the program and its arguments, program not empty")
	}
	if why := ArgvProblem(s.Argv); why != "" {
		bad("%s", why)
	}
	seen := map[string]bool{}   // name and arch
	archOf := map[string]bool{} // names given with an arch
	for i, f := range s.Files {
		if why := ControlIn(f.Name, false); why != "" {
			bad("files[%d].name %q: %s", i, f.Name, why)
		} else if f.Name == "" || path.IsAbs(f.Name) || path.Clean(f.Name) != f.Name || f.Name == ".." || strings.HasPrefix(f.Name, "../") {
			bad("files[%d].name %q: want a clean relative path inside the job directory", i, f.Name)
		}
		if f.Arch != "" && !validArch(f.Arch) {
			bad("files[%d].arch %q: want an instruction set as Go names it (amd64, arm64)", i, f.Arch)
		}
		key := f.Name + "\x00" + f.Arch
		if seen[key] || (f.Arch == "" && archOf[f.Name]) || (f.Arch != "" && seen[f.Name+"\x00"]) {
			bad("files[%d].name %q: given twice", i, f.Name)
		}
		seen[key] = true
		if f.Arch != "" {
			archOf[f.Name] = true
		}
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
	if why := EnvProblem(s.Env); why != "" {
		bad("%s", why)
	}
	if why := ControlIn(s.ResumeFrom, false); why != "" {
		bad("resume_from %q: %s", s.ResumeFrom, why)
	}
	if d := s.Durable; d != nil {
		bucket, _, _ := strings.Cut(strings.TrimPrefix(d.Location, "s3://"), "/")
		switch {
		case !strings.HasPrefix(d.Location, "s3://") || bucket == "" || len(d.Location) > 1024:
			bad("durable.location %q: want s3://BUCKET/PREFIX, at most 1024 bytes", d.Location)
		case strings.Contains(bucket, "@"):
			bad("durable.location: s3://BUCKET/PREFIX, with no credentials in it")
		}
		if why := ControlIn(d.Location, false); why != "" {
			bad("durable.location %q: %s", d.Location, why)
		}
		switch e := d.Endpoint; {
		case e != "" && !strings.HasPrefix(e, "http://") && !strings.HasPrefix(e, "https://") || len(e) > 1024 || ControlIn(e, false) != "":
			bad("durable.endpoint: want http(s)://HOST[:PORT]")
		case strings.Contains(e, "@"):
			bad("durable.endpoint: http(s)://HOST[:PORT], with no credentials in it")
		}
		if d.Rate < 0 {
			bad("durable.rate %d: want bytes a second, 0 for no bound", d.Rate)
		}
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
	if s.HangAfter != HangOff && s.HangAfter != 0 && s.HangAfter < Duration(MinHangAfter) {
		bad("hang_after %v: want at least %v, or %v for never", s.HangAfter, MinHangAfter, HangOff)
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
		return &Error{ErrInvalid, strings.Join(problems, "; ")}
	}
	return nil
}

// MaxParity bounds a Reed–Solomon group: data shards plus parity rows
// (the code works over GF(2^8)).
const MaxParity = 256

// maxUserName bounds Spec.Owner.Name, which only names the owner to people
// and to the job's environment (USER, where a node knows no name for the uid).
// Login names vary (a directory's user@domain): no narrower alphabet is imposed
// than no control characters.
const maxUserName = 256

// validArch reports whether a is an instruction set as Go's GOARCH names one:
// lower-case letters and digits, at most 16.
func validArch(a string) bool {
	if len(a) > 16 {
		return false
	}
	for _, c := range a {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}
