// Package traffic reads the traffic files that libshoal writes beside a job's
// checkpoints and turns them into flows between ranks: who sends how much to whom, the
// input the placement planner (package place, its Input.Traffic) needs to put ranks
// that talk a lot on the same node. The format is specified in docs/traffic.md; the
// shared test vectors are in testdata/traffic.
//
// Each rank counts the bytes and messages it sends point to point to every other rank
// of MPI_COMM_WORLD, from shoal_init on, and at every checkpoint writes the counts so
// far, with the estimated seconds it spent in point-to-point calls, to
// $SHOAL_DIR/JOB/traffic/RANK. On a cluster $SHOAL_DIR is the ckpt directory in the
// agent's data directory, so each node holds the files of the ranks it runs (ranks
// that ran there in an earlier placement leave older files behind; the epoch in each
// file tells them apart).
//
// # How the coordinator uses it
//
//  1. When an epoch is complete (or before it plans a placement), it has every node of
//     the job read ckpt/JOB/traffic/* and [Parse] each file; for each rank it keeps the
//     file with the highest Epoch. A rank's file may be one checkpoint ahead of the
//     others, since it is written after the rank's shard.
//  2. [Sum] gathers the files into a [Matrix] of the whole job.
//  3. [Matrix.Sub] of the matrix it kept from the previous time gives the traffic of the
//     interval between the two: what the ranks do now, not since they started. When it
//     fails with [ErrOtherRun] the job was relaunched in between (counts start again
//     at every run); the newer matrix alone is then the traffic since the relaunch.
//  4. [Matrix.Pairs] gives the flows for the planner, both directions of a pair summed,
//     as the planner's model sums them; the planner wants the traffic of one
//     iteration, so divide by the iterations of the interval when the program reports
//     them (or give the planner Work and Traffic for the same interval).
//     [Matrix.CommShare] is the share of the interval spent communicating, which
//     tells how much placement can gain at all. [Matrix.Top] is for display.
//
// A matrix without flows says nothing: the job may send only collectives, or its
// calls may not reach libshoal (Fortran programs, whose MPI bindings call the PMPI
// functions directly). The planner's default traffic is then the better guess. A rank
// without a file is one whose calls libshoal could not count at all (a Python
// program, a program linked with the MPI library first, SHOAL_TRAFFIC=0).
//
// Nothing here does I/O but reading what [Parse] is given: the package is pure.
package traffic

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Format constants from docs/traffic.md.
const (
	Magic   = "shoal-traffic"
	Version = 1
	// MaxRanks is the most ranks a job's files may name: shard paths hold 6-digit ranks.
	MaxRanks = 1000000
	// MaxEpoch is the highest epoch: shard paths hold 8-digit epochs.
	MaxEpoch = 99999999
)

// What is wrong with a file, as docs/traffic.md and the test vectors name it ("bad
// header" for [ErrBadHeader]). [Parse] wraps them in a [*LineError]; [Sum] and
// [Matrix.Sub] return the last two, wrapped with context. Match them with errors.Is.
var (
	// ErrTruncated: the file is empty or its last line has no newline; a writer
	// renames complete files into place, so it was cut.
	ErrTruncated = errors.New("traffic: truncated")
	// ErrVersion: the first line is a traffic file of another version.
	ErrVersion = errors.New("traffic: unsupported version")
	// ErrBadHeader: the first line is not a valid header.
	ErrBadHeader = errors.New("traffic: bad header")
	// ErrBadPeer: a line after the first is not a valid peer line.
	ErrBadPeer = errors.New("traffic: bad peer line")
	// ErrMismatch: files that cannot be added up or subtracted: of jobs with different
	// rank counts, two files of one rank, or snapshots that do not follow each other.
	ErrMismatch = errors.New("traffic: files do not match")
	// ErrOtherRun: [Matrix.Sub] of snapshots of two runs of the job (FirstEpoch
	// differs); counts start again at zero in every run.
	ErrOtherRun = errors.New("traffic: snapshots of different runs")
)

