package agent

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/jobstore"
	"shoal/internal/membership"
	"shoal/internal/node"
)

// StoreDir is where in the data dir the job store keeps its log and snapshots.
const StoreDir = "raft"

// openStore opens this node's replica of the job store. A node started without
// --join is the first of a cluster: it bootstraps the store when it holds none.
// The replica listens on Config.Raft and is announced at host, the gossip
// address's IP.
func (a *Agent) openStore(host string) error {
	_, port, _ := net.SplitHostPort(a.cfg.Raft)
	s, err := jobstore.Open(jobstore.Config{
		Node: a.cfg.Name, Dir: filepath.Join(a.cfg.DataDir, StoreDir),
		Bind: a.cfg.Raft, Advertise: net.JoinHostPort(host, port),
		Bootstrap: len(a.cfg.Join) == 0, Timing: a.cfg.RaftTiming, Log: a.log.With("part", "raft"),
		ServerTLS: a.tls.ServerConfig(), ClientTLS: a.tls.ClientConfig(),
		Follow: a.followStore,
	})
	if err != nil {
		return err
	}
	a.store = s
	return nil
}

// followWait is how long a node that is not a server of the job store waits
// on a server for the next command (GET /v1/store/follow): what it reads lags
// the servers by one long poll's answer, not by this.
const followWait = 10 * time.Second

// followStore asks a server of the job store for the commands applied after
// index after, for the mirror of a node that is not one (jobstore.Config.Follow):
// the servers this node knows of in its own order (followOrder), then the
// other live nodes, longest up first (those the voter plan makes servers),
// moving on at an error; a node that is not a server answers 503.
func (a *Agent) followStore(ctx context.Context, after uint64) (jobstore.FollowReply, error) {
	select {
	case <-a.membersUp:
	case <-ctx.Done():
		return jobstore.FollowReply{}, ctx.Err()
	}
	var errs []error
	for _, m := range a.storeServers() {
		call, cancel := context.WithTimeout(ctx, followWait+reachTimeout+5*time.Second)
		r, err := a.peers.Get(m.Meta.API).FollowStore(call, after, followWait)
		cancel()
		if err == nil {
			return r, nil
		}
		if ctx.Err() != nil {
			return jobstore.FollowReply{}, ctx.Err()
		}
		errs = append(errs, fmt.Errorf("%s: %w", m.Name, err))
	}
	return jobstore.FollowReply{}, fmt.Errorf("%w: no server of the job store answers: %w", errkind.Unreachable, errors.Join(errs...))
}

// storeServers are the other live nodes in the order followStore asks them:
// the servers of the job store first, in an order of this node's own
// (followOrder), then the others, longest up first (those the voter plan makes
// servers next).
func (a *Agent) storeServers() []membership.Node {
	var names []string
	if servers, err := a.store.Servers(); err == nil {
		for _, s := range servers {
			names = append(names, s.Name)
		}
	}
	rank := map[string]int{}
	for i, name := range followOrder(a.cfg.Name, names) {
		rank[name] = i
	}
	var out []membership.Node
	for _, m := range a.members.Nodes() {
		if m.Name != a.cfg.Name && m.State.Member() && m.Meta.API != "" {
			out = append(out, m)
		}
	}
	order := func(name string) int {
		if r, ok := rank[name]; ok {
			return r
		}
		return len(rank)
	}
	slices.SortStableFunc(out, func(x, y membership.Node) int {
		if c := order(x.Name) - order(y.Name); c != 0 {
			return c
		}
		return x.Since.Compare(y.Since)
	})
	return out
}

// followOrder is the order in which client self asks the servers of the job
// store to follow it: each client its own (highest random weight of the two
// names), so that the clients' long polls spread evenly over the servers
// rather than all on the leader, and a client asks the same server while it
// stays one. Any server will do: each applies every command, a follower a
// commit round after the leader.
func followOrder(self string, servers []string) []string {
	weight := func(server string) uint64 {
		h := fnv.New64a()
		h.Write([]byte(self))
		h.Write([]byte{0})
		h.Write([]byte(server))
		// FNV's last bytes barely reach its high bits: mix them (splitmix64's
		// finalizer), or servers whose names differ at the end would not weigh
		// alike.
		x := h.Sum64()
		x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
		x = (x ^ x>>27) * 0x94d049bb133111eb
		return x ^ x>>31
	}
	out := slices.Clone(servers)
	slices.SortFunc(out, func(x, y string) int {
		if wx, wy := weight(x), weight(y); wx != wy {
			if wx > wy {
				return -1
			}
			return 1
		}
		return strings.Compare(x, y)
	})
	return out
}

