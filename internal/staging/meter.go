package staging

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"shoal/internal/job"
)

// A staging of job files that lasts says how far it has come: first once it
// has gone on for stageQuiet, then every stageEvery, until every byte is sent.
const (
	stageQuiet = 2 * time.Second
	stageEvery = 2 * time.Second
)

// Meter counts the bytes of job files sent to each node while a run is
// staged. Safe for concurrent use: each node's copies run in their own
// goroutine, and the staging loop reads it. A nil Meter counts nothing.
type Meter struct {
	mu    sync.Mutex
	nodes map[string]*NodeBytes
}

// NodeBytes is what a node is sent of the job's files: Sent of Total bytes.
type NodeBytes struct {
	Node        string
	Sent, Total int64
}

// Expect adds n bytes to what node is to be sent.
func (m *Meter) Expect(node string, n int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nodes == nil {
		m.nodes = map[string]*NodeBytes{}
	}
	nb := m.nodes[node]
	if nb == nil {
		nb = &NodeBytes{Node: node}
		m.nodes[node] = nb
	}
	nb.Total += n
}

// Reader counts what is read of r as sent to node.
func (m *Meter) Reader(node string, r io.Reader) io.Reader {
	if m == nil {
		return r
	}
	return meterReader{r: r, m: m, node: node}
}

// Snapshot returns what each node has been sent, by name.
func (m *Meter) Snapshot() []NodeBytes {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]NodeBytes, 0, len(m.nodes))
	for _, nb := range m.nodes {
		out = append(out, *nb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

type meterReader struct {
	r    io.Reader
	m    *Meter
	node string
}

func (r meterReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.m.mu.Lock()
	r.m.nodes[r.node].Sent += int64(n)
	r.m.mu.Unlock()
	return n, err
}

// Note is the line that says how far a staging has come, elapsed after
// it began and sinceSaid after its last such line (said: there was one), or
// "" when none is due: before stageQuiet, within stageEvery of the last, and
// once every node has been sent all it is to get.
func Note(elapsed, sinceSaid time.Duration, said bool, nodes []NodeBytes) string {
	if elapsed < stageQuiet || said && sinceSaid < stageEvery {
		return ""
	}
	var parts []string
	var left bool
	for _, nb := range nodes {
		if nb.Total == 0 {
			continue
		}
		left = left || nb.Sent < nb.Total
		parts = append(parts, fmt.Sprintf("%s of %s to %s", job.Bytes(nb.Sent), job.Bytes(nb.Total), nb.Node))
	}
	if !left {
		return ""
	}
	return fmt.Sprintf("staging job files for %s: %s", elapsed.Round(time.Second), strings.Join(parts, ", "))
}

// wait waits for wg, the copies of a run's job files, saying how far they
// have come when they last (Note).
func wait(wg *sync.WaitGroup, meter *Meter, say func(string)) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	var said time.Time
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			if note := Note(now.Sub(start), now.Sub(said), !said.IsZero(), meter.Snapshot()); note != "" {
				said = now
				say(note)
			}
		}
	}
}