// ShortName is the name docs/traffic.md and the test vectors use for a parse error
// ("bad peer line"), or "" when err is none of them.
func ShortName(err error) string {
	for _, e := range []error{ErrTruncated, ErrVersion, ErrBadHeader, ErrBadPeer} {
		if errors.Is(err, e) {
			return strings.TrimPrefix(e.Error(), "traffic: ")
		}
	}
	return ""
}

// LineError is a parse error and the line it is on.
type LineError struct {
	Line   int    // 1-based
	Err    error  // one of the sentinel errors
	Detail string // what is wrong, for people
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%v at line %d: %s", e.Err, e.Line, e.Detail)
}

func (e *LineError) Unwrap() error { return e.Err }

// Peer is what a rank sent one destination rank.
type Peer struct {
	Rank     int    // destination, a rank of MPI_COMM_WORLD
	Bytes    uint64 // count × datatype size, summed over the messages
	Messages uint64 // ≥ 1 in a file
}

// File is one rank's traffic file: its sends from the start of its run (or, in a
// difference from [Matrix.Sub], from the checkpoint Since) until the checkpoint Epoch.
type File struct {
	Rank   int // the sender, a rank of MPI_COMM_WORLD
	NRanks int // the job's rank count
	Epoch  uint64
	// FirstEpoch is the first epoch the run that wrote the file could write: the same
	// for every file of one run, and different for each run of a job.
	FirstEpoch uint64
	// Since is 0 in a parsed file: the counts run from the start of the run. In a
	// difference it is the epoch of the older snapshot.
	Since uint64
	// SecondsMPI is the estimated time the rank spent in point-to-point calls
	// (sampled, so ±1% of SecondsTotal over 30 s; under MPI_THREAD_MULTIPLE it sums
	// the threads and may exceed SecondsTotal). SecondsTotal is the time counted.
	SecondsMPI, SecondsTotal float64
	Peers                    []Peer // by Rank, each with Messages ≥ 1
}

// Parse reads one traffic file, strictly: every deviation from docs/traffic.md is a
// [*LineError] wrapping [ErrTruncated], [ErrVersion], [ErrBadHeader] or [ErrBadPeer].
func Parse(r io.Reader) (File, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return File{}, err
	}
	if len(data) == 0 {
		return File{}, &LineError{1, ErrTruncated, "empty file"}
	}
	lines := bytes.Split(data[:len(data)-1], []byte{'\n'})
	if data[len(data)-1] != '\n' {
		return File{}, &LineError{len(lines), ErrTruncated, "no newline at the end"}
	}
	f, err := parseHeader(string(lines[0]))
	if err != nil {
		return File{}, err
	}
	for i, line := range lines[1:] {
		p, err := parsePeer(string(line), f.NRanks)
		if err == nil && len(f.Peers) > 0 && p.Rank <= f.Peers[len(f.Peers)-1].Rank {
			err = fmt.Errorf("peer %d after peer %d: peers must increase", p.Rank, f.Peers[len(f.Peers)-1].Rank)
		}
		if err != nil {
			return File{}, &LineError{i + 2, ErrBadPeer, err.Error()}
		}
		f.Peers = append(f.Peers, p)
	}
	return f, nil
}

// headerNames are the names of the header's fields after the version, in order.
var headerNames = []string{"rank", "nranks", "epoch", "first_epoch", "seconds_mpi", "seconds_total"}

