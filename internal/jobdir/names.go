package jobdir

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"shoal/internal/job"
)

// The files of a job's directory besides its epochs, shards and spares, as
// libshoal and the agent name them (docs/shard-format.md, "Files on disk";
// docs/launcher-protocol.md). libshoal's lib/src/jobdir.c names the same files;
// both check testdata/jobdir/paths.tsv.
const (
	Manifest = "manifest"           // the complete epochs (ManifestEntry lines)
	Finished = "finished"           // a standalone run that ended: its next run starts afresh
	Progress = "progress"           // rank 0's progress, one fraction in [0, 1]
	Interval = "interval"           // rank 0's checkpoint interval (ParseInterval)
	Request  = "request-checkpoint" // asks rank 0 for a checkpoint (the agent's)
	Traffic  = "traffic"            // a directory of one traffic file per rank
)

// TrafficPath returns rank's traffic file (docs/traffic.md).
func (d Dir) TrafficPath(rank int) string {
	return filepath.Join(d.Path(), Traffic, fmt.Sprint(rank))
}

// StagePath returns the file standalone libshoal stages rank's next shard in.
func (d Dir) StagePath(rank int) string {
	return filepath.Join(d.Path(), fmt.Sprintf("r%06d.stage", rank))
}

// ParityName is the file of parity row row of group group in an epoch's
// directory (internal/erasure).
func ParityName(group, row int) string { return fmt.Sprintf("p%06d-%03d.parity", group, row) }

// ParseParityName returns the group and row a final parity file name names.
func ParseParityName(name string) (group, row int, ok bool) {
	base, found := strings.CutSuffix(name, ".parity")
	if !found || len(base) < len("p000000-000") || base[0] != 'p' {
		return 0, 0, false
	}
	g, r, found := strings.Cut(base[1:], "-")
	if !found {
		return 0, 0, false
	}
	group, gerr := strconv.Atoi(g)
	row, rerr := strconv.Atoi(r)
	if gerr != nil || rerr != nil || group < 0 || row < 0 || ParityName(group, row) != name {
		return 0, 0, false
	}
	return group, row, true
}

// ParityPath returns parity row row of group group of epoch.
func (d Dir) ParityPath(epoch uint64, group, row int) string {
	return filepath.Join(d.EpochPath(epoch), ParityName(group, row))
}

// ParseInterval reads the interval file libshoal's rank 0 keeps in a job's
// directory (docs/launcher-protocol.md): one line,
// "interval S auto A cost C mtbf M", with S, C and M in seconds and A 0 or 1.
// Anything else is nil: unknown.
func ParseInterval(b []byte) *job.Interval {
	f := strings.Fields(string(b))
	if len(f) != 8 || f[0] != "interval" || f[2] != "auto" || f[4] != "cost" || f[6] != "mtbf" || (f[3] != "0" && f[3] != "1") {
		return nil
	}
	var secs [3]float64
	for i, v := range []string{f[1], f[5], f[7]} {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil || !(x >= 0 && x < 1e9) {
			return nil
		}
		secs[i] = x
	}
	d := func(s float64) job.Duration { return job.Duration(time.Duration(s * float64(time.Second))) }
	return &job.Interval{Every: d(secs[0]), Auto: f[3] == "1", Cost: d(secs[1]), MTBF: d(secs[2])}
}
