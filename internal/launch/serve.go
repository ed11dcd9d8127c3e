package launch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"shoal/internal/api"
	"shoal/internal/job"
)

// proc is one launched command: a shell in its own process group.
type proc struct {
	job    string
	marker string
	cmd    *exec.Cmd
	grace  time.Duration

	exitedCh chan struct{} // closed once the shell has been reaped
	ended    chan struct{} // closed once everything it started is gone too

	mu     sync.Mutex
	exited bool
	lost   bool
}

// hasExited reports whether the launched command has been reaped (what it
// left behind may still be looked for).
func (p *proc) hasExited() bool {
	select {
	case <-p.exitedCh:
		return true
	default:
		return false
	}
}

// signalGroup sends sig to the command's process group while its leader has
// not been reaped (after that the group id could name someone else's group).
func (p *proc) signalGroup(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.exited {
		syscall.Kill(-p.cmd.Process.Pid, sig)
	}
}

// connLost ends the command after its connection was lost: SIGTERM to the
// group, SIGKILL after the grace period. Once the shell is reaped, serve
// kills whatever it left, so waiting for that is enough.
func (p *proc) connLost() {
	p.mu.Lock()
	if p.exited || p.lost {
		p.mu.Unlock()
		return
	}
	p.lost = true
	p.mu.Unlock()
	p.signalGroup(syscall.SIGTERM)
	go func() {
		select {
		case <-p.exitedCh:
		case <-time.After(p.grace):
			p.signalGroup(syscall.SIGKILL)
		}
	}()
}

// start starts a command for req, registered so that Revoke and Close find
// it. It re-checks the grant under the lock, so that a Revoke either sees the
// process or the launch sees the grant gone.
func (s *Service) start(req api.LaunchRequest, argv []string, program string, stdin, stdout, stderr *os.File) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	g, ok := s.grants[req.Job]
	if !ok {
		return nil, fmt.Errorf("the grant of job %s was revoked", req.Job)
	}
	s.seq++
	p := &proc{
		job:      req.Job,
		marker:   s.owner + "/" + req.Job + "/" + strconv.FormatUint(s.seq, 10),
		grace:    s.cfg.KillGrace,
		exitedCh: make(chan struct{}),
		ended:    make(chan struct{}),
	}
	// No shell: the daemon is executed itself, the file Launch checked.
	p.cmd = &exec.Cmd{Path: program, Args: argv}
	p.cmd.Dir = s.cfg.DataDir
	p.cmd.Env = s.env(req.Env, p.marker)
	p.cmd.Stdin, p.cmd.Stdout, p.cmd.Stderr = stdin, stdout, stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if o := g.owner; o != nil {
		// The daemon, and so every rank it starts, runs as the job's owner,
		// with no supplementary groups of the agent's.
		p.cmd.SysProcAttr.Credential = Credential(o)
		p.cmd.Env = append(p.cmd.Env, UserEnv(o)...)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	s.procs[p] = true
	return p, nil
}

// serve runs one launch on conn: it starts the command, relays stdio and
// signals, and ends with the exit frame.
func (s *Service) serve(req api.LaunchRequest, argv []string, program string, conn io.ReadWriteCloser) {
	defer conn.Close()
	fw := &frameWriter{w: conn}
	pipes, err := newPipes()
	if err != nil {
		s.cannotStart(fw, err)
		return
	}
	p, err := s.start(req, argv, program, pipes.inR, pipes.outW, pipes.errW)
	pipes.closeChildEnds()
	if err != nil {
		pipes.closeAll()
		s.cannotStart(fw, err)
		return
	}
	log := s.log.With("job", p.job, "pid", p.cmd.Process.Pid)
	log.Info("launched", "command", cut(strings.Join(argv, " "), 200))

	var copies sync.WaitGroup
	for _, o := range []struct {
		r *os.File
		t FrameType
	}{{pipes.outR, FrameStdout}, {pipes.errR, FrameStderr}} {
		copies.Add(1)
		go func() {
			defer copies.Done()
			buf := make([]byte, chunk)
			for {
				n, err := o.r.Read(buf)
				if n > 0 && fw.write(o.t, buf[:n]) != nil {
					p.connLost() // keep draining so the command never blocks on a full pipe
				}
				if err != nil {
					return
				}
			}
		}()
	}
	clientDone := make(chan struct{})
	go func() {
		p.readClient(conn, pipes.inW, log)
		close(clientDone)
	}()

	p.cmd.Wait() // the exit status is in ProcessState
	p.mu.Lock()
	p.exited = true
	lost := p.lost
	p.mu.Unlock()
	close(p.exitedCh)
	// What the command left behind (a rank its daemon did not reap, a
	// background job) dies with it: a launch lives exactly as long as its
	// command. The group id stays reserved while the group has members, so
	// this reaches only ours. The scan for the rest reads every process of the
	// machine; the exit is sent without waiting for it (the launcher, mpirun,
	// waits for every daemon's), but the launch stays registered until it ends,
	// so that a revoke in the meantime scans as well.
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	scanned := make(chan bool, 1)
	scan := sync.OnceFunc(func() {
		go func() {
			_, clean := killMarked(exactly(p.marker))
			scanned <- clean
		}()
	})
	copiesDone := make(chan struct{})
	go func() { copies.Wait(); close(copiesDone) }()
	// The scan starts once the output has ended, after the exit is sent: on
	// a host of one CPU the agent runs one goroutine at a time, and a scan
	// started at once ran before the output's last reads and the exit. Only
	// output still held after outputHeld starts it first: a leftover in a
	// session of its own may hold it, and the scan kills that.
	select {
	case <-copiesDone:
	case <-time.After(outputHeld):
		scan()
		select {
		case <-copiesDone:
		case <-time.After(2 * time.Second): // someone without the marker holds the pipes
			pipes.outR.Close()
			pipes.errR.Close()
			<-copiesDone
		}
	}
	pipes.closeAll()
	exit := exitOf(p.cmd.ProcessState)
	log.Info("launch ended", "exit", exit, "connection_lost", lost)
	sent := !lost && fw.write(FrameExit, exit.encode()) == nil
	scan() // unless the held output started it
	clean := <-scanned
	s.mu.Lock()
	delete(s.procs, p)
	if !clean {
		s.stray[p.job] = true // in the same step, so that Revoke sees one or the other
	}
	s.mu.Unlock()
	close(p.ended)
	if sent {
		lingerClose(conn, clientDone)
	}
}