// storeService is the job store as GET /v1/store/follow serves it.
type storeService struct{ store *jobstore.Store }

func (s storeService) Follow(ctx context.Context, after uint64, wait time.Duration) (jobstore.FollowReply, error) {
	r, err := s.store.Follow(ctx, after, wait)
	if errors.Is(err, jobstore.ErrNotServer) {
		return r, fmt.Errorf("%w: %v", errkind.NotAvailable, err)
	}
	return r, err
}

var _ api.StoreService = storeService{}

// roles is each node's part in the job store, as this node's replica knows it
// (or, on a node that is not a server, the server it follows): a node that is
// not a server of it is a client (node.RoleClient, the default of Role in
// node.Node's view; see memberNodes).
func (a *Agent) roles() map[string]string {
	out := map[string]string{}
	if a.store == nil {
		return out
	}
	servers, err := a.store.Servers()
	if err != nil {
		return out
	}
	leader := a.store.Leader()
	for _, s := range servers {
		switch {
		case s.Name == leader:
			out[s.Name] = node.RoleLeader
		case s.Voter:
			out[s.Name] = node.RoleVoter
		default:
			out[s.Name] = node.RoleFollower
		}
	}
	return out
}

// Store returns the node's replica of the cluster's jobs.
func (a *Agent) Store() *jobstore.Store { return a.store }

// reconcileVoters keeps, while this node leads, the job store's voters in step
// with membership (see jobstore.PlanVoters): at every membership event and every
// second, which also retries a change that failed.
func (a *Agent) reconcileVoters(sub *membership.Subscription) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-a.quit:
			return
		case _, ok := <-sub.C:
			if !ok {
				return
			}
		case <-tick.C:
		}
		if !a.store.IsLeader() {
			continue
		}
		changes, err := a.store.Reconcile(a.storeMembers())
		for _, c := range changes {
			a.log.Info("job store voters", "change", c.String())
		}
		if err != nil {
			a.log.Warn("job store voters", "err", err)
		}
	}
}

// storeMembers is membership as the voter plan needs it, with the nodes whose
// agents refuse connections marked (reachCheck, as GET /v1/nodes shows them).
func (a *Agent) storeMembers() []jobstore.Member {
	ctx, cancel := context.WithTimeout(context.Background(), 2*reachTimeout)
	defer cancel()
	servers := map[string]bool{}
	if cfg, err := a.store.Configuration(); err == nil {
		for _, s := range cfg {
			servers[s.Name] = true
		}
	}
	check := reachCandidates(a.memberNodes(), servers, jobstore.MaxVoters+jobstore.MaxStandbys)
	a.reach.mark(ctx, check, dialTCP)
	unreachable := map[string]bool{}
	for _, n := range check {
		unreachable[n.Name] = n.State == StateUnreachable
	}
	var out []jobstore.Member
	for _, n := range a.members.Nodes() {
		out = append(out, jobstore.Member{Name: n.Name, Raft: n.Meta.Raft, Alive: n.State.Member() && !n.Meta.Leaving,
			Since: n.Since, Unreachable: unreachable[n.Name]})
	}
	return out
}

// reachCandidates picks, of nodes, those whose agents the voter plan needs to
// know answer: the servers of the job store, and the k live others up longest,
// which it would add next. The other nodes are clients it leaves as they are,
// so that the leader dials a bounded number of agents a second however large
// the cluster.
func reachCandidates(nodes []node.Node, servers map[string]bool, k int) []node.Node {
	var out, others []node.Node
	for _, n := range nodes {
		switch {
		case servers[n.Name]:
			out = append(out, n)
		case n.State == "alive" || n.State == "suspect":
			others = append(others, n)
		}
	}
	slices.SortStableFunc(others, func(x, y node.Node) int {
		if c := x.Since.Compare(y.Since); c != 0 {
			return c
		}
		return strings.Compare(x.Name, y.Name)
	})
	return append(out, others[:min(k, len(others))]...)
}

