package job

import (
	"fmt"
	"math/bits"
)

// Elastic reports whether the job lets the coordinator choose its rank count
// (MinRanks or MaxRanks set).
func (s Spec) Elastic() bool { return s.MinRanks != 0 || s.MaxRanks != 0 }

// Range is the rank counts an elastic job allows, its bounds filled in: from
// MinRanks (1 when unset) to MaxRanks (MaxRanks when unset). A fixed job's
// range is its count alone.
func (s Spec) Range() (lo, hi int) {
	if !s.Elastic() {
		return s.Ranks, s.Ranks
	}
	lo, hi = max(s.MinRanks, 1), s.MaxRanks
	if hi == 0 {
		hi = MaxRanks
	}
	return lo, hi
}

// MostRanks is the most ranks a run of the job may have: its count, or an
// elastic job's upper bound.
func (s Spec) MostRanks() int {
	_, hi := s.Range()
	return hi
}

// Allows reports whether the job may run on n ranks: within its range, a
// multiple of RankMultiple, a power of two when RanksPow2.
func (s Spec) Allows(n int) bool {
	lo, hi := s.Range()
	switch {
	case n < lo || n > hi:
		return false
	case s.RankMultiple > 1 && n%s.RankMultiple != 0:
		return false
	case s.RanksPow2 && bits.OnesCount(uint(n)) != 1:
		return false
	}
	return true
}

// RangeProblem says what is wrong with an elastic job's range, or "".
func (s Spec) RangeProblem() string {
	lo, hi := s.Range()
	switch {
	case s.MinRanks < 0 || s.MaxRanks < 0 || s.MinRanks > MaxRanks || s.MaxRanks > MaxRanks:
		return fmt.Sprintf("min_ranks %d, max_ranks %d: want 1 to %d", s.MinRanks, s.MaxRanks, MaxRanks)
	case lo > hi:
		return fmt.Sprintf("min_ranks %d above max_ranks %d", lo, hi)
	case s.RankMultiple < 0 || s.RankMultiple > MaxRanks:
		return fmt.Sprintf("rank_multiple %d: want 1 to %d", s.RankMultiple, MaxRanks)
	case s.Ranks < 0 || s.Ranks > MaxRanks:
		return fmt.Sprintf("ranks %d: want 0 (the coordinator's choice) to %d", s.Ranks, MaxRanks)
	case s.Ranks > 0 && !s.Allows(s.Ranks):
		return fmt.Sprintf("ranks %d: not a count the job allows (%s)", s.Ranks, s.RangeString())
	}
	for n := lo; n <= hi; n++ {
		if s.Allows(n) {
			return ""
		}
	}
	return fmt.Sprintf("no rank count satisfies %s", s.RangeString())
}

// RangeString says an elastic job's range: "4 to 16 ranks, a multiple of 2".
func (s Spec) RangeString() string {
	lo, hi := s.Range()
	out := fmt.Sprintf("%d to %d ranks", lo, hi)
	if s.RankMultiple > 1 {
		out += fmt.Sprintf(", a multiple of %d", s.RankMultiple)
	}
	if s.RanksPow2 {
		out += ", a power of two"
	}
	return out
}
