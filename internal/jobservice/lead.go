package jobservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"shoal/internal/api"
	"shoal/internal/coord"
	"shoal/internal/epochs"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/node"
)

// electionWait bounds how long a request waits for an election under way to end:
// a split vote costs a round of 2 to 4 s (jobstore.DefaultTiming's election
// timeout), and most elections need one round.
const electionWait = 8 * time.Second

// leads reports whether this node leads the job store, and so coordinates jobs;
// during an election it waits for its outcome.
func (s *Service) leads(ctx context.Context) bool {
	name, _ := s.awaitLeader(ctx)
	return name == s.cfg.Node && s.cfg.Store.IsLeader()
}

// awaitLeader returns the leading node's name, waiting up to electionWait for
// an election to end; "" when none ended. It gives up at once when the cluster
// has no quorum (node.Voters.Lost), which no wait mends, and says so in noQuorum.
func (s *Service) awaitLeader(ctx context.Context) (name, noQuorum string) {
	deadline := time.Now().Add(electionWait)
	for {
		if name := s.cfg.Store.Leader(); name != "" {
			return name, ""
		}
		if msg := s.noQuorum(ctx); msg != "" {
			return "", msg
		}
		if name := s.cfg.Store.AwaitLeader(ctx, min(quorumCheck, time.Until(deadline))); name != "" || !time.Now().Before(deadline) || ctx.Err() != nil {
			return name, ""
		}
	}
}

// quorumCheck is how often a request waiting for a leader looks whether the
// cluster lost its quorum.
const quorumCheck = 250 * time.Millisecond

// noQuorum says that the cluster has no quorum (node.Voters.NoQuorum), or "".
func (s *Service) noQuorum(ctx context.Context) string {
	if s.cfg.Nodes == nil {
		return ""
	}
	nodes, err := s.cfg.Nodes(ctx)
	if err != nil {
		return ""
	}
	return node.QuorumOf(nodes).NoQuorum()
}

// noQuorumError is a request refused because the cluster has no quorum: it
// is errkind.NotAvailable to the client, and passing it on again will not help.
type noQuorumError struct{ msg string }

func (e *noQuorumError) Error() string { return errkind.NotAvailable.Error() + ": " + e.msg }
func (e *noQuorumError) Unwrap() error { return errkind.NotAvailable }

// lead follows this node's leadership of the job store: a new leader takes over
// every job that has not ended; a node that stops leading stops running them.
func (s *Service) lead() {
	for leading := range s.cfg.Store.Leadership() {
		if leading {
			s.takeOver()
		} else {
			s.stepDown()
		}
	}
}

// takeOver resumes every unfinished job the store holds: relaunched from its
// newest complete epoch, the event saying so. A run this node still had from an
// earlier term is waited for first: it is being stopped.
func (s *Service) takeOver() {
	s.mu.Lock()
	s.term++
	term := s.term
	s.notTaken()
	s.newTermContext()
	termCtx := s.termCtx
	old := make([]*clusterJob, 0, len(s.jobs))
	for _, j := range s.jobs {
		old = append(old, j)
	}
	s.mu.Unlock()
	// What needs nothing committed begins now, beside the barrier: the fence
	// and files of every job this replica holds unfinished and nothing here
	// drives (one found only after the barrier begins them in resume).
	began := map[string]*early{}
	nodes, err := s.cfg.Nodes(termCtx)
	for _, info := range s.cfg.Store.Jobs() {
		if err == nil && info.Ended.IsZero() && s.driver(info.ID) == nil {
			began[info.ID] = s.begin(info, nodes)
		}
	}
	if s.cfg.WarmLinks != nil {
		// The rows the placements read: each fence reads a node's right
		// after its revoke there (WarmLink), over the connection it opened;
		// this reads those it could not, and all when no job is taken over.
		go func() {
			for _, e := range began {
				if e.fence != nil {
					<-e.fence.Done()
				}
			}
			s.cfg.WarmLinks()
		}()
	}
	// Everything the old leader committed must be applied here first.
	if err := s.cfg.Store.Barrier(10 * time.Second); err != nil {
		return // not leading after all: a false follows
	}
	for _, j := range old {
		j.cancel(coord.ErrLostLead)
		select {
		case <-j.finished:
		case <-time.After(oldRunWait):
		}
	}
	for _, info := range s.cfg.Store.Jobs() {
		if !info.Ended.IsZero() {
			continue
		}
		if j := s.driver(info.ID); j != nil {
			if j.term != term {
				// A run of an earlier term still stopping (a launch on a
				// hundred starved hosts can take minutes to give up): the job
				// is resumed once it has, if this term lasts.
				go s.resumeAfter(j, info.ID, term)
			}
			continue
		}
		s.resume(info, began[info.ID])
	}
	s.mu.Lock()
	if s.term == term { // still leading since
		s.markTaken()
	}
	s.mu.Unlock()
}

