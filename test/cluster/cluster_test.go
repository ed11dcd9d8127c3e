package cluster

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/api"
	"shoal/internal/pki"
	"shoal/internal/testbed"
)

// The tests run in this order and share one testbed; TestTeardown must stay last.

func TestNodesAlive(t *testing.T) {
	b := cluster(t)
	// testbed.Up returned once every agent saw every host alive; this checks it the way
	// a user would, in every host, with no flags.
	took := waitViews(t, b, 5*time.Second, hosts, allAlive())
	t.Logf("all three alive in every host %v after Up (Up took %v)", took.Round(time.Millisecond), upTook.Round(time.Millisecond))
	if upTook > 10*time.Second {
		t.Errorf("testbed.Up took %v: want the agents up and all alive within a few seconds", upTook)
	}
	for _, h := range hosts {
		ns, err := nodes(b, h)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) != len(hosts) {
			t.Errorf("%s lists %d nodes, want %d: %+v", h, len(ns), len(hosts), ns)
			continue
		}
		for i, n := range ns {
			want, _ := b.Host(n.Name)
			if n.Name != hosts[i] || n.Cores != cores[i] || n.Speed == 0 || n.Arch == "" || n.Ranks != 0 {
				t.Errorf("%s lists %+v; want %s with %d cores, a speed > 0, an arch and no ranks", h, n, hosts[i], cores[i])
			}
			if !strings.HasPrefix(n.Addr, want.IP+":") || !strings.HasPrefix(n.API, want.IP+":") {
				t.Errorf("%s lists %s at gossip %s, API %s; want both on %s", h, n.Name, n.Addr, n.API, want.IP)
			}
			if n.Local != (n.Name == h) {
				t.Errorf("%s lists %s with local = %v", h, n.Name, n.Local)
			}
		}
	}
	// The table a user reads.
	out, err := b.Exec(context.Background(), "n2", shoalBin, "nodes")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME ") || strings.Count(string(out), " alive ") != 3 {
		t.Errorf("shoal nodes in n2 =\n%s\nwant a header and n1, n2, n3 alive", out)
	}
}

func TestWrongSecret(t *testing.T) {
	b := cluster(t)
	ctx := context.Background()
	// A fourth host with no agent of the testbed's: the intruder starts its own, with a
	// secret of its own (--init writes one into its data dir, $SHOAL_DATA_DIR).
	h, err := b.Add(ctx, testbed.HostConfig{Cores: 1, NoAgent: true})
	if err != nil {
		t.Fatal(err)
	}
	n1, _ := b.Host("n1")
	join := n1.IP + ":7946"
	r := run(t, b, h.Name, 30*time.Second, shoalBin, "agent", "--init", "--bind", h.IP+":7946", "--join", join)
	errorLine(t, "shoal agent --join with another secret", r, "shoal agent: join refused by "+join+": wrong cluster secret?")
	if _, err := os.Stat(filepath.Join(h.DataDir, "agent.addr")); err == nil {
		t.Errorf("the refused agent left %s/agent.addr", h.DataDir)
	}
	// The cluster's side says so too.
	waitFor(t, 2*time.Second, "n1's agent log to mention the refused gossip", func() bool {
		log, _ := os.ReadFile(n1.AgentLog)
		return strings.Contains(string(log), "wrong cluster secret")
	})

	// Its secret opens no API: not from its host, nor from a host of the cluster.
	wrong := filepath.Join(h.DataDir, "secret")
	ns, err := nodes(b, "n1")
	if err != nil {
		t.Fatal(err)
	}
	var api string
	for _, n := range ns {
		if n.Name == "n1" {
			api = n.API
		}
	}
	r = run(t, b, h.Name, 15*time.Second, shoalBin, "nodes", "--agent", api, "--secret-file", wrong)
	errorLine(t, "shoal nodes --secret-file WRONG in "+h.Name, r, "shoal nodes: TLS: the agent at ")
	r = run(t, b, "n1", 15*time.Second, shoalBin, "nodes", "--secret-file", wrong)
	errorLine(t, "shoal nodes --secret-file WRONG in n1", r, "shoal nodes: TLS: the agent at ")
	if r.stdout != "" {
		t.Errorf("the refused shoal nodes printed %q", r.stdout)
	}
	r = run(t, b, "n1", 15*time.Second, shoalBin, "leave", "--secret-file", wrong)
	errorLine(t, "shoal leave --secret-file WRONG in n1", r, "shoal leave: TLS: the agent at ")
	// Unsigned, from the machine (bridge address), over TLS with the cluster's
	// certificate: 401 with a JSON error (docs/api.md).
	secret, err := os.ReadFile(filepath.Join(n1.DataDir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	id, err := pki.ClientIdentity([]byte(strings.TrimSpace(string(secret))), "test")
	if err != nil {
		t.Fatal(err)
	}
	direct := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: id.ClientConfig()}, Timeout: 10 * time.Second}
	resp, err := direct.Get("https://" + api + "/v1/nodes")
	if err != nil {
		t.Fatal(err)
	}
	var body struct{ Error, Code string }
	jerr := json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || jerr != nil || body.Code != "unauthorized" || body.Error == "" {
		t.Errorf("unsigned GET /v1/nodes: status %d, body %+v (%v); want 401 and a JSON error with code unauthorized", resp.StatusCode, body, jerr)
	}

	// Nothing changed: the cluster is the three nodes, all alive (and n1 did not leave).
	holdViews(t, b, time.Second, hosts, allAlive())
	if st, _, _ := b.Status(); st[len(st)-1].Procs != 0 {
		t.Errorf("%d processes left in %s after the refused agent", st[len(st)-1].Procs, h.Name)
	}
}

