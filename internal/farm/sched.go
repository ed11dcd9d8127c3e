package farm

import (
	"errors"
	"fmt"
	"sort"
)

// Errors of the scheduler.
var (
	// ErrUnknownNode: a call named a node the scheduler does not have.
	ErrUnknownNode = errors.New("farm: unknown node")
	// ErrNotRunning: a call named a task that is not running on that node.
	ErrNotRunning = errors.New("farm: task not running there")
)

// speedWeight is the weight of the newest finished task in a node's learned
// speed (an exponential moving average).
const speedWeight = 0.2

// Scheduler decides which task runs where. Tasks are handed out in number
// order, a task run again (its node was lost, or it failed and has retries
// left) before any new one. A node takes tasks while it holds fewer than its
// cores plus the prefetch; of the nodes with room, the next task goes to the
// one with the fewest tasks in hand per unit of capacity, where capacity is
// cores × speed and speed is learned from the node's finished tasks (relative
// to the others; 1 until it has finished one). Ties go to the node first by
// name. It is not safe for concurrent use.
type Scheduler struct {
	prefetch int
	retries  int
	pending  []int // tasks to hand out, in this order
	nodes    map[string]*node
	attempts map[int]int // failed runs of each task
	total    int
	left     int // tasks not yet done or given up
	// owner, in a static schedule (see SetStatic), is the node each task was
	// given to in advance; static says whether one is set.
	owner  map[int]string
	static bool
}

// Dispatch modes: how tasks are given to nodes.
const (
	// Dynamic is the default: the next task to the least loaded node with room.
	Dynamic = ""
	// Cyclic and Block are static schedules, for comparison: task t goes to
	// node t mod n, or nodes take contiguous ranges of equal length, whatever
	// their speed; a node runs only its own tasks (those of a lost node go to
	// any node with room).
	Cyclic = "cyclic"
	Block  = "block"
)

type node struct {
	name    string
	cores   int
	running map[int]bool
	// perTask is the learned time of one task on one core, in seconds (0:
	// unknown).
	perTask float64
	done    int
}

// NewScheduler returns a scheduler for the tasks numbered 0 … total-1 except
// those in skip (done already). prefetch is how many tasks a node holds beyond
// its cores; retries how many times a task that failed by itself runs again.
func NewScheduler(total int, skip func(task int) bool, prefetch, retries int) *Scheduler {
	s := &Scheduler{prefetch: max(prefetch, 0), retries: max(retries, 0), nodes: map[string]*node{},
		attempts: map[int]int{}, total: total}
	for t := 0; t < total; t++ {
		if skip == nil || !skip(t) {
			s.pending = append(s.pending, t)
		}
	}
	s.left = len(s.pending)
	return s
}

// AddNode makes a node available with cores cores (at least 1). Adding a node
// the scheduler has changes its cores only.
func (s *Scheduler) AddNode(name string, cores int) {
	cores = max(cores, 1)
	if n, ok := s.nodes[name]; ok {
		n.cores = cores
		return
	}
	s.nodes[name] = &node{name: name, cores: cores, running: map[int]bool{}}
}

// RemoveNode takes a node away (it was lost or left) and returns the tasks it
// was running, which go back to the front of the queue, in number order.
func (s *Scheduler) RemoveNode(name string) []int {
	n, ok := s.nodes[name]
	if !ok {
		return nil
	}
	delete(s.nodes, name)
	tasks := make([]int, 0, len(n.running))
	for t := range n.running {
		tasks = append(tasks, t)
	}
	sort.Ints(tasks)
	s.pending = append(tasks, s.pending...)
	return tasks
}

