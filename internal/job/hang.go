package job

import (
	"fmt"
	"time"
)

// A job whose ranks make no progress is hung: a rank stopped (SIGSTOP, Android
// freezing an app in the background, a debugger), frozen in a system call (a
// dead NFS server, a device that never answers) or deadlocked holds every other
// rank in its next collective, and nothing else ever ends the run. Progress is
// a call of shoal_snapshot: libshoal records each rank's last call in its alive
// file (docs/shard-format.md), and the node's agent reports the ranks silent
// for longer than [SilentAfter] in its shard index. The rule here decides.
const (
	// HangFloor is the least silence the automatic rule calls hung. It covers
	// what a healthy rank does between two calls besides computing: a
	// checkpoint's copy and restore (seconds for gigabytes), page faults of a
	// state swapped out, a slow first iteration after a restart, and a rank
	// descheduled on an overloaded node. Membership declares a silent node
	// dead in 4 to 6 s on a LAN: a whole node paused is its business, first.
	HangFloor = 10 * time.Second
	// HangFactor times a rank's usual time between records is the silence
	// the automatic rule calls hung when that is longer than HangFloor: an
	// iteration twice or five times as slow as usual (a neighbour's load, a
	// throttled CPU, a Wi-Fi link slowing the halo exchange) is slow, not hung.
	HangFactor = 10
	// IdleBusy is the share of a core under which a silent rank counts as
	// idle since its last call. A rank waiting for another inside MPI polls
	// and uses a core (or its share of one on an overloaded node, a tenth at
	// load 20 on 2 cores); a stopped or frozen rank uses none; a rank that is
	// computing a long phase between calls uses a whole core. Only an idle
	// rank is hung, so a long phase without calls is never called hung,
	// however long.
	IdleBusy = 0.05
	// silentLeast is the least silence a node reports: below it, a rank
	// between two records is not silent (records are at most a few tenths of
	// a second apart in a healthy run).
	silentLeast = time.Second
)

// HangOff is the Spec.HangAfter of a job never declared hung (--hang-after off).
const HangOff = Duration(-1)

// MinHangAfter is the least Spec.HangAfter a user may give: a node reports a
// rank silent after a second at the soonest ([SilentAfter]).
const MinHangAfter = time.Second

// Silent is one rank that made no snapshot call for a while, as its node
// reported it (the API's ShardIndex.Silent).
type Silent struct {
	Rank int    `json:"rank"`
	Node string `json:"node,omitempty"` // set by the coordinator
	// Calls is the rank's count of snapshot calls at its last record: it
	// names the silence (a new call is a new record).
	Calls int64 `json:"calls"`
	// For is how long since the rank's last call, when the node looked.
	For Duration `json:"for"`
	// Gap is the time between the rank's last two records: how often the
	// rank usually reports a call (0: it reported once, no gap is known).
	Gap Duration `json:"gap"`
	// Every is the time per call over that gap.
	Every Duration `json:"every"`
	// Busy is the share of a core the rank's process used since its last
	// call (2 for two cores), or -1 when the node could not tell.
	Busy float64 `json:"busy"`
}

// SilentAfter is how long a rank whose records are gap apart goes without a
// call before its node reports it silent: twice its gap, and at least a
// second.
func SilentAfter(gap time.Duration) time.Duration { return max(silentLeast, 2*gap) }

// HangBound is how long a rank whose records are gap apart may go without a
// call before its job is hung, for a job whose Spec.HangAfter is after: after
// itself when the user gave one, else HangFactor times gap and at least
// HangFloor. A rank that reported once (gap 0) has no usual time yet: its
// first iteration may take any time, and it is never hung (ok false); so is
// every rank of a job with HangOff.
func HangBound(after Duration, gap time.Duration) (time.Duration, bool) {
	switch {
	case after == HangOff || after < 0 || gap <= 0:
		return 0, false
	case after > 0:
		return time.Duration(after), true
	}
	return max(HangFloor, HangFactor*gap), true
}

// Hang is a run declared hung: the rank named and its silence.
type Hang struct {
	Silent
	Bound time.Duration // the silence that made it hung
}

// String says it: "rank 3 on n2 made no snapshot call for 41 s (usually every
// 0.4 s): hung".
func (h Hang) String() string {
	usual := ""
	if h.Every > 0 {
		usual = fmt.Sprintf(" (usually every %s)", callTime(time.Duration(h.Every)))
	}
	state := ""
	if h.Busy >= 0 && h.Busy < IdleBusy {
		state = ", idle"
	}
	return fmt.Sprintf("rank %d on %s made no snapshot call for %s%s%s: hung", h.Rank, h.Node, Seconds(time.Duration(h.For)), usual, state)
}

// callTime writes a time between calls: "0.4 s", "12 ms", "0.05 ms".
func callTime(d time.Duration) string {
	if d < 100*time.Microsecond {
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return Millis(d)
}

// Hung decides whether a run whose silent ranks are silent (their For as of
// now) is hung under after (the job's Spec.HangAfter): it is when a rank has
// been silent past its [HangBound] and idle (Busy below IdleBusy, or unknown).
// The others wait for it in their next collective, polling, and are busy. Of
// several such ranks, the one named is the one seen idle before one nobody
// could tell of, then the longest silent, then the lowest. A pure function of
// its arguments.
func Hung(silent []Silent, after Duration) (Hang, bool) {
	var culprit *Silent
	var bound time.Duration
	for i := range silent {
		s := &silent[i]
		b, ok := HangBound(after, time.Duration(s.Gap))
		if !ok || time.Duration(s.For) <= b || !s.Idle() {
			continue
		}
		if culprit == nil || busyKey(*s) < busyKey(*culprit) ||
			busyKey(*s) == busyKey(*culprit) && (s.For > culprit.For || s.For == culprit.For && s.Rank < culprit.Rank) {
			culprit, bound = s, b
		}
	}
	if culprit == nil {
		return Hang{}, false
	}
	return Hang{Silent: *culprit, Bound: bound}, true
}

// Idle reports whether s used under IdleBusy of a core since its last call,
// or nobody could tell. A rank stopped just after computing for a while is
// busy at first and becomes idle as its silence grows.
func (s Silent) Idle() bool { return s.Busy < IdleBusy }

// busyKey orders idle ranks for blame: a rank seen using no CPU before one
// nobody could tell of.
func busyKey(s Silent) float64 {
	if s.Busy < 0 {
		return IdleBusy
	}
	return s.Busy
}