func parseHeader(line string) (File, error) {
	bad := func(format string, a ...any) (File, error) {
		return File{}, &LineError{1, ErrBadHeader, fmt.Sprintf(format, a...)}
	}
	tok := strings.Split(line, " ")
	if tok[0] != Magic {
		return bad("does not start with %q", Magic+" ")
	}
	if len(tok) < 2 {
		return bad("no version")
	}
	if v, err := decimal(tok[1], math.MaxInt32); err != nil {
		return bad("version %q: %v", tok[1], err)
	} else if v != Version {
		return File{}, &LineError{1, ErrVersion, fmt.Sprintf("version %d, want %d", v, Version)}
	}
	if len(tok) != 2+2*len(headerNames) {
		return bad("%d fields, want %d", len(tok), 2+2*len(headerNames))
	}
	values := map[string]string{}
	for i, name := range headerNames {
		if got := tok[2+2*i]; got != name {
			return bad("field %d is %q, want %q", i+1, got, name)
		}
		values[name] = tok[3+2*i]
	}
	var f File
	var u [4]uint64
	limits := [4]uint64{MaxRanks - 1, MaxRanks, MaxEpoch, MaxEpoch}
	for i, name := range headerNames[:4] {
		v, err := decimal(values[name], limits[i])
		if err != nil {
			return bad("%s %q: %v", name, values[name], err)
		}
		u[i] = v
	}
	f.Rank, f.NRanks, f.Epoch, f.FirstEpoch = int(u[0]), int(u[1]), u[2], u[3]
	switch {
	case f.NRanks < 1:
		return bad("nranks is 0")
	case f.Rank >= f.NRanks:
		return bad("rank %d is not below nranks %d", f.Rank, f.NRanks)
	case f.Epoch < 1:
		return bad("epoch is 0")
	case f.FirstEpoch < 1 || f.FirstEpoch > f.Epoch:
		return bad("first_epoch %d is not in 1..epoch (%d)", f.FirstEpoch, f.Epoch)
	}
	var err error
	if f.SecondsMPI, err = seconds(values["seconds_mpi"]); err != nil {
		return bad("seconds_mpi %q: %v", values["seconds_mpi"], err)
	}
	if f.SecondsTotal, err = seconds(values["seconds_total"]); err != nil {
		return bad("seconds_total %q: %v", values["seconds_total"], err)
	}
	return f, nil
}

func parsePeer(line string, nranks int) (Peer, error) {
	tok := strings.Split(line, " ")
	if len(tok) != 3 {
		return Peer{}, fmt.Errorf("%d fields, want 3 (peer bytes messages)", len(tok))
	}
	rank, err := decimal(tok[0], uint64(nranks-1))
	if err != nil {
		return Peer{}, fmt.Errorf("peer %q: %v (nranks %d)", tok[0], err, nranks)
	}
	bytes, err := decimal(tok[1], math.MaxUint64)
	if err != nil {
		return Peer{}, fmt.Errorf("bytes %q: %v", tok[1], err)
	}
	msgs, err := decimal(tok[2], math.MaxUint64)
	if err != nil {
		return Peer{}, fmt.Errorf("messages %q: %v", tok[2], err)
	}
	if msgs == 0 {
		return Peer{}, errors.New("0 messages: peers without messages are left out")
	}
	return Peer{Rank: int(rank), Bytes: bytes, Messages: msgs}, nil
}

// decimal parses digits without sign or leading zeros, at most max.
func decimal(s string, max uint64) (uint64, error) {
	if s == "" || strings.Trim(s, "0123456789") != "" {
		return 0, errors.New("not a decimal number")
	}
	if len(s) > 1 && s[0] == '0' {
		return 0, errors.New("leading zero")
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil || v > max {
		return 0, fmt.Errorf("above %d", max)
	}
	return v, nil
}

// seconds parses a decimal number with an optional fraction: "12", "0.031250".
func seconds(s string) (float64, error) {
	whole, frac, dot := strings.Cut(s, ".")
	if _, err := decimal(whole, math.MaxUint64); err != nil {
		return 0, err
	}
	if dot && (frac == "" || strings.Trim(frac, "0123456789") != "") {
		return 0, errors.New("not a decimal fraction")
	}
	return strconv.ParseFloat(s, 64)
}
