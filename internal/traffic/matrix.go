package traffic

import (
	"cmp"
	"fmt"
	"slices"
)

// Flow is what rank From sent rank To (or, from [Matrix.Pairs], what the two sent
// each other).
type Flow struct {
	From, To int
	Bytes    uint64
	Messages uint64
}

// Matrix is the traffic of a job: the files of its ranks, one per rank at most.
// Its methods do not change it.
type Matrix struct {
	NRanks int    // the job's rank count
	Files  []File // by Rank; a rank without a file is missing
}

// Sum gathers the files of one job's ranks into a matrix. It fails with
// [ErrMismatch] if they name different rank counts or two of them are one rank's.
// The files are copied in, not aliased.
func Sum(files []File) (Matrix, error) {
	if len(files) == 0 {
		return Matrix{}, nil
	}
	m := Matrix{NRanks: files[0].NRanks, Files: make([]File, 0, len(files))}
	for _, f := range files {
		if f.NRanks != m.NRanks {
			return Matrix{}, fmt.Errorf("%w: rank %d's file is of %d ranks, rank %d's of %d",
				ErrMismatch, f.Rank, f.NRanks, files[0].Rank, m.NRanks)
		}
		f.Peers = slices.Clone(f.Peers)
		m.Files = append(m.Files, f)
	}
	slices.SortFunc(m.Files, func(a, b File) int { return cmp.Compare(a.Rank, b.Rank) })
	for i := 1; i < len(m.Files); i++ {
		if m.Files[i].Rank == m.Files[i-1].Rank {
			return Matrix{}, fmt.Errorf("%w: two files of rank %d", ErrMismatch, m.Files[i].Rank)
		}
	}
	return m, nil
}

// Sub returns the traffic between older and m, two snapshots of one run of the job:
// for each rank, its counts and seconds in m less those in older, with Since set to
// older's epoch. Both must hold the same ranks. It fails with [ErrOtherRun] when a
// rank's files come from different runs, and with [ErrMismatch] when the files do not
// follow each other (rank counts or ranks differ, older is newer, a count went down).
func (m Matrix) Sub(older Matrix) (Matrix, error) {
	if m.NRanks != older.NRanks || len(m.Files) != len(older.Files) {
		return Matrix{}, fmt.Errorf("%w: %d files of %d ranks less %d files of %d ranks",
			ErrMismatch, len(m.Files), m.NRanks, len(older.Files), older.NRanks)
	}
	out := Matrix{NRanks: m.NRanks, Files: make([]File, len(m.Files))}
	for i, f := range m.Files {
		o := older.Files[i]
		if o.Rank != f.Rank {
			return Matrix{}, fmt.Errorf("%w: rank %d has a file in one snapshot only",
				ErrMismatch, min(o.Rank, f.Rank))
		}
		d, err := f.sub(o)
		if err != nil {
			return Matrix{}, err
		}
		out.Files[i] = d
	}
	return out, nil
}

// sub is f less o, two files of one rank.
func (f File) sub(o File) (File, error) {
	if f.FirstEpoch != o.FirstEpoch {
		return File{}, fmt.Errorf("%w: rank %d: first epoch %d, then %d", ErrOtherRun,
			f.Rank, o.FirstEpoch, f.FirstEpoch)
	}
	if o.Epoch > f.Epoch || o.Since != 0 || f.Since != 0 {
		return File{}, fmt.Errorf("%w: rank %d: epoch %d less epoch %d", ErrMismatch,
			f.Rank, f.Epoch, o.Epoch)
	}
	d := f
	d.Since = o.Epoch
	d.SecondsMPI = max(0, f.SecondsMPI-o.SecondsMPI)
	d.SecondsTotal = max(0, f.SecondsTotal-o.SecondsTotal)
	d.Peers = nil
	j := 0
	for _, p := range f.Peers {
		for j < len(o.Peers) && o.Peers[j].Rank < p.Rank {
			j++ // a peer of the older file that the newer lacks: caught below
		}
		var before Peer
		if j < len(o.Peers) && o.Peers[j].Rank == p.Rank {
			before = o.Peers[j]
			j++
		}
		if p.Bytes < before.Bytes || p.Messages < before.Messages {
			return File{}, fmt.Errorf("%w: rank %d to %d: %d bytes in %d messages, then %d in %d",
				ErrMismatch, f.Rank, p.Rank, before.Bytes, before.Messages, p.Bytes, p.Messages)
		}
		if p.Messages > before.Messages {
			d.Peers = append(d.Peers, Peer{p.Rank, p.Bytes - before.Bytes, p.Messages - before.Messages})
		}
	}
	// Every peer of the older file must be in the newer one: counts never go away.
	for _, op := range o.Peers {
		if _, found := slices.BinarySearchFunc(f.Peers, op.Rank, func(p Peer, r int) int {
			return cmp.Compare(p.Rank, r)
		}); !found {
			return File{}, fmt.Errorf("%w: rank %d to %d: %d messages, then none",
				ErrMismatch, f.Rank, op.Rank, op.Messages)
		}
	}
	return d, nil
}

// Flows returns what each rank sent each other rank (itself included), one flow per
// direction, by Bytes, largest first, then by From and To.
func (m Matrix) Flows() []Flow {
	var fs []Flow
	for _, f := range m.Files {
		for _, p := range f.Peers {
			fs = append(fs, Flow{f.Rank, p.Rank, p.Bytes, p.Messages})
		}
	}
	sortFlows(fs)
	return fs
}

// Pairs returns what each pair of ranks sent each other, both directions summed, with
// From < To, ordered as [Matrix.Flows]. What a rank sends itself is left out: it
// costs the same wherever the rank runs.
func (m Matrix) Pairs() []Flow {
	sum := map[[2]int]Flow{}
	for _, f := range m.Files {
		for _, p := range f.Peers {
			a, b := min(f.Rank, p.Rank), max(f.Rank, p.Rank)
			if a == b {
				continue
			}
			s := sum[[2]int{a, b}]
			sum[[2]int{a, b}] = Flow{a, b, s.Bytes + p.Bytes, s.Messages + p.Messages}
		}
	}
	fs := make([]Flow, 0, len(sum))
	for _, f := range sum {
		fs = append(fs, f)
	}
	sortFlows(fs)
	return fs
}

// Top returns the n largest of [Matrix.Flows] (all of them if there are fewer).
func (m Matrix) Top(n int) []Flow {
	fs := m.Flows()
	return fs[:max(0, min(n, len(fs)))]
}

// CommShare is the share of their time the ranks spent in point-to-point calls, summed
// over the ranks, from 0 to 1; 0 when no time was counted.
func (m Matrix) CommShare() float64 {
	var mpi, total float64
	for _, f := range m.Files {
		mpi += f.SecondsMPI
		total += f.SecondsTotal
	}
	if total <= 0 {
		return 0
	}
	return min(1, mpi/total)
}

func sortFlows(fs []Flow) {
	slices.SortFunc(fs, func(a, b Flow) int {
		return cmp.Or(cmp.Compare(b.Bytes, a.Bytes), cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
	})
}
