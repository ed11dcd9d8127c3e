package coord

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

// stageMeter counts the bytes of job files sent to each node while a run is
// staged. Safe for concurrent use: each node's copies run in their own
// goroutine, and the staging loop reads it.
type stageMeter struct {
	mu    sync.Mutex
	nodes map[string]*nodeBytes
}

// nodeBytes is what a node is sent of the job's files: Sent of Total bytes.
type nodeBytes struct {
	Node        string
	Sent, Total int64
}

// expect adds n bytes to what node is to be sent.
func (m *stageMeter) expect(node string, n int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.nodes == nil {
		m.nodes = map[string]*nodeBytes{}
	}
	nb := m.nodes[node]
	if nb == nil {
		nb = &nodeBytes{Node: node}
		m.nodes[node] = nb
	}
	nb.Total += n
}

// reader counts what is read of r as sent to node.
func (m *stageMeter) reader(node string, r io.Reader) io.Reader {
	if m == nil {
		return r
	}
	return meterReader{r: r, m: m, node: node}
}

// snapshot returns what each node has been sent, by name.
func (m *stageMeter) snapshot() []nodeBytes {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]nodeBytes, 0, len(m.nodes))
	for _, nb := range m.nodes {
		out = append(out, *nb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Node < out[j].Node })
	return out
}

type meterReader struct {
	r    io.Reader
	m    *stageMeter
	node string
}

func (r meterReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.m.mu.Lock()
	r.m.nodes[r.node].Sent += int64(n)
	r.m.mu.Unlock()
	return n, err
}

// stageNote is the line that says how far a staging has come, elapsed after
// it began and sinceSaid after its last such line (said: there was one), or
// "" when none is due: before stageQuiet, within stageEvery of the last, and
// once every node has been sent all it is to get.
func stageNote(elapsed, sinceSaid time.Duration, said bool, nodes []nodeBytes) string {
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
