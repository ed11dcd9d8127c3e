package ui

import (
	"context"
	"io"
	"slices"
	"sync"

	"shoal/internal/api"
	"shoal/internal/job"
	"shoal/internal/links"
	"shoal/internal/node"
)

// MemSource is a [Source] held in memory, for tests: its fields are what it
// answers. Events answers from Events, filtered by job and Seq. It is safe for
// concurrent use once filled.
type MemSource struct {
	mu      sync.Mutex
	Members []node.Node
	Jobs    []job.Job
	Evs     []job.Event
	// LinkReads counts the calls of Links.
	LinkReads int
}

var _ Source = (*MemSource)(nil)

func (m *MemSource) Health(context.Context) (api.Health, error) {
	return api.Health{Name: "shoal", Version: "test", Node: "n1/0123456789abcdef"}, nil
}

func (m *MemSource) Nodes(context.Context) ([]node.Node, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.Members, nil
}

func (m *MemSource) Links(context.Context, bool) (links.List, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.LinkReads++
	return links.List{Links: []links.Link{{From: "n1", To: "n2"}}}, nil
}

func (m *MemSource) ListJobs(context.Context, job.Query) (api.JobList, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return api.JobList{Jobs: slices.Clone(m.Jobs)}, nil // a copy, as from the wire
}

func (m *MemSource) Job(_ context.Context, id string) (job.Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, j := range m.Jobs {
		if j.ID == id {
			return j, nil
		}
	}
	return job.Job{}, job.NotFound(id)
}

func (m *MemSource) Events(_ context.Context, id string, from uint64, _ bool) (Events, error) {
	if _, err := m.Job(context.Background(), id); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []job.Event
	for _, e := range m.Evs {
		if e.Job == id && e.Seq >= from {
			out = append(out, e)
		}
	}
	return &memEvents{evs: out}, nil
}

type memEvents struct{ evs []job.Event }

func (s *memEvents) Next() (job.Event, error) {
	if len(s.evs) == 0 {
		return job.Event{}, io.EOF
	}
	e := s.evs[0]
	s.evs = s.evs[1:]
	return e, nil
}

func (s *memEvents) Close() error { return nil }
