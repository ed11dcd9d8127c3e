package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/job"
	"shoal/internal/node"
	"shoal/internal/pki"
	"shoal/test/poll"
	"shoal/test/watch"
)

var testSecret = []byte("0123456789abcdef0123456789abcdef")

type testNode struct{}

func (testNode) Name() string                                { return "n1" }
func (testNode) Nodes(context.Context) ([]node.Node, error)  { return nil, nil }
func (testNode) Voters(context.Context) ([]node.Node, error) { return nil, nil }
func (testNode) MembersAt(string) []node.Node                { return nil }
func (testNode) Leave(context.Context) error                 { return nil }

// testJobs is a JobService that only launches, through svc.
type testJobs struct {
	api.Unavailable
	svc *Service
}

func (j testJobs) Launch(ctx context.Context, req api.LaunchRequest) (func(io.ReadWriteCloser), error) {
	return j.svc.Launch(ctx, req)
}

// fakeDaemon is a script that runs its first argument with sh: the tests'
// stand-in for orted, allowed by the service (by its path) and found through
// PATH.
const fakeDaemon = "fake-orted"

// testService starts a launch service behind a real API server on loopback
// and returns it with a client of that server.
func testService(t *testing.T) (*Service, *api.Client) {
	t.Helper()
	bin := t.TempDir()
	script := "#!/bin/sh\neval \"$1\"\n"
	if err := os.WriteFile(filepath.Join(bin, fakeDaemon), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Node:         "n1",
		DataDir:      t.TempDir(),
		ExecDir:      bin,
		ExtraDaemons: []string{filepath.Join(bin, fakeDaemon)},
	}
	if testing.Verbose() {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	svc, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	id, err := pki.NewIdentity(testSecret, "n0")
	if err != nil {
		t.Fatal(err)
	}
	srv := api.NewServer(api.ServerConfig{Node: testNode{}, Secret: testSecret, TLS: id.ServerConfig()})
	srv.SetJobService(testJobs{svc: svc})
	srv.SetGrantService(svc)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return svc, api.NewClient(ln.Addr().String(), testSecret)
}

// daemon is the argv that makes the fake daemon run script.
func daemon(script string) []string {
	return []string{fakeDaemon, "'" + strings.ReplaceAll(script, "'", `'\''`) + "'"}
}

// alive reports whether pid is a process that has not ended (zombies have).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return syscall.Kill(pid, 0) == nil // no /proc: best effort
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// readPids waits until file holds n pids, one a line, and returns them.
func readPids(t *testing.T, file string, n int) []int {
	t.Helper()
	var pids []int
	poll.Until(t, 5*time.Second, func() string {
		b, _ := os.ReadFile(file)
		pids = pids[:0]
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil {
				pids = append(pids, p)
			}
		}
		if len(pids) < n {
			return fmt.Sprintf("%s holds %d pids, want %d", file, len(pids), n)
		}
		return ""
	})
	return pids
}

func allGone(pids []int) func() string {
	return func() string {
		for _, p := range pids {
			if alive(p) {
				return fmt.Sprintf("pid %d still running", p)
			}
		}
		return ""
	}
}

