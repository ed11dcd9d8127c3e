package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/errkind"
	"shoal/internal/membership"
	"shoal/test/poll"
)

// testConfig is an agent on loopback with fast failure detection.
func testConfig(t *testing.T, name string) Config {
	t.Helper()
	c := Config{
		DataDir:     t.TempDir(),
		Name:        name,
		Bind:        "127.0.0.1:0",
		Gossip:      membership.DefaultLocalConfig(),
		SpeedSample: 10 * time.Millisecond,
		Version:     "test",
	}
	if testing.Verbose() {
		c.Log = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("agent", name)
	}
	return c
}

func startAgent(t *testing.T, c Config) *Agent {
	t.Helper()
	a, err := Start(c)
	if err != nil {
		t.Fatalf("start %s: %v", c.Name, err)
	}
	t.Cleanup(a.Shutdown)
	return a
}

// startCluster starts n agents n1…nn; n1 creates the secret, the others join it.
func startCluster(t *testing.T, n int) []*Agent {
	t.Helper()
	return startClusterWith(t, n, func(*Config) {})
}

// startClusterWith is startCluster with each agent's config changed by set.
func startClusterWith(t *testing.T, n int, set func(*Config)) []*Agent {
	t.Helper()
	c := testConfig(t, "n1")
	c.Init = true
	set(&c)
	first := startAgent(t, c)
	secretFile := filepath.Join(first.DataDir(), SecretFile)
	agents := []*Agent{first}
	for i := 2; i <= n; i++ {
		c := testConfig(t, fmt.Sprintf("n%d", i))
		c.Join = []string{first.GossipAddr()}
		c.SecretFile = secretFile
		set(&c)
		agents = append(agents, startAgent(t, c))
	}
	return agents
}

// apiStates asks a's API for the cluster and returns "name=state …".
func apiStates(a *Agent) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	nodes, err := api.NewClient(a.LocalAPIAddr(), a.Secret()).Nodes(ctx)
	if err != nil {
		return "", err
	}
	var s []string
	for _, n := range nodes {
		s = append(s, n.Name+"="+n.State)
	}
	sort.Strings(s)
	return strings.Join(s, " "), nil
}

func wantStates(agents []*Agent, want string) func() string {
	return func() string {
		for _, a := range agents {
			got, err := apiStates(a)
			if err != nil {
				return fmt.Sprintf("%s: %v", a.Name(), err)
			}
			if got != want {
				return fmt.Sprintf("%s sees %q, want %q", a.Name(), got, want)
			}
		}
		return ""
	}
}

func TestThreeAgentsFormCluster(t *testing.T) {
	agents := startCluster(t, 3)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive n3=alive"))
	nodes, err := api.NewClient(agents[1].LocalAPIAddr(), agents[1].Secret()).Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.API == "" || n.Cores < 1 || n.Speed == 0 || n.Arch == "" || n.OS == "" {
			t.Errorf("node %+v: want API address, cores, speed, arch and OS", n)
		}
		if n.Local != (n.Name == "n2") {
			t.Errorf("node %s: local = %v as seen by n2", n.Name, n.Local)
		}
	}
	// Each node's announced API address answers, signed with the shared secret.
	for _, n := range nodes {
		h, err := api.NewClient(n.API, agents[0].Secret()).Health(context.Background())
		if err != nil || h.Name != n.Name {
			t.Errorf("health of %s at %s = %+v, %v", n.Name, n.API, h, err)
		}
	}
}

// TestFirstAnnouncementComplete: an agent's first announcement already holds
// the addresses of its API and job store, so that it changes its metadata
// only when it has something new to say. A change made while the node is alone
// can silence its later announcements (membership.AdvertiseIP says why).
func TestFirstAnnouncementComplete(t *testing.T) {
	agents := startCluster(t, 2)
	for _, a := range agents {
		meta := a.Membership().Meta()
		if meta.API != a.APIAddr() || meta.Raft != a.Store().Addr() {
			t.Errorf("%s announces API %s, job store %s; want %s, %s", a.Name(), meta.API, meta.Raft, a.APIAddr(), a.Store().Addr())
		}
		if n := a.Membership().MetaChanges(); n != 0 {
			t.Errorf("%s changed its metadata %d times while starting, want 0", a.Name(), n)
		}
	}
}

