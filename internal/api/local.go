package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"shoal/internal/job"
	"shoal/internal/node"
)

// Caller is who sent a request on an agent's local socket: the calling
// process's user, as the kernel reports it (SO_PEERCRED), which no caller can
// forge. Requests from the network carry no Caller: they are signed with the
// cluster secret instead.
type Caller struct {
	UID, GID, PID int
	Name          string // login name; "" when the node has none for UID
}

type callerKey struct{}

// WithCaller returns ctx carrying c as the local caller of a request: what the
// server does for each connection to its socket, and what tests of a service
// do to call it as a user.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the local caller of the request whose context is ctx, or
// nil for a request from the network.
func CallerOf(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// Privileged reports whether the caller may act for the cluster, as a holder of
// the secret does: root, or the user the agent runs as.
func (c *Caller) Privileged() bool { return c.UID == 0 || c.UID == os.Getuid() }

// JobOwner is the owner of a job the caller submits whose body names asked. A
// privileged caller may name any user, as a holder of the secret may (nil: the
// agents' user; [JobSpec.Validate] refuses root); any other caller's job is
// theirs, and naming another user is refused with [ErrForbidden].
func (c *Caller) JobOwner(asked *job.Owner) (*job.Owner, error) {
	if c.Privileged() {
		return asked, nil
	}
	if asked != nil && asked.UID != c.UID {
		return nil, fmt.Errorf("%w: %s may submit jobs as themself only, not as %s: only root runs a job as another user (shoal run --user)", ErrForbidden, c, asked)
	}
	return &job.Owner{UID: c.UID, GID: c.GID, Name: c.Name}, nil
}

// agentUser is the user this process runs as, with its login name when the node
// has one.
var agentUser = sync.OnceValue(func() *job.Owner {
	o := &job.Owner{UID: os.Getuid(), GID: os.Getgid()}
	if u, err := user.LookupId(strconv.Itoa(o.UID)); err == nil {
		o.Name = u.Username
	}
	return o
})

// Owns reports whether the caller may see and control job: its own, or any for
// a privileged caller.
func (c *Caller) Owns(job job.Job) bool {
	return c.Privileged() || job.Spec.Owner != nil && job.Spec.Owner.UID == c.UID
}

func (c *Caller) String() string {
	if c.Name != "" {
		return fmt.Sprintf("%s (uid %d)", c.Name, c.UID)
	}
	return fmt.Sprintf("uid %d", c.UID)
}

// peerCaller reads the credentials of the process at the other end of a unix
// socket connection.
func peerCaller(conn net.Conn) (*Caller, error) {
	cred, err := peerCred(conn)
	if err != nil {
		return nil, err
	}
	c := &Caller{UID: int(cred.Uid), GID: int(cred.Gid), PID: int(cred.Pid)}
	if u, err := user.LookupId(strconv.Itoa(c.UID)); err == nil {
		c.Name = u.Username
	}
	return c, nil
}

// peerCred reads the credentials the process at the other end of a unix
// socket connection had when it connected (SO_PEERCRED).
func peerCred(conn net.Conn) (*unix.Ucred, error) {
	if pc, ok := conn.(*peerConn); ok {
		conn = pc.Conn
	}
	uc, ok := conn.(*net.UnixConn)
	if !ok {
		return nil, errors.New("not a unix socket")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, cerr
}

// ServeLocal answers requests on l, a unix socket that local users reach
// (the agent's DATA/agent.sock), until [Server.Shutdown]. A request there is
// not signed: the kernel says who sent it. Root and the agent's user may do
// anything a holder of the secret may; any other user may submit jobs, which
// then run as that user, and see, follow and cancel only their own (see
// docs/api.md#local-socket). Each user but root and the agent's own holds
// at most [ServerConfig.MaxConnsPerUser] connections open on l.
func (s *Server) ServeLocal(l net.Listener) error {
	l = limitPeers(l, byUser(s.cfg.MaxConnsPerUser), s.log)
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext: func(ctx context.Context, conn net.Conn) context.Context {
			c, err := peerCaller(conn)
			if err != nil {
				// No credentials, no rights: UID -1 is nobody's.
				s.log.Warn("local connection without credentials", "err", err)
				c = &Caller{UID: -1, GID: -1}
			}
			return WithCaller(ctx, c)
		},
	}
	s.localMu.Lock()
	s.local = append(s.local, srv)
	s.localMu.Unlock()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// serveLocal authorises and routes a request from the local socket.
func (s *Server) serveLocal(w http.ResponseWriter, r *http.Request, c *Caller, rt route, known bool) {
	if !known {
		s.noRoute(w, r)
		return
	}
	if rt.public {
		r = r.WithContext(context.WithValue(r.Context(), authenticatedKey{}, c.UID >= 0))
		s.mux.ServeHTTP(w, r)
		return
	}
	if c.UID < 0 {
		s.fail(w, r, fmt.Errorf("%w: the agent could not tell who is calling (no credentials on the socket)", ErrForbidden))
		return
	}
	if !c.Privileged() && !rt.user {
		s.log.Warn("refused a local request", "caller", c.String(), "method", r.Method, "path", r.URL.Path)
		s.fail(w, r, fmt.Errorf("%w: %s %s is for root; %s may submit jobs and see, follow and cancel their own", ErrForbidden, r.Method, r.URL.Path, c))
		return
	}
	if !rt.stream {
		if err := s.bufferBody(r, ""); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	s.mux.ServeHTTP(w, r)
}

// ownedJob returns job id if the request may see it: always from the network,
// and from the local socket when the caller owns it. A job the caller does not
// own is not found, in the very words of a job that does not exist
// ([NoSuchJob]), whatever the service said of the latter.
func (s *Server) ownedJob(r *http.Request, id string) (job.Job, error) {
	j, err := s.jobService().Job(r.Context(), id)
	if errors.Is(err, ErrNotFound) {
		return job.Job{}, job.NotFound(id)
	}
	if err != nil {
		return job.Job{}, err
	}
	if c := CallerOf(r.Context()); c != nil && !c.Owns(j) {
		return job.Job{}, job.NotFound(id)
	}
	return j, nil
}

// relayTarget returns nil if to is the API address of a live member of the
// cluster (alive or suspect) among nodes: the only addresses the local agent
// passes a launch on to, so that a local user cannot make it dial anything
// else.
func relayTarget(nodes []node.Node, to string) error {
	for _, n := range nodes {
		if n.API == to && (n.State == "alive" || n.State == "suspect") {
			return nil
		}
	}
	return fmt.Errorf("%w: to %q: not the API address of a live node of the cluster", ErrBadRequest, to)
}

// relay serves a launch a local caller asked for on another agent (req.To):
// once the caller's connection is switched, it carries the launch protocol
// between the two unchanged, until either end closes.
func relay(local, remote io.ReadWriteCloser) {
	var once sync.Once
	closeBoth := func() {
		once.Do(func() {
			local.Close()
			remote.Close()
		})
	}
	go func() {
		io.Copy(remote, local)
		closeBoth()
	}()
	io.Copy(local, remote)
	closeBoth()
}
