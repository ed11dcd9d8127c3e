package metrics

import (
	"encoding/json"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"shoal/internal/job"
	"shoal/internal/jobstore"
	"shoal/internal/mtbf"
	"shoal/internal/node"
)

// fakeSource is a [Source] of plain data; it records the event numbers asked
// for.
type fakeSource struct {
	jobs   []job.Job
	events map[string][]job.Event
	nodes  []node.Node
	raft   jobstore.Stats
	bytes  int64
	fails  mtbf.Estimate
	ovl    Overlay

	mu    sync.Mutex
	froms []uint64
}

func (f *fakeSource) Jobs() []job.Job { return f.jobs }
func (f *fakeSource) Events(id string, from uint64) ([]job.Event, error) {
	f.mu.Lock()
	f.froms = append(f.froms, from)
	f.mu.Unlock()
	var out []job.Event
	for _, e := range f.events[id] {
		if e.Seq >= from {
			out = append(out, e)
		}
	}
	return out, nil
}
func (f *fakeSource) Nodes() []node.Node         { return f.nodes }
func (f *fakeSource) Raft() jobstore.Stats       { return f.raft }
func (f *fakeSource) ShardBytes() (int64, error) { return f.bytes, nil }
func (f *fakeSource) Failures() mtbf.Estimate    { return f.fails }
func (f *fakeSource) Overlay() Overlay           { return f.ovl }

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// ev is an event numbered seq at t0+sec, of a transition to state (or of type
// typ when state is ""), with cause as its restart cause ("" none).
func ev(seq uint64, sec float64, state job.State, cause string) job.Event {
	e := job.Event{Seq: seq, Time: t0.Add(time.Duration(sec * float64(time.Second))), State: state, Type: job.EventState}
	if cause != "" {
		e.Data, _ = json.Marshal(job.RestartCause{Cause: cause, Counted: true})
	}
	return e
}

// epochEvent is the event of an epoch complete, numbered seq, at t0+sec,
// saying s.
func epochEvent(seq uint64, sec float64, s job.EpochStats) job.Event {
	e := typed(seq, sec, job.EventEpoch)
	e.Data, _ = json.Marshal(s)
	return e
}

// stageEvent is a stage event numbered seq, at t0+sec, of bytes staged.
func stageEvent(seq uint64, sec float64, bytes int64) job.Event {
	e := typed(seq, sec, job.EventStage)
	e.Data, _ = json.Marshal(job.Staged{Bytes: bytes})
	return e
}

// typed is an event of type typ, numbered seq, at t0+sec.
func typed(seq uint64, sec float64, typ string) job.Event {
	return job.Event{Seq: seq, Time: t0.Add(time.Duration(sec * float64(time.Second))), Type: typ}
}

func TestJobHistory(t *testing.T) {
	tests := []struct {
		name         string
		events       []job.Event
		wantRestarts map[string]uint64
		wantN        uint64
		wantSum      float64
	}{
		{"no restart", []job.Event{ev(1, 0, job.Staging, ""), ev(2, 1, job.Running, ""), typed(3, 2, job.EventOutput),
			ev(4, 9, job.Succeeded, "")}, nil, 0, 0},
		{"a rank killed: recovered at the first output of the relaunch", []job.Event{ev(1, 0, job.Running, ""),
			ev(2, 5, job.Restarting, "rank_killed"), ev(3, 5.5, job.Staging, ""), typed(4, 5.6, job.EventStage),
			ev(5, 6, job.Running, ""), typed(6, 7, job.EventOutput)}, map[string]uint64{"rank_killed": 1}, 1, 2},
		{"an epoch says so too", []job.Event{ev(1, 5, job.Restarting, "node_lost"), ev(2, 6, job.Staging, ""),
			ev(3, 6, job.Running, ""), typed(4, 9, job.EventEpoch), typed(5, 10, job.EventOutput)},
			map[string]uint64{"node_lost": 1}, 1, 4},
		{"lost again while staged: one recovery from the first loss", []job.Event{ev(1, 0, job.Running, ""),
			ev(2, 10, job.Restarting, "node_lost"), ev(3, 11, job.Staging, ""), ev(4, 12, job.Restarting, "node_lost"),
			ev(5, 13, job.Staging, ""), ev(6, 20, job.Running, ""), typed(7, 21, job.EventProgress)},
			map[string]uint64{"node_lost": 2}, 1, 11},
		{"output of the lost run before the relaunch is no recovery", []job.Event{ev(1, 0, job.Running, ""),
			ev(2, 1, job.Restarting, "rank_killed"), typed(3, 1.1, job.EventOutput), ev(4, 2, job.Staging, ""),
			ev(5, 3, job.Running, ""), typed(6, 4, job.EventOutput)}, map[string]uint64{"rank_killed": 1}, 1, 3},
		{"an event of old without a cause", []job.Event{ev(1, 0, job.Running, ""), ev(2, 1, job.Restarting, ""),
			ev(3, 2, job.Failed, "")}, map[string]uint64{causeUnknown: 1}, 0, 0},
		{"a move is no recovery", []job.Event{ev(1, 0, job.Running, ""), ev(2, 1, job.Moving, ""),
			ev(3, 2, job.Staging, ""), ev(4, 3, job.Running, ""), typed(5, 4, job.EventOutput)}, nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h jobHistory
			// Read in two halves, as two scrapes would.
			half := len(tt.events) / 2
			h.add(tt.events[:half])
			h.add(tt.events[half:])
			if len(h.restarts) != len(tt.wantRestarts) {
				t.Errorf("restarts: got %v, want %v", h.restarts, tt.wantRestarts)
			}
			for c, n := range tt.wantRestarts {
				if h.restarts[c] != n {
					t.Errorf("restarts[%s]: got %d, want %d", c, h.restarts[c], n)
				}
			}
			if h.recovery.n != tt.wantN || h.recovery.sum != tt.wantSum {
				t.Errorf("recoveries: got %d summing %v s, want %d summing %v s", h.recovery.n, h.recovery.sum, tt.wantN, tt.wantSum)
			}
			if want := uint64(len(tt.events)) + 1; h.next != want {
				t.Errorf("next event: got %d, want %d", h.next, want)
			}
		})
	}
}