func TestLaunchRefusedWithoutGrant(t *testing.T) {
	svc, c := testService(t)
	ctx := context.Background()
	_, err := c.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: []string{"orted", "-mca", "ess", "env"}})
	if !errors.Is(err, errkind.NotFound) || !strings.Contains(err.Error(), "grant") {
		t.Errorf("launch without a grant: got %v, want ErrNotFound saying there is no grant", err)
	}
	// An expired grant is no grant.
	if _, err := svc.Grant("j1", "n0", 1, 30*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	if _, err := c.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: []string{"orted"}}); !errors.Is(err, errkind.NotFound) {
		t.Errorf("launch with an expired grant: got %v, want ErrNotFound", err)
	}
	// A revoked one neither.
	if _, err := c.Grant(ctx, api.GrantRequest{Job: "j2", Coordinator: "n0", Ranks: 1, TTL: job.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Revoke(ctx, "j2"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Launch(ctx, api.LaunchRequest{Job: "j2", Argv: []string{"orted"}}); !errors.Is(err, errkind.NotFound) {
		t.Errorf("launch after revoke: got %v, want ErrNotFound", err)
	}
}

func TestLaunchRefusesNonDaemon(t *testing.T) {
	_, c := testService(t)
	ctx := context.Background()
	if _, err := c.Grant(ctx, api.GrantRequest{Job: "j1", Coordinator: "n0", Ranks: 1, TTL: job.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{
		{"rm", "-rf", "/"},
		{"echo", "orted"},
		{"sh", "-c", "'orted'"},
		{"orted", ";", "id", ">", "file"}, // one word named orted was once enough
		{"orted;", "id"},
		{"PATH=.", "orted"},
		{"no-such-daemon"},
	} {
		_, err := c.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: argv})
		if !errors.Is(err, errkind.BadRequest) || !strings.Contains(err.Error(), argv[0]) || strings.Contains(err.Error(), "\n") {
			t.Errorf("launch %q: got %v, want a one-line ErrBadRequest naming %s", argv, err, argv[0])
		}
	}
}

// TestLaunchChecksDaemonByPath: a launch runs a daemon only if its program is
// the file of the node's MPI installation (or a stand-in the service was
// given), found as the launch runs it: a script named orted is refused whether
// it is found on the request's PATH or named by its path, and, when the agent
// is root, so is an allowed file that someone else could change.
func TestLaunchChecksDaemonByPath(t *testing.T) {
	orted, err := exec.LookPath("orted")
	if err != nil {
		t.Skip("Open MPI not installed (make deps installs it): orted not found")
	}
	mine := t.TempDir() // a user's directory, with a script named orted
	fake := filepath.Join(mine, "orted")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nid\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "orted") // a link to the real one is the real one
	if err := os.Symlink(orted, link); err != nil {
		t.Fatal(err)
	}
	shared := filepath.Join(t.TempDir(), "orted") // an allowed copy, made group-writable below
	if err := os.WriteFile(shared, []byte("#!/bin/sh\nid\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Node: "n1", DataDir: t.TempDir(), ExtraDaemons: []string{shared}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	if _, err := svc.Grant("j1", "n0", 1, time.Minute, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o775); err != nil {
		t.Fatal(err)
	}
	type check struct {
		argv []string
		env  map[string]string
		err  error  // nil: accepted
		has  string // in the error
	}
	checks := []check{
		{[]string{"orted", "-mca", "ess", "env"}, nil, nil, ""},
		{[]string{orted, "-mca", "ess", "env"}, nil, nil, ""},
		{[]string{link}, nil, nil, ""},
		{[]string{"orted"}, map[string]string{"PATH": mine}, ErrNotDaemon, fake},
		{[]string{fake}, nil, ErrNotDaemon, fake},
	}
	if os.Geteuid() == 0 {
		checks = append(checks, check{[]string{shared}, nil, ErrDaemonUnsafe, "writable by its group"})
	}
	for _, tt := range checks {
		run, err := svc.Launch(context.Background(), api.LaunchRequest{Job: "j1", Argv: tt.argv, Env: tt.env})
		switch {
		case tt.err == nil && (err != nil || run == nil):
			t.Errorf("launch %q (env %v): %v; want it accepted", tt.argv, tt.env, err)
		case tt.err != nil && (!errors.Is(err, errkind.BadRequest) || !errors.Is(err, tt.err) || !strings.Contains(err.Error(), tt.has) || strings.Contains(err.Error(), "\n")):
			t.Errorf("launch %q (env %v): %v; want a one-line refusal (%v) naming %q", tt.argv, tt.env, err, tt.err, tt.has)
		}
	}
}

func TestGrantValidation(t *testing.T) {
	_, c := testService(t)
	ctx := context.Background()
	g, err := c.Grant(ctx, api.GrantRequest{Job: "j1", Coordinator: "n0", Ranks: 1, TTL: job.Duration(0)})
	if err != nil || g.Job != "j1" || g.Coordinator != "n0" || time.Until(g.Expires) < 9*time.Minute {
		t.Errorf("grant with the default TTL = %+v, %v; want j1 from n0 expiring in 10m", g, err)
	}
	for _, tt := range []struct {
		job, coord string
		ttl        time.Duration
		want       string
	}{
		{"a/b", "n0", time.Minute, "job"},
		{"j1", "", time.Minute, "coordinator"},
		{"j1", "n0", -time.Second, "ttl"},
		{"j1", "n0", 25 * time.Hour, "ttl"},
	} {
		if _, err := c.Grant(ctx, api.GrantRequest{Job: tt.job, Coordinator: tt.coord, Ranks: 1, TTL: job.Duration(tt.ttl)}); !errors.Is(err, errkind.BadRequest) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("grant(%q, %q, %v): got %v, want ErrBadRequest naming %s", tt.job, tt.coord, tt.ttl, err, tt.want)
		}
	}
	if rv, err := c.Revoke(ctx, "never-granted"); err != nil || rv.Killed != 0 {
		t.Errorf("revoking a job never granted = %+v, %v; want 0 killed, no error", rv, err)
	}
}

// TestGrantWithinTheJob: a grant gives a node at most the job's ranks, as the
// node's replica of the job store has them; a job not there yet is taken on
// the coordinator's word.
func TestGrantWithinTheJob(t *testing.T) {
	jobs := map[string]int{"j1": 4}
	svc, err := New(Config{Node: "n1", DataDir: t.TempDir(), JobRanks: func(j string) (int, bool) { n, ok := jobs[j]; return n, ok }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	if _, err := svc.Grant("j1", "n2", 4, time.Minute, nil); err != nil {
		t.Errorf("a grant of all 4 ranks of a 4-rank job: %v", err)
	}
	if _, err := svc.Grant("j1", "n2", 5, time.Minute, nil); !errors.Is(err, errkind.BadRequest) || !strings.Contains(err.Error(), "ranks 5: job j1 has 4") {
		t.Errorf("a grant of 5 ranks of a 4-rank job: %v, want refused naming both", err)
	}
	if _, err := svc.Grant("new", "n2", 9, time.Minute, nil); err != nil {
		t.Errorf("a grant of a job the store has yet to replicate here: %v", err)
	}
}

// TestGrantNamesLiveCoordinator: a grant stands for a job of a coordinator that is
// in the cluster; any other name is refused, naming it.
func TestGrantNamesLiveCoordinator(t *testing.T) {
	live := map[string]bool{"n1": true, "n2": true}
	svc, err := New(Config{Node: "n1", DataDir: t.TempDir(), IsMember: func(n string) bool { return live[n] }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	if _, err := svc.Grant("j1", "n2", 2, time.Minute, nil); err != nil {
		t.Errorf("grant from live n2: %v", err)
	}
	_, err = svc.Grant("j2", "ghost", 2, time.Minute, nil)
	if !errors.Is(err, errkind.BadRequest) || !strings.Contains(err.Error(), `coordinator "ghost" is not a live member`) {
		t.Errorf("grant from ghost: %v, want ErrBadRequest naming ghost", err)
	}
	if n := svc.Ranks(); n != 2 {
		t.Errorf("ranks after a refused grant = %d, want 2", n)
	}
	if _, err := svc.Grant("j3", "n2", 0, time.Minute, nil); !errors.Is(err, errkind.BadRequest) || !strings.Contains(err.Error(), "ranks 0") {
		t.Errorf("grant of 0 ranks: %v, want ErrBadRequest naming ranks", err)
	}
}

func TestLaunchRelaysStdioAndExit(t *testing.T) {
	svc, c := testService(t)
	ctx := context.Background()
	if _, err := c.Grant(ctx, api.GrantRequest{Job: "j1", Coordinator: "n0", Ranks: 1, TTL: job.Duration(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	script := `echo "out $K"; echo "err $SHOAL_NODE_DATA" >&2; pwd; ` +
		`case "$SHOAL_LAUNCH" in ?*/j1/?*) echo marked;; esac; tr a-z A-Z; exit 3`
	conn, err := c.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: daemon(script), Env: map[string]string{"K": "V"}})
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr watch.Buffer
	big := strings.Repeat("stdin data ", 20000) // several frames
	exit, err := (&Relay{Stdin: strings.NewReader(big), Stdout: &stdout, Stderr: &stderr}).Run(conn)
	if err != nil {
		t.Fatal(err)
	}
	if exit != (Exit{Code: 3}) {
		t.Errorf("exit = %v, want exit code 3", exit)
	}
	want := "out V\n" + svc.cfg.DataDir + "\nmarked\n" + strings.ToUpper(big)
	if got := stdout.String(); got != want {
		t.Errorf("stdout = %.200q…, want %.200q…", got, want)
	}
	if got, want := stderr.String(), "err "+svc.cfg.DataDir+"\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
	if n := svc.Running("j1"); n != 0 {
		t.Errorf("running after exit = %d, want 0", n)
	}
}

func TestLaunchForwardsSignal(t *testing.T) {
	svc, c := testService(t)
	ctx := context.Background()
	svc.Grant("j1", "n0", 1, time.Minute, nil)
	conn, err := c.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: daemon(`echo started; exec sleep 300`)})
	if err != nil {
		t.Fatal(err)
	}
	var stdout watch.Buffer
	sigs := make(chan os.Signal, 1)
	done := make(chan Exit, 1)
	go func() {
		exit, err := (&Relay{Stdout: &stdout, Signals: sigs}).Run(conn)
		if err != nil {
			t.Error(err)
		}
		done <- exit
	}()
	poll.Until(t, 5*time.Second, func() string {
		if stdout.String() == "" {
			return "command did not start"
		}
		return ""
	})
	sigs <- syscall.SIGTERM
	select {
	case exit := <-done:
		if exit != (Exit{Signal: 15}) || exit.ExitCode() != 143 {
			t.Errorf("exit = %v, want signal 15", exit)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit 5 s after SIGTERM")
	}
}

// TestDroppedConnectionKillsEverything drops the client's connection and
// checks that the command, its process group, and a child that left the
// group (as MPI daemons' ranks do) are all gone.
func TestDroppedConnectionKillsEverything(t *testing.T) {
	for _, ignoreTerm := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignore SIGTERM %v", ignoreTerm), func(t *testing.T) {
			svc, c := testService(t)
			svc.Grant("j1", "n0", 1, time.Minute, nil)
			pidFile := filepath.Join(t.TempDir(), "pids")
			script := fmt.Sprintf(`echo $$ > %[1]s; setsid sleep 300 & echo $! >> %[1]s; sleep 300 & echo $! >> %[1]s; wait`, pidFile)
			if ignoreTerm { // the whole launch, daemon included
				script = "trap '' TERM; " + script
			}
			argv := daemon(script)
			conn, err := c.Launch(context.Background(), api.LaunchRequest{Job: "j1", Argv: argv})
			if err != nil {
				t.Fatal(err)
			}
			pids := readPids(t, pidFile, 3)
			if n := svc.Running("j1"); n != 1 {
				t.Errorf("running = %d, want 1", n)
			}
			start := time.Now()
			conn.Close()
			poll.Until(t, 5*time.Second, allGone(pids))
			if took := time.Since(start); ignoreTerm && took < DefaultKillGrace {
				t.Errorf("a command ignoring SIGTERM died after %v, before the %v grace", took, DefaultKillGrace)
			}
			poll.Until(t, 5*time.Second, func() string {
				if n := svc.Running("j1"); n != 0 {
					return fmt.Sprintf("running = %d, want 0", n)
				}
				return ""
			})
		})
	}
}

func TestRevokeKillsRunning(t *testing.T) {
	svc, c := testService(t)
	ctx := context.Background()
	svc.Grant("j1", "n0", 1, time.Minute, nil)
	svc.Grant("j2", "n0", 1, time.Minute, nil)
	pidFile := filepath.Join(t.TempDir(), "pids")
	script := fmt.Sprintf(`setsid sleep 300 & echo $! >> %[1]s; sleep 300 & echo $! >> %[1]s; wait`, pidFile)
	var exits sync.WaitGroup
	var results [2]Exit
	for i := range 2 {
		conn, err := c.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: daemon(script)})
		if err != nil {
			t.Fatal(err)
		}
		exits.Add(1)
		go func() {
			defer exits.Done()
			results[i], _ = (&Relay{}).Run(conn)
		}()
	}
	other, err := c.Launch(ctx, api.LaunchRequest{Job: "j2", Argv: daemon(`exec sleep 300`)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	pids := readPids(t, pidFile, 4)
	poll.Until(t, 5*time.Second, func() string {
		if n := svc.Running("j1"); n != 2 {
			return fmt.Sprintf("running = %d, want 2", n)
		}
		return ""
	})
	rv, err := c.Revoke(ctx, "j1")
	if err != nil || rv.Killed != 2 {
		t.Errorf("revoke = %+v, %v; want 2 killed", rv, err)
	}
	if n := svc.Running("j1"); n != 0 {
		t.Errorf("running after revoke = %d, want 0", n)
	}
	poll.Until(t, 5*time.Second, allGone(pids))
	exits.Wait()
	for i, e := range results {
		if e != (Exit{Signal: 9}) {
			t.Errorf("launch %d ended with %v, want signal 9", i, e)
		}
	}
	if n := svc.Running("j2"); n != 1 {
		t.Errorf("another job's launch: running = %d, want 1", n)
	}
	if jobs := svc.RevokeCoordinator("n0"); len(jobs) != 1 || jobs[0] != "j2" || svc.Running("j2") != 0 {
		t.Errorf("revoke coordinator n0 = %v (j2 running %d), want [j2] and 0", jobs, svc.Running("j2"))
	}
}

// TestRevokeScansOnlyWhatMayRun: a revoke reads the machine's processes only
// when a launch of the job may have left something: one still registered, or
// one whose clean-up gave up. Coordinators revoke every node before each
// launch; a scan per node made launch cost grow with the processes on a node.
func TestRevokeScansOnlyWhatMayRun(t *testing.T) {
	var mu sync.Mutex
	scans := 0
	scanMarked = func(match func(string) bool) []int {
		mu.Lock()
		scans++
		mu.Unlock()
		return marked(match)
	}
	t.Cleanup(func() { scanMarked = marked })
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := scans
		scans = 0
		return n
	}
	svc, c := testService(t)
	ctx := context.Background()
	revoke := func(what string, wantScan bool) {
		t.Helper()
		count()
		if _, err := svc.Revoke("j1"); err != nil {
			t.Fatal(err)
		}
		if n := count(); (n > 0) != wantScan {
			t.Errorf("revoke %s: %d scans, want scanning %v", what, n, wantScan)
		}
	}

	svc.Grant("j1", "n0", 1, time.Minute, nil)
	revoke("of a job never launched here", false)

	svc.Grant("j1", "n0", 1, time.Minute, nil)
	conn, err := c.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: daemon("true")})
	if err != nil {
		t.Fatal(err)
	}
	if exit, err := (&Relay{}).Run(conn); err != nil || exit != (Exit{}) {
		t.Fatalf("launch ended with %v, %v; want exit code 0", exit, err)
	}
	poll.Until(t, 5*time.Second, func() string { // its scan for what it left has ended
		svc.mu.Lock()
		defer svc.mu.Unlock()
		if n := len(svc.procs); n != 0 {
			return fmt.Sprintf("%d launches registered, want 0", n)
		}
		return ""
	})
	revoke("after its launch ended and cleaned up", false)

	svc.Grant("j1", "n0", 1, time.Minute, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	conn, err = c.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: daemon(fmt.Sprintf(`setsid sleep 300 & echo $! > %s; wait`, pidFile))})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	pids := readPids(t, pidFile, 1)
	revoke("while it runs", true)
	poll.Until(t, 5*time.Second, allGone(pids))

	svc.mu.Lock()
	svc.stray["j1"] = true // as when a launch's clean-up gives up
	svc.mu.Unlock()
	revoke("after a clean-up gave up", true)
	revoke("once a scan found nothing", false)
}

