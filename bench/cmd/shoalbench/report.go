package main

import (
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"
)

// declaration is one node declared dead: by membership on an observer (its
// agent log's "node failed"), or by a job's node-lost event.
type declaration struct {
	observer, subject string
	at                time.Time
	source            string
	// why it is no false declaration ("n3 killed"), "" when it is one
	excuse string
	// left: a job's event for a node that left before its ranks were moved
	// ("node n3 left before its ranks could be moved"): no death declared, but
	// a leave that was not a planned move
	left bool
}

// declaredGrace is how long after a host's repair a late declaration of its
// death still counts as belonging to the fault: a failure detector may end its
// suspicion just after the host came back.
const declaredGrace = 20 * time.Second

var (
	failedNode = regexp.MustCompile(`\bnode=(\S+)`)
	lostNodes  = regexp.MustCompile(`^nodes? (\S.*?) lost\b`)
	leftNodes  = regexp.MustCompile(`^nodes? (\S.*?) left before its ranks could be moved`)
	// shardsLost is the reason a job fails when no copy of a shard it needs is
	// left: "epoch 4 lost: shards of ranks 3, 4 were only on n3, n4" (issue 9).
	shardsLost = regexp.MustCompile(`were only on (n\d+(?:, n\d+)*)`)
)

// declarations lists every node declared dead during the run, each with the
// fault that explains it, if any: the subject (or, for membership, the observer)
// killed, cut, or its agent killed at the time.
func (w *world) declarations(jobs []*chaosJob) []declaration {
	var out []declaration
	for _, h := range w.hostNames() {
		for _, l := range w.c.agentLog(h) {
			if l.Msg != "node failed" {
				continue
			}
			m := failedNode.FindStringSubmatch(l.Text[strings.Index(l.Text, "msg="):])
			if m == nil {
				continue
			}
			d := declaration{observer: h, subject: m[1], at: l.Time, source: "membership of " + h}
			d.excuse = w.excuse(d.subject, d.at, downOnPurpose...)
			if d.excuse == "" {
				// A cut node sees every other one die.
				d.excuse = w.excuse(h, d.at, whyCut)
			}
			out = append(out, d)
		}
	}
	for _, j := range jobs {
		for _, e := range j.events {
			var m []string
			switch e.Type {
			case "node-lost":
				m = lostNodes.FindStringSubmatch(e.Message)
			case "nodes":
				m = leftNodes.FindStringSubmatch(e.Message)
			}
			if m == nil {
				continue
			}
			for _, n := range strings.Split(m[1], ", ") {
				d := declaration{subject: n, at: e.Time, source: "job " + j.id + ": " + e.Message,
					left: e.Type == "nodes"}
				d.excuse = w.excuse(n, d.at, downOnPurpose...)
				out = append(out, d)
			}
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].at.Before(out[b].at) })
	return out
}

// shardsOnDownHosts is "" when job j failed because every copy of a shard it
// needed was on hosts that were down (killed, their agent killed, or cut) at
// its end, as its reason names them; otherwise it says what is not so.
func (w *world) shardsOnDownHosts(j *chaosJob) string {
	m := shardsLost.FindStringSubmatch(j.reason)
	if m == nil {
		return "not a loss of every copy of a shard"
	}
	var end time.Time
	for _, e := range j.events {
		if e.Type == "done" {
			end = e.Time
		}
	}
	var up []string
	for _, h := range strings.Split(m[1], ", ") {
		if w.excuse(h, end, downOnPurpose...) == "" {
			up = append(up, h)
		}
	}
	if len(up) > 0 {
		return "but " + strings.Join(up, ", ") + " was neither killed nor cut"
	}
	return ""
}

// excuse names the window of one of the kinds whys in which host was at t
// ("n3 killed"), "" if none.
func (w *world) excuse(host string, t time.Time, whys ...string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, win := range w.windows {
		to := win.to
		if to.IsZero() {
			to = time.Now()
		}
		if win.host == host && slices.Contains(whys, win.why) && !t.Before(win.from.Add(-time.Second)) && !t.After(to.Add(declaredGrace)) {
			return host + " " + win.why
		}
	}
	return ""
}

