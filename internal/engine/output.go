package engine

import (
	"bufio"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ParseTagged splits one line of `mpirun --tag-output` ("[1,3]<stdout>:text") into the
// rank, the stream name and the text. ok is false for the launcher's own lines.
func ParseTagged(line string) (rank int, stream, text string, ok bool) {
	if !strings.HasPrefix(line, "[") {
		return 0, "", "", false
	}
	end := strings.Index(line, "]<")
	if end < 0 {
		return 0, "", "", false
	}
	_, r, found := strings.Cut(line[1:end], ",")
	if !found {
		return 0, "", "", false
	}
	rank, err := strconv.Atoi(r)
	if err != nil {
		return 0, "", "", false
	}
	rest := line[end+2:]
	close := strings.Index(rest, ">:")
	if close < 0 {
		return 0, "", "", false
	}
	return rank, rest[:close], rest[close+2:], true
}

// maxPartial bounds the text of one rank's unfinished line that CopyTagged holds back:
// a rank printing megabytes without a newline gets them shown in pieces instead of
// growing the buffer without end.
const maxPartial = 1 << 20

// CopyTagged reads tagged launcher output from r and writes each rank's line as
// "[rank] text" to out; the launcher's untagged lines go to launcher. It returns when
// r ends.
//
// mpirun tags every chunk a rank writes, not every line: a rank that prints "abc"
// without a newline makes mpirun write "[1,1]<stdout>:abc" and the next chunk's tag right
// after it, on the same line. So a line is split at every tag in it, a piece that the
// next tag cut short is held back as that rank's unfinished line and continued by its
// next piece, and what is still unfinished when r ends is written then.
func CopyTagged(r io.Reader, out, launcher io.Writer) error {
	br := bufio.NewReaderSize(r, 64*1024)
	partial := map[int]string{}
	emit := func(rank int, text string) {
		io.WriteString(out, "["+strconv.Itoa(rank)+"] "+text+"\n")
	}
	for {
		line, err := br.ReadString('\n')
		complete := strings.HasSuffix(line, "\n")
		line = strings.TrimSuffix(line, "\n")
		if line != "" || complete {
			pieces := splitTags(line)
			for i, p := range pieces {
				last := i == len(pieces)-1
				if !p.tagged {
					io.WriteString(launcher, p.text+"\n")
					continue
				}
				text := partial[p.rank] + p.text
				if last && complete || len(text) > maxPartial {
					delete(partial, p.rank)
					emit(p.rank, text)
				} else {
					partial[p.rank] = text
				}
			}
		}
		if err != nil {
			for _, rank := range sortedRanks(partial) {
				emit(rank, partial[rank])
			}
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// piece is the text of one tag, or the launcher's own text before any tag.
type piece struct {
	rank   int
	text   string
	tagged bool
}

// splitTags cuts line at every "[J,RANK]<stream>:" tag in it.
func splitTags(line string) []piece {
	var pieces []piece
	rank, rest, tagged := -1, line, false
	if r, n := tagAt(line, 0); n > 0 {
		rank, rest, tagged = r, line[n:], true
	}
	for {
		next, nextRank, n := -1, 0, 0
		for i := strings.Index(rest, "["); i >= 0; {
			if r, l := tagAt(rest, i); l > 0 {
				next, nextRank, n = i, r, l
				break
			}
			j := strings.Index(rest[i+1:], "[")
			if j < 0 {
				break
			}
			i += 1 + j
		}
		if next < 0 || !tagged {
			// Untagged text is the launcher's; a tag inside it is left alone.
			return append(pieces, piece{rank: rank, text: rest, tagged: tagged})
		}
		pieces = append(pieces, piece{rank: rank, text: rest[:next], tagged: true})
		rank, rest = nextRank, rest[next+n:]
	}
}

// tagAt reports whether s[i:] starts with a tag, its rank and its length.
func tagAt(s string, i int) (rank, n int) {
	r, _, _, ok := ParseTagged(s[i:])
	if !ok {
		return 0, 0
	}
	// ParseTagged accepts any text up to the first ">:"; a tag is only digits and a
	// stream name.
	end := strings.Index(s[i:], ">:")
	head := s[i : i+end+2]
	open := strings.Index(head, "]<")
	job, rk, _ := strings.Cut(head[1:open], ",")
	stream := head[open+2 : len(head)-2]
	if !allDigits(job) || !allDigits(rk) || (stream != "stdout" && stream != "stderr") {
		return 0, 0
	}
	return r, len(head)
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return s != ""
}

func sortedRanks(m map[int]string) []int {
	ranks := make([]int, 0, len(m))
	for r := range m {
		ranks = append(ranks, r)
	}
	sort.Ints(ranks)
	return ranks
}

// rshPrefix begins every line the rsh hooks (`shoal rsh`, shoal-rsh) write
// when they fail themselves.
const rshPrefix = "shoal rsh: "

// FailureLine returns the line of a launcher's output s that says best why it
// failed: the last line of an rsh hook's own failure (a node refusing or not
// answering a launch), which Open MPI follows with a help box of generic
// causes; else, when the output ends in a help box (Open MPI's lines between
// two rules of dashes, perhaps followed by its note that more processes sent
// the same help and how to see them all), the box's first line, its title;
// else the last non-empty line.
func FailureLine(s string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); strings.HasPrefix(l, rshPrefix) {
			return l
		}
	}
	end := len(lines) - 1
	for ; end >= 0; end-- {
		l := strings.TrimSpace(lines[end])
		if l != "" && !helpAggregate.MatchString(l) {
			break
		}
	}
	if end < 0 { // nothing but notes of aggregated help, or nothing
		for i := len(lines) - 1; i >= 0; i-- {
			if l := strings.TrimSpace(lines[i]); l != "" {
				return l
			}
		}
		return "(no output)"
	}
	if !isRule(lines[end]) {
		return strings.TrimSpace(lines[end])
	}
	start := end - 1
	for start >= 0 && !isRule(lines[start]) {
		start--
	}
	for i := start + 1; i < end; i++ {
		if l := strings.TrimSpace(lines[i]); l != "" {
			return l
		}
	}
	for i := end - 1; i >= 0; i-- { // an empty box: the last line before it
		if l := strings.TrimSpace(lines[i]); l != "" && !isRule(l) {
			return l
		}
	}
	return "(no output)"
}

// helpAggregate matches the lines with which Open MPI's mpirun closes its
// output when it gathered the same help from several processes: "[n1:14818]
// 3 more processes have sent help message help-errmgr-base.txt / …" and
// "[n1:14818] Set MCA parameter "orte_base_help_aggregate" to 0 to see all
// help / error messages".
var helpAggregate = regexp.MustCompile(`^\[[^\]]+\] (\d+ more process(es)? ha(s|ve) sent help message|Set MCA parameter "orte_base_help_aggregate")`)

// isRule reports whether line is a help box's rule: dashes only.
func isRule(line string) bool {
	l := strings.TrimSpace(line)
	return len(l) >= 10 && strings.Trim(l, "-") == ""
}

// launcherNotice is Open MPI's mpirun's line for the first process of a job that
// died of a signal.
var launcherNotice = regexp.MustCompile(`noticed that process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)`)

// Notice is a rank's death that the launcher saw and the rank's wrapper did not
// record: a wrapper killed with its program leaves no state of its own.
type Notice struct {
	Rank, Signal int
}

// LauncherNotice returns the rank whose death by a signal Open MPI's mpirun reports
// in its output s ("mpirun noticed that process rank 16 with PID 21986 on node n19
// exited on signal 9 (Killed)."), or nil. mpirun reports the first process of the
// job to fail, which its daemon saw die while the daemon ran: the launcher's own
// teardown comes after it, and a daemon that dies takes its processes with it
// unseen. (MPICH's Hydra names a pid, not a rank.)
func LauncherNotice(s string) *Notice {
	m := launcherNotice.FindStringSubmatch(s)
	if m == nil {
		return nil
	}
	rank, err1 := strconv.Atoi(m[1])
	sig, err2 := strconv.Atoi(m[2])
	if err1 != nil || err2 != nil || sig <= 0 {
		return nil
	}
	return &Notice{Rank: rank, Signal: sig}
}

// Apply records n in states, the ranks' states of the run the launcher ended at
// (Unix ns): the noticed rank, when its state says it runs or vanished (its wrapper
// said nothing of its end), died of n.Signal then. A state the wrapper wrote at
// the end is kept: it is the wrapper's own word. A nil n changes nothing.
func (n *Notice) Apply(states []RankState, at int64) []RankState {
	if n == nil {
		return states
	}
	for i := range states {
		if states[i].Rank != n.Rank {
			continue
		}
		if s := states[i].State; s == StateRunning || s == StateVanished {
			states[i].State, states[i].Signal, states[i].TimeNs = StateSignaled, n.Signal, at
		}
		return states
	}
	return append(states, RankState{Rank: n.Rank, State: StateSignaled, Signal: n.Signal, TimeNs: at})
}