// Nodes returns the names of the scheduler's nodes, sorted.
func (s *Scheduler) Nodes() []string {
	names := make([]string, 0, len(s.nodes))
	for name := range s.nodes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// SetStatic fixes a static schedule (Cyclic or Block) of the tasks waiting
// over nodes, in that order.
func (s *Scheduler) SetStatic(mode string, nodes []string) {
	s.static, s.owner = true, map[int]string{}
	n := len(nodes)
	if n == 0 {
		return
	}
	for i, t := range s.pending {
		k := i % n
		if mode == Block {
			k = i * n / len(s.pending)
		}
		s.owner[t] = nodes[k]
	}
}

// Next takes the next task and the node to run it, or ok false when no task is
// waiting or no node has room.
func (s *Scheduler) Next() (task int, node string, ok bool) {
	if len(s.pending) == 0 {
		return 0, "", false
	}
	if s.static {
		return s.nextStatic()
	}
	best := s.pick()
	if best == nil {
		return 0, "", false
	}
	task = s.pending[0]
	s.pending = s.pending[1:]
	best.running[task] = true
	return task, best.name, true
}

// nextStatic takes the first waiting task whose owner has room, or whose
// owner is gone and some node has room.
func (s *Scheduler) nextStatic() (int, string, bool) {
	free := s.pick()
	for i, t := range s.pending {
		var to *node
		if n, ok := s.nodes[s.owner[t]]; ok {
			if len(n.running) < n.cores+s.prefetch {
				to = n
			}
		} else {
			to = free
		}
		if to != nil {
			s.pending = append(s.pending[:i], s.pending[i+1:]...)
			to.running[t] = true
			return t, to.name, true
		}
	}
	return 0, "", false
}

// pick is the node with room and the lowest load per capacity.
func (s *Scheduler) pick() *node {
	mean := s.meanPerTask()
	var best *node
	var bestLoad float64
	for _, name := range s.Nodes() {
		n := s.nodes[name]
		if len(n.running) >= n.cores+s.prefetch {
			continue
		}
		load := float64(len(n.running)+1) / (float64(n.cores) * n.speed(mean))
		if best == nil || load < bestLoad-1e-12 {
			best, bestLoad = n, load
		}
	}
	return best
}

// speed is the node's speed relative to mean (seconds per task of all nodes
// that finished one); 1 when either is unknown.
func (n *node) speed(mean float64) float64 {
	if n.perTask <= 0 || mean <= 0 {
		return 1
	}
	return mean / n.perTask
}

func (s *Scheduler) meanPerTask() float64 {
	sum, k := 0.0, 0
	for _, n := range s.nodes {
		if n.perTask > 0 {
			sum += n.perTask
			k++
		}
	}
	if k == 0 {
		return 0
	}
	return sum / float64(k)
}

// Done records that task finished on node, successfully, after seconds of
// running (spent on one core: the node learns its speed from it).
func (s *Scheduler) Done(name string, task int, seconds float64) error {
	n, err := s.take(name, task)
	if err != nil {
		return err
	}
	n.done++
	if seconds > 0 {
		if n.perTask == 0 {
			n.perTask = seconds
		} else {
			n.perTask = (1-speedWeight)*n.perTask + speedWeight*seconds
		}
	}
	s.left--
	return nil
}

// Failed records that task failed by itself on node (the program exited with
// an error). It reports whether the task runs again: while it has retries
// left it goes back to the front of the queue; otherwise it is given up.
func (s *Scheduler) Failed(name string, task int) (again bool, err error) {
	if _, err := s.take(name, task); err != nil {
		return false, err
	}
	s.attempts[task]++
	if s.attempts[task] <= s.retries {
		s.pending = append([]int{task}, s.pending...)
		return true, nil
	}
	s.left--
	return false, nil
}

// Requeue puts a task that could not run on node, through no fault of its own
// (the node did not answer, its result could not be stored), back at the
// front of the queue.
func (s *Scheduler) Requeue(name string, task int) error {
	if _, err := s.take(name, task); err != nil {
		return err
	}
	s.pending = append([]int{task}, s.pending...)
	return nil
}

func (s *Scheduler) take(name string, task int) (*node, error) {
	n, ok := s.nodes[name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownNode, name)
	}
	if !n.running[task] {
		return nil, fmt.Errorf("%w: task %d on %s", ErrNotRunning, task, name)
	}
	delete(n.running, task)
	return n, nil
}

// Attempts returns how many times task has failed by itself.
func (s *Scheduler) Attempts(task int) int { return s.attempts[task] }

// Left returns how many tasks are neither done nor given up.
func (s *Scheduler) Left() int { return s.left }

// Redo puts a task done before back at the front of the queue: every copy of
// its result was lost.
func (s *Scheduler) Redo(task int) {
	s.pending = append([]int{task}, s.pending...)
	s.left++
}