// chaosReport prints the run's outcome and returns the exit code: 1 when a job
// gave a wrong result or hung.
func chaosReport(out io.Writer, w *world, r *jobRunner, decl []declaration, elapsed time.Duration) int {
	jobs := r.all()
	total := 0
	var kinds []string
	for _, k := range faultKinds {
		if n := w.counts[k]; n > 0 {
			kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
			total += n
		}
	}
	fmt.Fprintf(out, "chaos: seed %d, %d hosts of %d cores at the start, %d at the end, %s\n",
		w.cfg.seed, w.cfg.hosts, w.cfg.cores, len(w.hostNames()), elapsed.Round(time.Second))
	fmt.Fprintf(out, "faults injected: %d (%s)\n", total, strings.Join(kinds, ", "))

	perKind := map[string]int{}
	var verified, failed, wrong, hung, restarts, lost, fresh, takeovers, shardsGone int
	for _, j := range jobs {
		perKind[j.kind.name]++
		restarts += j.restarts
		lost += len(j.lost)
		switch {
		case j.verified:
			verified++
		case j.wrong:
			wrong++
		case j.state == "hung":
			hung++
		default:
			failed++
			if w.shardsOnDownHosts(j) == "" {
				shardsGone++
			}
		}
		for _, n := range j.notes {
			switch {
			case strings.HasPrefix(n, "relaunched from the beginning"):
				fresh++
			case strings.Contains(n, " coordinates "):
				takeovers++
			}
		}
	}
	fmt.Fprintf(out, "jobs run: %d (heat %d, nqueens %d); verified %d; failed %d; wrong results %d; hung %d\n",
		len(jobs), perKind["heat"], perKind["nqueens"], verified, failed, wrong, hung)
	if failed > 0 {
		fmt.Fprintf(out, "failed because every copy of a shard they needed was on killed hosts: %d of %d\n", shardsGone, failed)
	}
	for _, j := range jobs {
		switch {
		case j.wrong:
			fmt.Fprintf(out, "  WRONG %s: %s %q, want %q (uninterrupted run)\n", j.id, j.kind.key, j.result, j.kind.want)
		case !j.verified:
			note := ""
			if why := w.shardsOnDownHosts(j); j.state == "failed" && why != "" && shardsLost.MatchString(j.reason) {
				note = " (" + why + ")"
			}
			fmt.Fprintf(out, "  %s %s: %s%s\n", j.state, j.id, j.reason, note)
		}
	}
	fmt.Fprintf(out, "restarts: %d (coordinator take-overs %d); complete epochs lost: %d; relaunches from the beginning although an epoch was complete: %d\n",
		restarts, takeovers, lost, fresh)
	for _, j := range jobs {
		if len(j.lost) > 0 {
			sort.Slice(j.lost, func(a, b int) bool { return j.lost[a] < j.lost[b] })
			fmt.Fprintf(out, "  %s lost epochs %v\n", j.id, j.lost)
		}
	}
	var falses, lefts []declaration
	deaths := 0
	for _, d := range decl {
		switch {
		case d.left:
			lefts = append(lefts, d)
		case d.excuse == "":
			falses = append(falses, d)
			fallthrough
		default:
			deaths++
		}
	}
	fmt.Fprintf(out, "failure declarations: %d, false ones (neither killed nor cut): %d\n", deaths, len(falses))
	for _, d := range falses {
		fmt.Fprintf(out, "  FALSE %s declared %s dead at %s%s\n", d.source, d.subject, d.at.Format("15:04:05.000"), w.leftNote(d.subject, d.at))
	}
	if len(lefts) > 0 {
		fmt.Fprintf(out, "nodes that left with shoal leave and that jobs lost as a failure (node-lost, not a planned move): %d\n", len(lefts))
		for _, d := range lefts {
			fmt.Fprintf(out, "  %s at %s\n", d.source, d.at.Format("15:04:05.000"))
		}
	}
	if len(r.refused) > 0 {
		fmt.Fprintf(out, "submissions refused: %d (first: %s)\n", len(r.refused), r.refused[0])
	}
	for _, n := range w.notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	fmt.Fprintf(out, "agents' logs kept in %s; load average at the end: %s\n", w.cfg.keep, loadavg())
	fmt.Fprintf(out, "RESULT faults=%d jobs=%d verified=%d failed=%d wrong=%d hung=%d false_declarations=%d epochs_lost=%d seed=%d\n",
		total, len(jobs), verified, failed, wrong, hung, len(falses), lost, w.cfg.seed)
	if wrong > 0 || hung > 0 {
		return 1
	}
	return 0
}

// leftNote says when host had left the cluster at t (a node that left must be
// seen as left, not dead).
func (w *world) leftNote(host string, t time.Time) string {
	if w.excuse(host, t, whyLeft) != "" {
		return " (it had left with shoal leave)"
	}
	return ""
}