// TestKillStale: a new service on the same data dir kills what an earlier
// one (an agent that died) left behind, and nothing of another data dir.
func TestKillStale(t *testing.T) {
	old, c := testService(t)
	other, c2 := testService(t)
	old.Grant("j1", "n0", 1, time.Minute, nil)
	other.Grant("j1", "n0", 1, time.Minute, nil)
	dir := t.TempDir()
	for i, cl := range []*api.Client{c, c2} {
		conn, err := cl.Launch(context.Background(), api.LaunchRequest{Job: "j1",
			Argv: daemon(fmt.Sprintf(`setsid sleep 300 & echo $! > %s/%d; wait`, dir, i))})
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
	}
	stale := readPids(t, filepath.Join(dir, "0"), 1)
	kept := readPids(t, filepath.Join(dir, "1"), 1)
	fresh, err := New(Config{DataDir: old.cfg.DataDir})
	if err != nil {
		t.Fatal(err)
	}
	if n := fresh.KillStale(); n < 1 {
		t.Errorf("KillStale killed %d processes, want at least 1", n)
	}
	poll.Until(t, 5*time.Second, allGone(stale))
	if !alive(kept[0]) {
		t.Errorf("KillStale killed pid %d of another data dir", kept[0])
	}
}

func TestCannotStartReportsOnStderr(t *testing.T) {
	svc, c := testService(t)
	svc.Grant("j1", "n0", 1, time.Minute, nil)
	// The data dir is gone: the command cannot start in it.
	os.RemoveAll(svc.cfg.DataDir)
	conn, err := c.Launch(context.Background(), api.LaunchRequest{Job: "j1", Argv: daemon("true")})
	if err != nil {
		t.Fatal(err)
	}
	var stderr watch.Buffer
	exit, err := (&Relay{Stderr: &stderr}).Run(conn)
	if err != nil {
		t.Fatal(err)
	}
	if exit.Code != ExitCannotStart || !strings.Contains(stderr.String(), "cannot start") {
		t.Errorf("exit %v, stderr %q; want code 255 and a reason", exit, stderr.String())
	}
}