// oldRunWait is how long a new term's takeover waits for the runs of an earlier
// term to stop before it takes over the other jobs; those still stopping are
// resumed when they have (resumeAfter).
var oldRunWait = 30 * time.Second

// resumeAfter resumes job id once old, a run of an earlier term, has stopped,
// when this node still leads in term and nothing else drives the job: without
// it a job whose old run outlasted the takeover's wait would stay unrun, its
// state "restarting", until the next change of leader.
func (s *Service) resumeAfter(old *clusterJob, id string, term uint64) {
	<-old.finished
	s.mu.Lock()
	current := s.term == term && s.jobs[id] == nil
	s.mu.Unlock()
	if !current {
		return
	}
	info, _, err := s.cfg.Store.Job(id)
	if err != nil || !info.Ended.IsZero() {
		return
	}
	s.resume(info, nil)
}

// markTaken marks, under s.mu, that this node has taken the store's jobs over:
// waiting submissions go on.
func (s *Service) markTaken() {
	select {
	case <-s.taken:
	default:
		close(s.taken)
	}
}

// notTaken marks, under s.mu, that this node has yet to take the store's jobs
// over: submissions wait (awaitTaken).
func (s *Service) notTaken() {
	select {
	case <-s.taken:
		s.taken = make(chan struct{})
	default: // not taken yet: waiters keep waiting on the same channel
	}
}

// takeOverWait bounds how long a submission to a node that has just become the
// leader waits for it to take the earlier leader's jobs over.
const takeOverWait = 15 * time.Second

// awaitTaken waits until this node, leading, has taken over the jobs the store
// holds, so that a job submitted now is driven once: by Submit, not found again
// by takeOver's scan.
func (s *Service) awaitTaken(ctx context.Context) error {
	s.mu.Lock()
	taken := s.taken
	s.mu.Unlock()
	select {
	case <-taken:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(takeOverWait):
		return fmt.Errorf("%w: %s leads the cluster but is still taking over the jobs of the previous leader; try again", errkind.NotAvailable, s.cfg.Node)
	}
}

// stepDown stops every job this node drives; their processes are killed with
// their launcher, so no stale rank runs beside the new leader's run.
func (s *Service) stepDown() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.term++
	s.notTaken()
	s.newTermContext()
	for _, j := range s.jobs {
		j.cancel(coord.ErrLostLead)
	}
}

// resume takes over a job an earlier leader coordinated: the job's files are
// fetched from the nodes that have them, and the job restarts from the newest
// complete epoch of its book. pre is what the takeover began for the job
// before the store's barrier (nil: nothing, it begins now).
func (s *Service) resume(info job.Job, pre *early) {
	if pre == nil {
		pre = s.begin(info, nil)
	}
	_, stored, _ := s.cfg.Store.Job(info.ID)
	var book *epochs.Book
	if len(stored) > 0 {
		book = new(epochs.Book)
		if err := json.Unmarshal(stored, book); err != nil {
			book = nil // the job restarts from what the nodes hold, or afresh
		}
	}
	lostAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var why, lost string
	var moved bool
	if w, at, ok := handedOver(info, s.cfg.Node); ok {
		// The node that left is not placed on.
		why, lost, moved, lostAt = w, info.Coordinator, true, at
	} else {
		why, lost, moved = s.whyTakeOver(ctx, info.Coordinator)
	}
	info.Handover = nil
	from := "from the beginning"
	switch {
	case info.Spec.Farm != nil:
		from = "the farm, from its ledger of stored results"
		book = nil
	case book != nil && book.Newest() > 0:
		from = fmt.Sprintf("from epoch %d", book.Newest())
	}
	info.Coordinator = s.cfg.Node
	s.cfg.Store.Update(info.ID, &info, []job.Event{job.NewEvent(job.EventCoordinator, fmt.Sprintf("%s; %s coordinates %s", why, s.cfg.Node, from), nil)}, nil)
	s.start(info, book, &coord.Resume{Restarts: info.Restarts, Why: why, At: lostAt, Lost: lost, LeadMoved: moved, Fenced: pre.fence, Fetched: pre.wait})
}

// early is what a takeover begins for a job before it waits for anything
// (begin): its fence, and the fetch of its files.
type early struct {
	fence    *coord.Fencing // nil when the live nodes could not be read
	fetched  chan struct{}  // closed once the files are fetched, or not
	fetchErr error          // why they were not
}