// SetBeforeHandOver sets the hook run on a graceful leave of the node that leads
// the job store, before it passes the lead on (nil: none): the coordinator
// stops its jobs at a checkpoint for the next leader. An error is logged and
// the leave goes on.
func (a *Agent) SetBeforeHandOver(f func(ctx context.Context) error) {
	if f == nil {
		a.beforeHandOver.Store(nil)
		return
	}
	a.beforeHandOver.Store(&f)
}

// handOver, on a node about to leave that leads the job store, passes the lead to
// another node first, so that coordination goes on without waiting for an
// election; a lone voter first makes a follower a voter. The hook set with
// SetBeforeHandOver runs first.
func (a *Agent) handOver(ctx context.Context) {
	if !a.store.IsLeader() {
		return
	}
	if f := a.beforeHandOver.Load(); f != nil {
		if err := (*f)(ctx); err != nil {
			a.log.Warn("before passing the job store's lead", "err", err)
		}
	}
	var others []jobstore.Member
	for _, m := range a.storeMembers() {
		if m.Name != a.cfg.Name {
			others = append(others, m)
		}
	}
	if err := a.store.HandOver(others); err != nil {
		a.log.Warn("passing the job store's lead before leaving", "err", err)
		return
	}
	a.log.Info("passed the job store's lead before leaving", "to", a.store.Leader())
}

// RecoverQuorum makes this node the only voter of the job store, for a cluster
// that lost a majority of its voters for good (jobstore.Store.Recover says what
// that costs). It refuses, with errkind.Conflict, while the cluster has a quorum
// as this node sees it (node.Voters.Lost), so that it cannot be run by mistake on
// a healthy cluster, and returns once this node leads the new configuration.
func (a *Agent) RecoverQuorum(ctx context.Context) (api.RecoverResponse, error) {
	a.recoverMu.Lock()
	defer a.recoverMu.Unlock()
	if a.store == nil {
		return api.RecoverResponse{}, fmt.Errorf("%w: this agent keeps no job store", errkind.NotAvailable)
	}
	// A client's Raft replica is empty or stale: it would make a cluster of
	// nothing.
	if servers, err := a.store.Configuration(); err != nil || !slices.ContainsFunc(servers, func(s jobstore.Server) bool { return s.Name == a.cfg.Name }) {
		return api.RecoverResponse{}, fmt.Errorf("%w: node %s keeps no replica of the job store (a client): run it on a node that voted or was a standby", errkind.Conflict, a.cfg.Name)
	}
	// The view GET /v1/nodes gives, which `shoal run` and `shoal jobs` judged
	// the quorum by: a voter whose agent refuses connections is lost already,
	// seconds before membership declares it dead.
	nodes, err := (*localNode)(a).Nodes(ctx)
	if err != nil {
		return api.RecoverResponse{}, err
	}
	v := node.QuorumOf(nodes)
	switch {
	case len(v.Nodes) == 0:
		return api.RecoverResponse{}, fmt.Errorf("%w: node %s knows no voter of the job store: nothing to recover", errkind.Conflict, a.cfg.Name)
	case !v.Lost():
		lead := "no leader yet: an election is under way"
		if v.Leader != "" {
			lead = v.Leader + " leads"
		}
		return api.RecoverResponse{}, fmt.Errorf("%w: the cluster has a quorum (%s; %s): nothing to recover", errkind.Conflict, v, lead)
	}
	// This node's copy may be behind: a recovery done elsewhere reaches the
	// other live nodes only as the new leader adds them.
	if lead, asked, _ := a.peerLeader(ctx); lead != "" {
		return api.RecoverResponse{}, fmt.Errorf("%w: the cluster has a quorum: %s leads, as %s knows (this node's copy of the job store is behind): nothing to recover", errkind.Conflict, lead, asked)
	}
	a.awaitLeaderGone(ctx, v)
	a.log.Warn("recovering the job store: this node becomes its only voter", "lost", v.Down())
	if err := a.store.Recover(); errors.Is(err, jobstore.ErrHasLeader) {
		return api.RecoverResponse{}, fmt.Errorf("%w: %v", errkind.Conflict, err)
	} else if err != nil {
		return api.RecoverResponse{}, fmt.Errorf("%w: %v", errkind.Internal, err)
	}
	if a.store.AwaitLeader(ctx, 30*time.Second) != a.cfg.Name {
		return api.RecoverResponse{}, fmt.Errorf("%w: the job store was recovered but %s does not lead it yet (see the agent's log)", errkind.Internal, a.cfg.Name)
	}
	a.log.Info("job store recovered: this node leads it alone; live nodes join it as followers", "lost", v.Down())
	return api.RecoverResponse{Name: a.cfg.Name, Lost: v.Down()}, nil
}