// TestRanksFollowGrants: the node's ranks are the sum over its grants, from the
// grant to its revocation, and every change is reported.
func TestRanksFollowGrants(t *testing.T) {
	var mu sync.Mutex
	var reported []int
	var svc *Service
	svc, err := New(Config{Node: "n1", DataDir: t.TempDir(), OnRanks: func() {
		mu.Lock()
		reported = append(reported, svc.Ranks())
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		what string
		do   func()
		want int
	}{
		{"grant j1 2 ranks", func() { svc.Grant("j1", "n0", 2, time.Minute, nil) }, 2},
		{"grant j2 3 ranks", func() { svc.Grant("j2", "n9", 3, time.Minute, nil) }, 5},
		{"grant j1 again, 1 rank (a relaunch)", func() { svc.Grant("j1", "n0", 1, time.Minute, nil) }, 4},
		{"revoke j1", func() { svc.Revoke("j1") }, 3},
		{"revoke j1 again", func() { svc.Revoke("j1") }, 3},
		{"n9 gone", func() { svc.RevokeCoordinator("n9") }, 0},
		{"grant j3 4 ranks", func() { svc.Grant("j3", "n0", 4, time.Minute, nil) }, 4},
		{"close", svc.Close, 0},
	}
	for _, s := range steps {
		s.do()
		if got := svc.Ranks(); got != s.want {
			t.Errorf("after %s: Ranks() = %d, want %d", s.what, got, s.want)
		}
	}
	want := []int{2, 5, 4, 3, 0, 4, 0} // revoking a job with no grant changes nothing
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(reported) != fmt.Sprint(want) {
		t.Errorf("OnRanks reported %v, want %v", reported, want)
	}
}

// TestLaunchEndKillsWhatItLeft: a command that exits and leaves a process
// behind in a session of its own (out of its group, found by the marker) has
// its exit sent and that process killed, whether or not the process still
// holds the launch's output.
func TestLaunchEndKillsWhatItLeft(t *testing.T) {
	for _, c := range []struct{ name, redirect string }{
		{"holding the output", ""},
		{"output elsewhere", " >/dev/null 2>&1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			svc, cl := testService(t)
			ctx := context.Background()
			svc.Grant("j1", "n0", 1, time.Minute, nil)
			pidFile := filepath.Join(t.TempDir(), "pid")
			script := fmt.Sprintf(`setsid sleep 300%s & echo $! > %s; exit 4`, c.redirect, pidFile)
			conn, err := cl.Launch(ctx, api.LaunchRequest{Job: "j1", Argv: daemon(script)})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			exit, err := (&Relay{}).Run(conn)
			if err != nil || exit != (Exit{Code: 4}) {
				t.Fatalf("launch ended with %v, %v; want exit code 4", exit, err)
			}
			if took := time.Since(start); took > time.Second {
				t.Errorf("the exit took %v to arrive: it waited on the process left behind", took)
			}
			pids := readPids(t, pidFile, 1)
			poll.Until(t, 5*time.Second, allGone(pids))
			if n := svc.Running("j1"); n != 0 {
				t.Errorf("running after exit = %d, want 0", n)
			}
		})
	}
}