// wait waits until the fetch of the job's files has ended, and returns why it
// failed.
func (e *early) wait(ctx context.Context) error {
	select {
	case <-e.fetched:
		return e.fetchErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// begin starts, in the background, what taking job info over needs and needs
// nothing committed for, the longest parts of a takeover on a large cluster:
// the fence of the job on every live node but its last coordinator and the
// nodes its run found lost (coord.Fence; the run fences those it did not ask),
// and the fetch of its files into this node's cache. nodes are the cluster's
// nodes, read once for every job of a takeover (nil: read now). Both end with
// this node's term as leader.
func (s *Service) begin(info job.Job, nodes []node.Node) *early {
	s.mu.Lock()
	term := s.termCtx
	s.mu.Unlock()
	e := &early{fetched: make(chan struct{})}
	go func() {
		ctx, cancel := context.WithTimeout(term, time.Minute)
		defer cancel()
		e.fetchErr = s.fetchFiles(ctx, info)
		close(e.fetched)
	}()
	if nodes == nil {
		var err error
		if nodes, err = s.cfg.Nodes(term); err != nil {
			return e
		}
	}
	skip := map[string]bool{info.Coordinator: true}
	for _, n := range info.Avoid {
		skip[n] = true
	}
	var live []node.Node
	for _, n := range nodes {
		if n.Live() && !skip[n.Name] {
			live = append(live, n)
		}
	}
	e.fence = coord.Fence(term, live, s.cfg.Peer, info.ID, s.cfg.WarmLink)
	return e
}

// newTermContext ends the context of this node's last term as leader and
// makes the next one's; called with s.mu held.
func (s *Service) newTermContext() {
	if s.termEnd != nil {
		s.termEnd()
	}
	s.termCtx, s.termEnd = context.WithCancel(context.Background())
}

// fetchFiles copies into this node's cache every file of the job it lacks, from
// the first live node that has it.
func (s *Service) fetchFiles(ctx context.Context, info job.Job) error {
	nodes, err := s.cfg.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, f := range info.Spec.Files {
		if s.cache.Has(f.SHA256) {
			continue
		}
		got := false
		for _, n := range nodes {
			if n.State != "alive" || n.Name == s.cfg.Node || got {
				continue
			}
			rc, _, err := s.cfg.Agent(n).GetFile(ctx, f.SHA256)
			if err != nil {
				continue
			}
			got = s.cache.Put(f.SHA256, rc) == nil
			rc.Close()
		}
		if !got {
			return fmt.Errorf("no live node has file %s of job %s", f.Name, info.ID)
		}
	}
	return nil
}

// leader returns a client of the leading node's agent, or why there is none.
func (s *Service) leader(ctx context.Context) (*api.Client, error) {
	name, noQuorum := s.awaitLeader(ctx)
	if noQuorum != "" {
		return nil, &noQuorumError{noQuorum}
	}
	if name != "" && name != s.cfg.Node {
		nodes, err := s.cfg.Nodes(ctx)
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			if n.Name == name && n.API != "" {
				return s.cfg.Agent(n), nil
			}
		}
	}
	return nil, fmt.Errorf("%w: %s", errkind.NotAvailable, s.quorum(ctx))
}

// quorum says why no node coordinates jobs ([node.Quorum]).
func (s *Service) quorum(ctx context.Context) string {
	nodes, err := s.cfg.Nodes(ctx)
	if err != nil {
		return "no node coordinates jobs: " + err.Error()
	}
	if msg := node.Quorum(nodes); msg != "" {
		return msg
	}
	return "no node coordinates jobs: the leader is not reachable from " + s.cfg.Node
}

// forwardSubmit passes a job to the leader, with the files it needs from this
// node's cache. While there is no leader, or its agent cannot be reached (killed
// a moment ago: this replica names it until an election ends), the submission is
// passed on again, to it or its successor, for up to forwardWait. The job's id
// is drawn here, so that a submission that reached the leader before its answer
// was lost is found, not made twice.
func (s *Service) forwardSubmit(ctx context.Context, spec job.Spec) (job.Job, error) {
	if spec.ID == "" {
		spec.ID = job.NewID(spec.Argv[0])
	}
	deadline := time.Now().Add(forwardWait)
	for again := false; ; again = true {
		if again && s.leads(ctx) {
			// This node won the election: the job is its own to start, unless an
			// earlier attempt reached the old leader and the job is in the store.
			if info, _, err := s.cfg.Store.Job(spec.ID); err == nil && job.OwnSubmission(info, spec) {
				return info, nil
			}
			return s.Submit(ctx, spec)
		}
		info, unreachable, err := s.forwardOnce(ctx, spec, again)
		if err == nil || !unreachable || time.Now().After(deadline) {
			return info, err
		}
		select {
		case <-ctx.Done():
			return info, err
		case <-time.After(forwardRetry):
		}
	}
}

// How long and how often a submission is passed on again while no leader's
// agent can be reached: past the followers' election (2 to 4.5 s, see
// jobstore.DefaultTiming) with room for a loaded machine.
const (
	forwardWait  = 15 * time.Second
	forwardRetry = 250 * time.Millisecond
)

// forwardOnce is one attempt of forwardSubmit; unreachable says no leader's
// agent could be reached. again marks a retry: a job with the id already
// known to the store is then this submission's own, which reached the leader.
func (s *Service) forwardOnce(ctx context.Context, spec job.Spec, again bool) (_ job.Job, unreachable bool, _ error) {
	c, err := s.leader(ctx)
	if err != nil {
		// An election under way, or a leader this node cannot reach yet: asking
		// again may find the new one. Without a quorum no wait helps.
		var nq *noQuorumError
		return job.Job{}, !errors.As(err, &nq), err
	}
	for _, f := range spec.Files {
		if has, err := c.HasFile(ctx, f.SHA256); err != nil || has {
			if err != nil {
				return job.Job{}, errors.Is(err, errkind.Unreachable), fmt.Errorf("%w: file %s to the coordinator %s: %v", errkind.BadGateway, f.Name, c.Addr(), err)
			}
			continue
		}
		r, err := os.Open(s.cache.Path(f.SHA256))
		if err != nil {
			return job.Job{}, false, fmt.Errorf("%w: file %s (%s) was not uploaded to this node first", errkind.BadRequest, f.Name, f.SHA256)
		}
		err = c.PutFile(ctx, f.SHA256, r, f.Size)
		r.Close()
		if err != nil {
			return job.Job{}, errors.Is(err, errkind.Unreachable), fmt.Errorf("%w: file %s to the coordinator %s: %v", errkind.BadGateway, f.Name, c.Addr(), err)
		}
	}
	info, err := c.Submit(ctx, spec)
	if again && errors.Is(err, errkind.Conflict) {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s.cfg.Store.WaitJob(wctx, spec.ID)
		if stored, _, serr := s.cfg.Store.Job(spec.ID); serr == nil && job.OwnSubmission(stored, spec) {
			return stored, false, nil
		}
	}
	if err != nil {
		return info, errors.Is(err, errkind.Unreachable), err
	}
	// The submitter follows the job here next: wait until this replica has it.
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s.cfg.Store.WaitSubmitted(wctx, info.ID, info.Submitted)
	return info, false, nil
}

// whyTakeOver says why this node takes over a job prev coordinated, which node
// not to place on until membership declares it gone ("" for none), and whether
// prev only lost the lead, so that the relaunch is not counted as a restart:
//   - prev is this node: its agent restarted (its first term as leader: its
//     ranks died with it, a restart), or it lost the lead and won it back;
//   - prev still answers: it lost the lead (it was too slow to keep it, or is cut
//     off from a majority but not from this node); its shards are still there;
//   - prev does not answer: it is lost.
func (s *Service) whyTakeOver(ctx context.Context, prev string) (why, lost string, leadMoved bool) {
	if prev == s.cfg.Node {
		s.mu.Lock()
		first := s.term == 1
		s.mu.Unlock()
		if first {
			return fmt.Sprintf("coordinator %s restarted", prev), "", false
		}
		return fmt.Sprintf("coordinator %s lost the lead and won it back", prev), "", true
	}
	nodes, _ := s.cfg.Nodes(ctx)
	for _, n := range nodes {
		if n.Name != prev || n.API == "" {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := s.cfg.Agent(n).Health(cctx)
		cancel()
		if err == nil {
			return fmt.Sprintf("coordinator %s lost the lead", prev), "", true
		}
	}
	return fmt.Sprintf("coordinator %s lost", prev), prev, false
}

// handedOver says, of a job node self takes over whose coordinator left and
// handed it over (info.Handover), why it is taken over ("coordinator n1 left,
// handing the job over at epoch 5") and when it stopped: when that epoch was
// taken, since its ranks held still after it. ok is false for a job not handed
// over by its last coordinator, or handed over by self, which did not leave
// after all.
func handedOver(info job.Job, self string) (why string, at time.Time, ok bool) {
	h := info.Handover
	if h == nil || h.From != info.Coordinator || h.From == self || h.Epoch == 0 {
		return "", time.Time{}, false
	}
	return fmt.Sprintf("coordinator %s left, handing the job over at epoch %d", h.From, h.Epoch), h.At, true
}