// TestReplayRefused: a signed request captured on its way to n2 and sent unchanged
// to n3 is refused there (421, it names n2's agent), and again at n2 (its nonce is
// used), where the original was answered.
func TestReplayRefused(t *testing.T) {
	b := cluster(t)
	n1, _ := b.Host("n1")
	secret, err := os.ReadFile(filepath.Join(n1.DataDir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	ns, err := nodes(b, "n1")
	if err != nil {
		t.Fatal(err)
	}
	addr := map[string]string{}
	for _, n := range ns {
		addr[n.Name] = n.API
	}
	secret = []byte(strings.TrimSpace(string(secret)))
	h, err := api.NewClient(addr["n2"], secret).Health(context.Background())
	if err != nil || !strings.HasPrefix(h.Node, "n2/") {
		t.Fatalf("signed health of n2: %+v, %v; want its node n2/RUN", h, err)
	}
	// The requests are replayed by a holder of the cluster's certificate: TLS
	// keeps anyone else from capturing them (TestPlainRefused).
	id, err := pki.ClientIdentity(secret, "replayer")
	if err != nil {
		t.Fatal(err)
	}
	original, _ := http.NewRequest("GET", "https://"+addr["n2"]+"/v1/nodes", nil)
	api.Sign(original, api.DeriveAuthKey(secret), h.Node, api.EmptySHA256, time.Now())
	captured := original.Header
	direct := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: id.ClientConfig()}, Timeout: 10 * time.Second}
	send := func(node string) (int, string) {
		r, _ := http.NewRequest("GET", "https://"+addr[node]+"/v1/nodes", nil)
		r.Header = captured.Clone()
		resp, err := direct.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct{ Error, Code string }
		json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body.Code + ": " + body.Error
	}
	if st, msg := send("n2"); st != http.StatusOK {
		t.Fatalf("the original request at n2: %d %s, want 200", st, msg)
	}
	if st, msg := send("n3"); st != http.StatusMisdirectedRequest || !strings.Contains(msg, h.Node) {
		t.Errorf("the request replayed to n3: %d %s, want 421 naming %s", st, msg, h.Node)
	}
	if st, msg := send("n2"); st != http.StatusUnauthorized || !strings.Contains(msg, "replayed") {
		t.Errorf("the request replayed to n2: %d %s, want 401 replayed", st, msg)
	}
}