// outputHeld is how long a launch's output may stay open after its command
// exited before the scan for what it left behind starts (see serve).
const outputHeld = 50 * time.Millisecond

// lingerTime bounds how long a launch waits, after its last frame, for the
// client to close the connection.
const lingerTime = 2 * time.Second

// lingerClose ends the sending half of conn and waits for the client to close
// its own (it does once it has read the exit frame) before the deferred Close:
// closed while the client's frames are still arriving (its stdin-close, sent
// as it starts, may come after a short command's end), the connection would be
// reset, and a reset makes the client's kernel drop the exit frame unread.
func lingerClose(conn io.ReadWriteCloser, clientDone <-chan struct{}) {
	cw, ok := conn.(interface{ CloseWrite() error })
	if !ok || cw.CloseWrite() != nil {
		return
	}
	select {
	case <-clientDone:
	case <-time.After(lingerTime):
	}
}

// cannotStart reports a command that could not be started.
func (s *Service) cannotStart(fw *frameWriter, err error) {
	s.log.Warn("launch failed to start", "err", err)
	fmt.Fprintf(frameStream{fw, FrameStderr}, "shoal: node %s cannot start the command: %v\n", s.cfg.Node, err)
	fw.write(FrameExit, Exit{Code: ExitCannotStart}.encode())
}

// readClient reads the client's frames until the connection fails: stdin
// goes to the command, signals to its process group. A failed read means the
// client is gone: the command is ended.
func (p *proc) readClient(conn io.Reader, stdin *os.File, log *slog.Logger) {
	data := make(chan []byte, 16)
	var closeStdin sync.Once
	endStdin := func() { closeStdin.Do(func() { close(data) }) }
	go func() { // writes may block on a command that does not read
		failed := false
		for b := range data {
			if !failed {
				_, err := stdin.Write(b)
				failed = err != nil
			}
		}
		stdin.Close()
	}()
	defer endStdin()
	stdinOpen := true
	for {
		f, err := ReadFrame(conn)
		if err != nil {
			p.mu.Lock()
			finished := p.exited
			p.mu.Unlock()
			if !finished {
				if !errors.Is(err, io.EOF) {
					log.Warn("launch connection failed: ending the command", "err", err)
				} else {
					log.Warn("launch connection closed by the client: ending the command")
				}
				p.connLost()
			}
			return
		}
		switch f.Type {
		case FrameStdin:
			if stdinOpen && len(f.Payload) > 0 {
				select {
				case data <- f.Payload:
				case <-p.ended:
				}
			}
		case FrameStdinClose:
			stdinOpen = false
			endStdin()
		case FrameSignal:
			sig := binary.BigEndian.Uint32(f.Payload)
			if sig >= 1 && sig <= 64 {
				p.signalGroup(syscall.Signal(sig))
			}
		default:
			log.Warn("launch client sent an agent-to-client frame: ending the command", "frame", f.Type)
			p.connLost()
			return
		}
	}
}

// exitOf turns a reaped command's state into an Exit.
func exitOf(ps *os.ProcessState) Exit {
	if ps == nil {
		return Exit{Code: ExitCannotStart}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return Exit{Signal: int(ws.Signal())}
	}
	return Exit{Code: ps.ExitCode()}
}

// pipes are the command's stdio pipes.
type pipes struct {
	inR, inW, outR, outW, errR, errW *os.File
}

func newPipes() (*pipes, error) {
	var p pipes
	var err error
	if p.inR, p.inW, err = os.Pipe(); err != nil {
		return nil, err
	}
	if p.outR, p.outW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, err
	}
	if p.errR, p.errW, err = os.Pipe(); err != nil {
		p.closeAll()
		return nil, err
	}
	return &p, nil
}

// closeChildEnds closes this process's copies of the ends the command uses.
func (p *pipes) closeChildEnds() {
	for _, f := range []*os.File{p.inR, p.outW, p.errW} {
		if f != nil {
			f.Close()
		}
	}
}

func (p *pipes) closeAll() {
	for _, f := range []*os.File{p.inR, p.inW, p.outR, p.outW, p.errR, p.errW} {
		if f != nil {
			f.Close()
		}
	}
}

// UserEnv is the environment that names owner to a process run as that user:
// HOME, USER and LOGNAME from the node's user database (HOME "/" when it has
// none for the uid), so that MPI and the program find the user's files, not
// the agent's.
func UserEnv(owner *job.Owner) []string {
	home, name := "/", owner.Name
	if u, err := user.LookupId(strconv.Itoa(owner.UID)); err == nil {
		home, name = u.HomeDir, u.Username
	}
	if name == "" {
		name = strconv.Itoa(owner.UID)
	}
	return []string{"HOME=" + home, "USER=" + name, "LOGNAME=" + name}
}

// Credential is what a process runs as to run as owner: its uid and gid, and no
// supplementary groups (none of the agent's).
func Credential(owner *job.Owner) *syscall.Credential {
	return &syscall.Credential{Uid: uint32(owner.UID), Gid: uint32(owner.GID), Groups: []uint32{}}
}