func TestGracefulLeaveShowsLeft(t *testing.T) {
	agents := startCluster(t, 3)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive n3=alive"))
	var hookRan bool
	agents[2].SetBeforeLeave(func(ctx context.Context) error { hookRan = true; return nil })
	resp, err := api.NewClient(agents[2].LocalAPIAddr(), agents[2].Secret()).Leave(context.Background(), 0)
	if err != nil || resp.State != "left" || resp.Name != "n3" {
		t.Fatalf("leave = %+v, %v", resp, err)
	}
	select {
	case <-agents[2].Done():
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not stop after leaving")
	}
	if !hookRan {
		t.Errorf("BeforeLeave did not run")
	}
	if _, err := os.Stat(filepath.Join(agents[2].DataDir(), AddrFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s still exists after the agent stopped: %v", AddrFile, err)
	}
	poll.Until(t, 5*time.Second, wantStates(agents[:2], "n1=alive n2=alive n3=left"))
	// And it stays left: the failure detector does not turn it into dead.
	poll.Holds(t, 2*time.Second, wantStates(agents[:2], "n1=alive n2=alive n3=left"))
}

func TestStoppedAgentShowsDead(t *testing.T) {
	agents := startCluster(t, 3)
	poll.Until(t, 5*time.Second, wantStates(agents, "n1=alive n2=alive n3=alive"))
	agents[2].Shutdown() // no leave, as if the process were killed
	_, max := agents[0].Membership().Config().SuspicionTimeout(3)
	// Worst case: probed last in a round, then the longest suspicion.
	poll.Until(t, 4*agents[0].Membership().Config().ProbeInterval+max+2*time.Second,
		wantStates(agents[:2], "n1=alive n2=alive n3=dead"))
}

func TestWrongSecretRefused(t *testing.T) {
	agents := startCluster(t, 1)
	c := testConfig(t, "intruder")
	c.Init = true // a secret of its own
	c.Join = []string{agents[0].GossipAddr()}
	_, err := Start(c)
	if !errors.Is(err, membership.ErrJoinRefused) {
		t.Fatalf("join with another secret: error = %v, want ErrJoinRefused", err)
	}
	if want := "join refused by " + agents[0].GossipAddr() + ": wrong cluster secret?"; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
	// The failed start released the data dir and the ports.
	if _, err := os.Stat(filepath.Join(c.DataDir, AddrFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("failed start left %s behind", AddrFile)
	}
	if l, err := lockDir(c.DataDir); err != nil {
		t.Errorf("data dir still locked after a failed start: %v", err)
	} else {
		l.release()
	}
	// The intruder's secret opens no API either.
	other, _ := ReadSecret(filepath.Join(c.DataDir, SecretFile))
	_, err = api.NewClient(agents[0].LocalAPIAddr(), other).Nodes(context.Background())
	if !errors.Is(err, errkind.Unauthorized) {
		t.Errorf("API call with another secret: error = %v, want 401", err)
	}
	if got, _ := apiStates(agents[0]); got != "n1=alive" {
		t.Errorf("after the refused join n1 sees %q", got)
	}
}

func TestJoinUnreachable(t *testing.T) {
	// Port 1 (tcpmux) is never served here; a just-closed ephemeral port could be
	// taken again by a test running in parallel.
	addr := "127.0.0.1:1"
	c := testConfig(t, "n1")
	c.Init = true
	c.Join = []string{addr}
	_, err := Start(c)
	if !errors.Is(err, membership.ErrJoinUnreachable) || !strings.HasPrefix(err.Error(), "cannot reach "+addr) {
		t.Errorf("join of a closed port: error = %v, want ErrJoinUnreachable naming %s", err, addr)
	}
}

func TestDataDirLocked(t *testing.T) {
	c := testConfig(t, "n1")
	c.Init = true
	startAgent(t, c)
	c.Name = "n1b"
	_, err := Start(c)
	var le *LockedError
	if !errors.As(err, &le) || !errors.Is(err, ErrDataDirLocked) || le.PID != os.Getpid() || le.Dir != c.DataDir {
		t.Fatalf("second agent on %s: error = %v, want LockedError with pid %d", c.DataDir, err, os.Getpid())
	}
	if want := fmt.Sprintf("data dir %s is in use by pid %d", c.DataDir, os.Getpid()); err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

func TestSecrets(t *testing.T) {
	// No secret and no --init.
	c := testConfig(t, "n1")
	if _, err := Start(c); !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), "--init") {
		t.Errorf("start without secret: error = %v, want ErrNoSecret mentioning --init", err)
	}
	c.Join = []string{"127.0.0.1:1"}
	if _, err := Start(c); !errors.Is(err, ErrNoSecret) || !strings.Contains(err.Error(), "--secret-file") {
		t.Errorf("join without secret: error = %v, want ErrNoSecret mentioning --secret-file", err)
	}

	// A secret file elsewhere, readable by others: refused.
	dir := t.TempDir()
	path := filepath.Join(dir, "cluster.key")
	os.WriteFile(path, []byte("a long enough shared secret\n"), 0o644)
	c = testConfig(t, "n1")
	c.SecretFile = path
	if _, err := Start(c); !errors.Is(err, ErrBadSecret) || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("secret mode 0644: error = %v, want ErrBadSecret suggesting chmod", err)
	}
	os.Chmod(path, 0o600)
	a := startAgent(t, c)
	if string(a.Secret()) != "a long enough shared secret" {
		t.Errorf("secret = %q, want the file's content without the newline", a.Secret())
	}
	// The local CLI finds the agent through its data dir alone.
	addr, secret, err := FindLocal(c.DataDir)
	if err != nil || addr != a.LocalAPIAddr() || string(secret) != string(a.Secret()) {
		t.Errorf("FindLocal = %s, %q, %v; want %s and the secret", addr, secret, err, a.LocalAPIAddr())
	}
	a.Shutdown()
	if _, _, err := FindLocal(c.DataDir); !errors.Is(err, ErrNoAgent) {
		t.Errorf("FindLocal after shutdown: error = %v, want ErrNoAgent", err)
	}

	// --init writes a fresh secret with mode 0600, and keeps it on restart.
	c = testConfig(t, "n1")
	c.Init = true
	a = startAgent(t, c)
	fi, err := os.Stat(filepath.Join(c.DataDir, SecretFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("secret after --init: %v, mode %v; want mode 0600", err, fi.Mode().Perm())
	}
	first := string(a.Secret())
	a.Shutdown()
	a = startAgent(t, c)
	if string(a.Secret()) != first || len(first) != 64 {
		t.Errorf("restart with --init changed the secret or it is not 64 hex digits: %q → %q", first, a.Secret())
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tt := range []struct {
		change func(*Config)
		want   string
	}{
		{func(c *Config) { c.Bind = "localhost:7946" }, `bind address "localhost:7946"`},
		{func(c *Config) { c.Bind = "127.0.0.1" }, `bind address "127.0.0.1"`},
		{func(c *Config) { c.Name = "bad name" }, `Name "bad name"`},
		{func(c *Config) { c.Labels = map[string]string{"a b": "c"} }, `label key "a b"`},
		{func(c *Config) { c.API = "127.0.0.1:99999" }, "API"},
	} {
		c := testConfig(t, "n1")
		c.Init = true
		tt.change(&c)
		if _, err := Start(c); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Start = %v, want an error containing %q", err, tt.want)
		}
	}
	t.Setenv("SHOAL_SPARE", "no")
	c := testConfig(t, "n1")
	c.Init = true
	if _, err := Start(c); err == nil || !strings.Contains(err.Error(), `SHOAL_SPARE "no": want 1`) {
		t.Errorf("Start with SHOAL_SPARE=no = %v, want the variable named", err)
	}
}