func TestNodeSamples(t *testing.T) {
	nodes := []node.Node{{State: "alive", Role: "leader"}, {State: "alive", Role: "voter"}, {State: "alive", Role: "voter"}, {State: "dead", Role: "voter"}, {State: "suspect", Role: ""}}
	got := map[string]float64{}
	for _, s := range nodeSamples(nodes) {
		got[strings.Join(s.labels, "/")] = s.value
	}
	want := map[string]float64{"alive/leader": 1, "alive/voter": 2, "dead/voter": 1, "suspect/none": 1, "left/follower": 0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("nodes %s: got %v, want %v", k, got[k], v)
		}
	}
	if n := len(got); n != len(nodeStates)*len(nodeRoles) {
		t.Errorf("got %d series, want every state and role: %d", n, len(nodeStates)*len(nodeRoles))
	}
}

// scrape serves m once and returns the text.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: got status %d, want 200: %s", rec.Code, rec.Body)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

func TestScrape(t *testing.T) {
	src := &fakeSource{
		jobs: []job.Job{
			{ID: "heat", State: job.Running, Ranks: 4, Epoch: 7, Progress: 0.25,
				Interval: &job.Interval{Every: job.Duration(2 * time.Second), Auto: true, Cost: job.Duration(50 * time.Millisecond), MTBF: job.Duration(time.Hour)}},
			{ID: "ended", State: job.Succeeded, Ranks: 2, Ended: time.Now().Add(-time.Minute)},
			{ID: "old", State: job.Failed, Ranks: 2, Ended: time.Now().Add(-EndedShown - time.Minute)},
		},
		events: map[string][]job.Event{"old": {ev(1, 0, job.Restarting, "node_lost"), ev(2, 1, job.Failed, "")}, "heat": {ev(1, 0, job.Running, ""), ev(2, 5, job.Restarting, "rank_killed"),
			ev(3, 6, job.Staging, ""), ev(4, 7, job.Running, ""), typed(5, 8, job.EventProgress),
			stageEvent(6, 8.5, 42000),
			epochEvent(7, 9, job.EpochStats{Taken: t0.Add(8700 * time.Millisecond), Bytes: 4000, Copied: 4000, Sent: 1500, Wire: 1000})}},
		nodes: []node.Node{{State: "alive", Role: "leader"}, {State: "alive", Role: "voter"}, {State: "dead", Role: "voter"}},
		raft:  jobstore.Stats{Leader: true, Term: 3, CommitIndex: 40, AppliedIndex: 38},
		bytes: 12345,
		fails: mtbf.Estimate{Failures: 1, NodeTime: time.Hour},
		ovl:   Overlay{On: true, Tunnels: 3, Relayed: 1},
	}
	m, err := New(src)
	if err != nil {
		t.Fatal(err)
	}
	m.Detections.Suspected("n3", t0)
	m.Detections.Failed("n3", t0.Add(4500*time.Millisecond))
	text := scrape(t, m)
	for _, want := range []string{
		`shoal_jobs{state="running"} 1`,
		`shoal_jobs{state="succeeded"} 1`,
		`shoal_jobs{state="failed"} 1`,
		`shoal_jobs{state="cancelled"} 0`,
		`shoal_restarts_total{reason="rank_killed"} 1`,
		`shoal_restarts_total{reason="node_lost"} 1`,
		`shoal_restarts_total{reason="launcher_failed"} 0`,
		`shoal_job_state{job_id="ended",state="succeeded"} 1`,
		`shoal_job_state{job_id="heat",state="running"} 1`,
		`shoal_job_progress_ratio{job_id="heat"} 0.25`,
		`shoal_job_ranks{job_id="heat"} 4`,
		`shoal_job_epoch{job_id="heat"} 7`,
		`shoal_job_restarts_total{job_id="heat",reason="rank_killed"} 1`,
		`shoal_job_checkpoint_interval_seconds{job_id="heat"} 2`,
		`shoal_job_checkpoint_blocking_seconds{job_id="heat"} 0.05`,
		`shoal_job_mtbf_seconds{job_id="heat"} 3600`,
		`shoal_job_recovery_seconds_bucket{le="2"} 0`,
		`shoal_job_recovery_seconds_bucket{le="5"} 1`,
		`shoal_job_recovery_seconds_sum 3`,
		`shoal_job_recovery_seconds_count 1`,
		`shoal_epoch_completion_seconds_bucket{le="0.25"} 0`,
		`shoal_epoch_completion_seconds_bucket{le="0.5"} 1`,
		`shoal_epoch_completion_seconds_count 1`,
		`shoal_checkpoint_written_bytes_total 4000`,
		`shoal_checkpoint_copied_bytes_total 4000`,
		`shoal_checkpoint_copy_sent_bytes_total 1500`,
		`shoal_checkpoint_copy_network_bytes_total 1000`,
		`shoal_staged_file_bytes_total 42000`,
		`shoal_nodes{role="leader",state="alive"} 1`,
		`shoal_nodes{role="voter",state="dead"} 1`,
		`shoal_raft_leader 1`,
		`shoal_raft_term 3`,
		`shoal_raft_apply_lag_entries 2`,
		`shoal_shard_store_bytes 12345`,
		`shoal_node_failures_total 1`,
		`shoal_node_mtbf_seconds 3600`,
		`shoal_overlay_tunnels 3`,
		`shoal_overlay_relayed_peers 1`,
		`shoal_membership_suspicions_total 1`,
		`shoal_failure_detection_seconds_bucket{le="5"} 1`,
		`shoal_failure_detection_seconds_sum 4.5`,
		`process_cpu_seconds_total`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want+"\n") && !strings.Contains(text, want+" ") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(text, `job_id="old"`) {
		t.Errorf("a job ended more than %v ago has series of its own", EndedShown)
	}
	src.ovl = Overlay{}
	if text := scrape(t, m); strings.Contains(text, "shoal_overlay_") {
		t.Errorf("an agent without the overlay has its series:\n%s", text)
	}
	// A second scrape reads only the events since the first.
	src.froms = nil
	scrape(t, m)
	if got := src.froms; len(got) != 3 || got[0] != 8 {
		t.Errorf("second scrape asked for events from %v, want heat's from 8", got)
	}
	if text2 := scrape(t, m); !strings.Contains(text2, `shoal_job_restarts_total{job_id="heat",reason="rank_killed"} 1`+"\n") {
		t.Errorf("restarts changed on a scrape with no new events:\n%s", text2)
	}
}

func TestDetections(t *testing.T) {
	d := NewDetections()
	d.Suspected("n2", t0)
	d.Suspected("n2", t0.Add(time.Second)) // the first suspicion counts
	d.Failed("n2", t0.Add(5*time.Second))
	d.Suspected("n3", t0)
	d.Cleared("n3")                       // answered again
	d.Failed("n3", t0.Add(9*time.Second)) // reported by others: no latency here
	reg := prometheus.NewRegistry()
	reg.MustRegister(d)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]float64{}
	for _, f := range fams {
		m := f.GetMetric()[0]
		if h := m.GetHistogram(); h != nil {
			got[f.GetName()] = [2]float64{float64(h.GetSampleCount()), h.GetSampleSum()}
		} else {
			got[f.GetName()] = [2]float64{m.GetCounter().GetValue()}
		}
	}
	want := map[string][2]float64{famSuspicions.Name: {3}, famDetection.Name: {1, 5}}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: got %v, want %v", name, got[name], w)
		}
	}
}