// TestPlainRefused: an agent's API and job store talk TLS 1.3 with certificates
// of the cluster's authority only. Plain HTTP gets no API answer; a client with
// no certificate, or one of another cluster, gets no connection; the job store's
// port answers nothing in clear.
func TestPlainRefused(t *testing.T) {
	b := cluster(t)
	ns, err := nodes(b, "n1")
	if err != nil {
		t.Fatal(err)
	}
	var n2 node
	for _, n := range ns {
		if n.Name == "n2" {
			n2 = n
		}
	}
	n1, _ := b.Host("n1")
	secret, err := os.ReadFile(filepath.Join(n1.DataDir, "secret"))
	if err != nil {
		t.Fatal(err)
	}
	ours, err := pki.ClientIdentity([]byte(strings.TrimSpace(string(secret))), "test")
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := pki.NewIdentity([]byte("another cluster's secret, 0123456789"), "intruder")
	if err != nil {
		t.Fatal(err)
	}

	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}).Get("http://" + n2.API + "/v1/nodes")
	if err != nil {
		t.Fatalf("plain HTTP to n2's API: %v, want an answer that is not the API's", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), `"error"`) || strings.Contains(string(body), "n1") {
		t.Errorf("plain HTTP to n2's API: %d %q, want 400 and no API answer", resp.StatusCode, body)
	}

	host, port, _ := net.SplitHostPort(n2.Addr)
	p, _ := strconv.Atoi(port)
	raft := net.JoinHostPort(host, strconv.Itoa(p+2)) // testbed agents: gossip port + 2
	noCert := ours.ClientConfig()
	noCert.GetClientCertificate = nil
	for _, addr := range []string{n2.API, raft} {
		if err := handshake(addr, ours.ClientConfig()); err != nil {
			t.Errorf("TLS to %s with the cluster's certificate: %v", addr, err)
		}
		if err := handshake(addr, theirs.ClientConfig()); err == nil {
			t.Errorf("TLS to %s with another cluster's certificate: connected", addr)
		}
		if err := handshake(addr, noCert); err == nil {
			t.Errorf("TLS to %s with no certificate: connected", addr)
		}
	}
	// Plain bytes to the job store: the connection ends with no answer.
	c, err := net.DialTimeout("tcp", raft, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("\x00plain raft request\n"))
	if got, _ := io.ReadAll(c); len(got) > 0 && !strings.HasPrefix(string(got), "\x15") { // a TLS alert record at most
		t.Errorf("plain bytes to the job store's port answered %q", got)
	}
}

// handshake completes a TLS handshake with addr and a round trip of data, so
// that a refusal of the client's certificate (sent after the server's flight in
// TLS 1.3) is seen.
func handshake(addr string, cfg *tls.Config) error {
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		return err
	}
	var b [1]byte
	_, err = c.Read(b[:])
	if errors.Is(err, io.EOF) || errors.Is(err, os.ErrDeadlineExceeded) {
		return nil // the job store reads a Raft request and waits: connected
	}
	return err
}

func TestLeave(t *testing.T) {
	b := cluster(t)
	r := run(t, b, "n3", 30*time.Second, shoalBin, "leave")
	if r.code != 0 || r.stdout != "node n3 left the cluster\n" {
		t.Fatalf("shoal leave in n3: exit %d, stdout %q, stderr %q; want exit 0 and \"node n3 left the cluster\"", r.code, r.stdout, r.stderr)
	}
	want := states("n1", "alive", "n2", "alive", "n3", "left")
	took := waitViews(t, b, 5*time.Second, others("n3"), want)
	t.Logf("n1 and n2 show n3 left %v after shoal leave returned", took.Round(time.Millisecond))
	// The agent stopped, and a left node stays left: the failure detector does not turn
	// it into dead.
	waitFor(t, 10*time.Second, "n3's agent to stop after leaving", func() bool { return !agentAlive(t, b, "n3") })
	holdViews(t, b, 2*time.Second, others("n3"), want)
}

