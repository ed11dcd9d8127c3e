package api

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"shoal/internal/job"
)

// Validate checks a launch request; errors wrap [ErrBadRequest].
func (l LaunchRequest) Validate() error {
	if !job.ValidID(l.Job) {
		return fmt.Errorf("%w: job %q: want 1 to 63 bytes of [A-Za-z0-9._-]", ErrBadRequest, l.Job)
	}
	if len(l.Argv) == 0 || l.Argv[0] == "" {
		return fmt.Errorf("%w: argv: want the command to run", ErrBadRequest)
	}
	for _, why := range []string{job.ArgvProblem(l.Argv), job.EnvProblem(l.Env)} {
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
	if !job.ValidID(g.Job) {
		problems = append(problems, fmt.Sprintf("job %q: want 1 to 63 bytes of [A-Za-z0-9._-]", g.Job))
	}
	if !job.ValidID(g.Coordinator) { // node names follow the same rule
		problems = append(problems, fmt.Sprintf("coordinator %q: want a node name, 1 to 63 bytes of [A-Za-z0-9._-]", g.Coordinator))
	}
	if g.Ranks < 1 || g.Ranks > job.MaxRanks {
		problems = append(problems, fmt.Sprintf("ranks %d: want 1 to %d", g.Ranks, job.MaxRanks))
	}
	if g.TTL < 0 {
		problems = append(problems, fmt.Sprintf("ttl %v: want ≥ 0 (0: %v)", g.TTL, DefaultGrantTTL))
	}
	if o := g.Owner; o != nil && (o.UID <= 0 || o.GID < 0) {
		problems = append(problems, fmt.Sprintf("owner uid %d gid %d: want a user other than root (omit it for the agents' user)", o.UID, o.GID))
	}
	for i, sum := range g.Files {
		if !job.ValidSHA256(sum) {
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
	case m < 1 || len(data)+m > job.MaxParity:
		return fmt.Errorf("%w: m %d: want 1 to %d parity rows beside %d data shards", ErrBadRequest, m, job.MaxParity-len(data), len(data))
	}
	for i, d := range data {
		switch {
		case d.Rank < 0 || d.Rank >= job.MaxRanks || i > 0 && d.Rank <= data[i-1].Rank:
			return fmt.Errorf("%w: data[%d]: rank %d: want ranks from 0 to %d, ascending", ErrBadRequest, i, d.Rank, job.MaxRanks-1)
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

// maxLocation bounds a durable location's length.
const maxLocation = 1024

// Validate checks a durable request, reporting every bad field in one error
// wrapping [ErrBadRequest]. A location is a directory (absolute) or
// s3://BUCKET/PREFIX, printable, never a URL with credentials in it.
func (d DurableRequest) Validate() error {
	var problems []string
	if d.Epoch < 1 {
		problems = append(problems, "epoch 0: want the epoch kept, 1 or more")
	}
	loc := d.Location
	switch {
	case loc == "" || len(loc) > maxLocation:
		problems = append(problems, fmt.Sprintf("location: want 1 to %d bytes", maxLocation))
	case strings.ContainsFunc(loc, func(r rune) bool { return r < ' ' || r == 0x7f }):
		problems = append(problems, fmt.Sprintf("location %q: control characters", loc))
	case !strings.HasPrefix(loc, "/") && !strings.HasPrefix(loc, "s3://"):
		problems = append(problems, fmt.Sprintf("location %q: want an absolute directory or s3://BUCKET/PREFIX", loc))
	case strings.HasPrefix(loc, "s3://") && strings.Contains(strings.SplitN(loc[len("s3://"):], "/", 2)[0], "@"):
		problems = append(problems, "location: s3://BUCKET/PREFIX, with no credentials in it")
	}
	if p := endpointProblem(d.Endpoint); p != "" {
		problems = append(problems, p)
	}
	if d.Took < 0 || d.Took > 1e7 || d.Took != d.Took {
		problems = append(problems, fmt.Sprintf("took %v: want seconds, 0 or more", d.Took))
	}
	if d.Uploaders < 0 || d.Uploaders > job.MaxRanks {
		problems = append(problems, fmt.Sprintf("uploaders %d: want 0 to %d", d.Uploaders, job.MaxRanks))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrBadRequest, strings.Join(problems, "; "))
	}
	return nil
}