// leaderGoneWait bounds how long RecoverQuorum waits for Raft to let go of a
// leader that is lost already: more than a heartbeat timeout and its lease.
const leaderGoneWait = 10 * time.Second

// awaitLeaderGone waits, up to leaderGoneWait, while this node's Raft still
// names a leader that v, the nodes' view, has lost (its agent refuses
// connections or membership holds it dead): Raft lets go of a leader it no
// longer hears from only after a heartbeat timeout, and a recovery asked in
// that moment would be refused as if the cluster had a quorum.
func (a *Agent) awaitLeaderGone(ctx context.Context, v node.Voters) {
	lost := func(name string) bool {
		for _, n := range v.Nodes {
			if n.Name == name {
				return n.State != "alive" && n.State != "suspect"
			}
		}
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, leaderGoneWait)
	defer cancel()
	for lead := a.store.Leader(); lead != "" && lead != a.cfg.Name && lost(lead); lead = a.store.Leader() {
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (n *localNode) RecoverQuorum(ctx context.Context) (api.RecoverResponse, error) {
	return (*Agent)(n).RecoverQuorum(ctx)
}

var _ api.QuorumRecoverer = (*localNode)(nil)

// forgetStaleStore, on a node that joins with a copy of the job store that
// makes it a voter, asks the live nodes who leads. When one names another
// node as leader and gives this node no vote in its job store (no part, or
// the follower's part a leader gives a node that has just joined, which it
// may have done already), the copy belongs to a configuration the cluster
// has left: its voters were recovered without this node (RecoverQuorum), or
// the leader removed it while it was gone. The copy is then set aside (jobstore.Store.Forget) and the node joins
// as a new one: with another voter that comes back so, it could otherwise
// make a majority of the old configuration and elect a leader of its own.
func (a *Agent) forgetStaleStore(ctx context.Context) {
	servers, err := a.store.Configuration()
	if err != nil || !slices.ContainsFunc(servers, func(s jobstore.Server) bool { return s.Name == a.cfg.Name && s.Voter }) {
		return
	}
	lead, asked, nodes := a.peerLeader(ctx)
	if lead == "" || slices.ContainsFunc(nodes, func(n node.Node) bool {
		return n.Name == a.cfg.Name && (n.Role == node.RoleVoter || n.Role == node.RoleLeader)
	}) {
		return // no leader known, or this node votes in its configuration: the copy is current
	}
	a.recoverMu.Lock()
	kept, err := a.store.Forget()
	a.recoverMu.Unlock()
	if err != nil {
		a.log.Error("setting aside a job store the cluster has left", "err", err)
		return
	}
	a.log.Warn("this node's job store belongs to a configuration the cluster has left (recovered without this node): set aside; joining as a new node", "kept", kept, "leader", lead, "asked", asked)
}

// peerLeader asks the other live nodes, one after the other, who leads the
// job store, and returns the first leader named that is another node and
// alive or suspect in the answering node's list, the node that named it, and
// that node's list; "" when none names one.
func (a *Agent) peerLeader(ctx context.Context) (lead, asked string, nodes []node.Node) {
	for _, m := range a.members.Nodes() {
		if m.Name == a.cfg.Name || !m.State.Member() || m.Meta.API == "" {
			continue
		}
		nodes, err := a.peers.Get(m.Meta.API).Nodes(ctx)
		if err != nil {
			continue
		}
		v := node.QuorumOf(nodes)
		if v.Leader == "" || v.Leader == a.cfg.Name {
			continue
		}
		for _, n := range v.Nodes {
			if n.Name == v.Leader && (n.State == "alive" || n.State == "suspect") {
				return v.Leader, m.Name, nodes
			}
		}
	}
	return "", "", nil
}