func TestKill(t *testing.T) {
	b := cluster(t)
	if _, err := b.Kill(context.Background(), "n2"); err != nil {
		t.Fatal(err)
	}
	// n2's machine answers and nothing listens on its API address: the others
	// show it unreachable at once, before membership's verdict.
	took := waitViews(t, b, time.Second, others("n2"), states("n1", "alive", "n2", "unreachable", "n3", "alive"))
	t.Logf("n1 and n3 show the killed n2 unreachable after %v", took.Round(time.Millisecond))
	// LAN failure detector: suspect after about 1–2 s, dead 3 to 12 s later.
	took = waitViews(t, b, 30*time.Second, others("n2"), states("n1", "alive", "n2", "dead", "n3", "alive"))
	t.Logf("n1 and n3 show the killed n2 dead after %v", took.Round(time.Millisecond))
}

func TestCutHeal(t *testing.T) {
	b := cluster(t)
	ctx := context.Background()
	t.Run("cut", func(t *testing.T) {
		if err := b.Cut(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		took := waitViews(t, b, 30*time.Second, others("n3"), states("n1", "alive", "n2", "alive", "n3", "dead"))
		t.Logf("n1 and n2 show the cut n3 dead after %v", took.Round(time.Millisecond))
		// n3's agent lives on alone and declares the others dead in turn (later: no
		// other node confirms its suspicion, so it waits the longest suspicion timeout).
		took = waitViews(t, b, 45*time.Second, []string{"n3"}, states("n1", "dead", "n2", "dead", "n3", "alive"))
		t.Logf("the cut n3 shows n1 and n2 dead %v later", took.Round(time.Millisecond))
		// The partition lasts a little longer, as a phone's time off the Wi-Fi would.
		// This is the scenario, not a wait for something: for a second or two after
		// its verdict a node still gossips it to the nodes it declared dead, and a heal
		// within that window lets them find each other by chance.
		time.Sleep(5 * time.Second)
	})
	t.Run("heal", func(t *testing.T) {
		if err := b.Heal(ctx, "n3"); err != nil {
			t.Fatal(err)
		}
		// Nobody restarts anything: the agents must find each other again by themselves,
		// as a phone's agent must when the phone is back on the Wi-Fi. 20 s is several
		// probe periods and suspicion timeouts. (memberlist alone never does it: it
		// probes and push-pulls only nodes it thinks alive, and gossips to dead ones only
		// for a short while and only when it has news; the agent has to try to reach
		// the nodes it holds dead.)
		took := waitViews(t, b, 20*time.Second, hosts, allAlive())
		t.Logf("all alive again in every host %v after heal", took.Round(time.Millisecond))
	})
}

// Eight nodes: five vote, two are standbys and the last to join is a client,
// which keeps no replica of the job store and follows it from a server; a job
// submitted on the client runs, and its output reaches `shoal run` whole; with
// the leader's agent killed, the client names the new leader and runs a job
// again. It grows the shared testbed and kills its leader, so it runs last
// before the teardown.
func TestBoundedMembership(t *testing.T) {
	b := cluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	members := append([]string(nil), hosts...)
	for len(members) < 8 {
		h, err := b.Add(ctx, testbed.HostConfig{Cores: 1})
		if err != nil {
			t.Fatal(err)
		}
		members = append(members, h.Name)
	}
	client := members[7]
	roles := func(host string) map[string]int {
		ns, err := nodes(b, host)
		if err != nil {
			return nil
		}
		count := map[string]int{}
		for _, n := range ns {
			if n.State == "alive" {
				count[n.Role]++
			}
		}
		return count
	}
	want := map[string]int{"leader": 1, "voter": 4, "follower": 2, "client": 1}
	for _, h := range []string{"n1", client} {
		var got map[string]int
		defer func() {
			if t.Failed() {
				t.Logf("%s last showed %v", h, got)
			}
		}()
		waitFor(t, 30*time.Second, h+" to show 5 voters, 2 standbys and 1 client", func() bool {
			got = roles(h)
			return reflect.DeepEqual(got, want)
		})
		t.Logf("%s shows %v", h, got)
	}
	ns, err := nodes(b, "n1")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns {
		if n.Name == client && n.Role != "client" {
			t.Errorf("%s, the last to join, is a %s; want the client", client, n.Role)
		}
	}
	const lines = 300
	r := run(t, b, client, 2*time.Minute, shoalBin, "run", "-n", "2", "--", "/bin/sh", "-c", "seq "+strconv.Itoa(lines))
	if r.code != 0 {
		t.Fatalf("shoal run on the client: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(l)
		if len(f) > 0 {
			seen[f[len(f)-1]]++
		}
	}
	for i := 1; i <= lines; i++ {
		if seen[strconv.Itoa(i)] != 2 {
			t.Fatalf("shoal run on the client: line %d seen %d times, want once per rank; stdout:\n%s", i, seen[strconv.Itoa(i)], r.stdout)
		}
	}
	// Control passes from the client to the leader: a job detached, cancelled
	// and waited for from the client ends cancelled.
	r = run(t, b, client, time.Minute, shoalBin, "run", "--detach", "-n", "2", "--", "/bin/sleep", "120")
	if r.code != 0 {
		t.Fatalf("shoal run --detach on the client: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	out := strings.Fields(r.stdout)
	id := out[len(out)-1]
	if r := run(t, b, client, time.Minute, shoalBin, "cancel", id); r.code != 0 {
		t.Errorf("shoal cancel %s on the client: exit %d\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	if r := run(t, b, client, time.Minute, shoalBin, "wait", id); r.code != 130 {
		t.Errorf("shoal wait %s on the client after its cancellation: exit %d, want 130\n%s%s", id, r.code, r.stdout, r.stderr)
	}
	// The leader's agent is killed: the client names the new leader, from the
	// server it follows, and a job submitted on it runs.
	var leader string
	for _, n := range ns {
		if n.Role == "leader" {
			leader = n.Name
		}
	}
	if _, err := b.Kill(ctx, leader); err != nil {
		t.Fatal(err)
	}
	var now string
	waitFor(t, 30*time.Second, client+" to name a leader other than the killed "+leader, func() bool {
		ns, err := nodes(b, client)
		if err != nil {
			return false
		}
		for _, n := range ns {
			if n.Role == "leader" && n.Name != leader && n.State == "alive" {
				now = n.Name
				return true
			}
		}
		return false
	})
	t.Logf("%s names %s the leader after %s's agent was killed", client, now, leader)
	if r := run(t, b, client, 2*time.Minute, shoalBin, "run", "-n", "2", "--", "/bin/echo", "again"); r.code != 0 || strings.Count(r.stdout, "again") != 2 {
		t.Errorf("shoal run on the client after the failover: exit %d, stdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
}

func TestTeardown(t *testing.T) {
	needTestbed(t)
	if bed == nil {
		// Run alone: bring it up, so that there is something to take down.
		cluster(t)
	}
	b := bed
	bed = nil
	start := time.Now()
	if err := b.Down(context.Background()); err != nil {
		t.Fatalf("Down: %v", err)
	}
	t.Logf("Down took %v", time.Since(start).Round(time.Millisecond))
	if l := leftovers(t); len(l) > 0 {
		t.Errorf("after Down: %s", strings.Join(l, "; "))
	}
}

// agentAlive reports whether host's agent process runs.
func agentAlive(t *testing.T, b *testbed.Bed, host string) bool {
	t.Helper()
	st, _, err := b.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range st {
		if h.Name == host {
			return h.AgentAlive
		}
	}
	t.Fatalf("no host %s", host)
	return false
}

// waitFor polls cond until it holds, failing after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
	}
}
