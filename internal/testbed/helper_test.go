package testbed

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the programs the tests run inside hosts: with first argument
// "helper" it runs one of helpers, with "agent" and "nodes" it pretends to be `shoal agent`
// and `shoal nodes`.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "helper" {
		if err := helpers[os.Args[2]](os.Args[3:]); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(fakeAgent(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "nodes" {
		os.Exit(fakeNodes())
	}
	os.Exit(m.Run())
}

var helpers = map[string]func(args []string) error{
	// serve ADDR: answer every connection with this host's name; "ready" once listening.
	"serve": func(args []string) error {
		l, err := net.Listen("tcp", args[0])
		if err != nil {
			return err
		}
		fmt.Println("ready")
		host, _ := os.Hostname()
		for {
			c, err := l.Accept()
			if err != nil {
				return err
			}
			fmt.Fprintln(c, host)
			c.Close()
		}
	},
	// dial ADDR...: print each server's answer; fail on the first that does not answer.
	"dial": func(args []string) error {
		for _, a := range args {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err != nil {
				return err
			}
			c.SetDeadline(time.Now().Add(time.Second))
			line, err := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if err != nil {
				return fmt.Errorf("read from %s: %w", a, err)
			}
			fmt.Print(line)
		}
		return nil
	},
	// sink ADDR: take one connection, read it to the end, print "BYTES SECONDS".
	"sink": func(args []string) error {
		l, err := net.Listen("tcp", args[0])
		if err != nil {
			return err
		}
		fmt.Println("ready")
		c, err := l.Accept()
		if err != nil {
			return err
		}
		buf := make([]byte, 64<<10)
		n, err := io.ReadFull(c, buf[:1])
		start := time.Now()
		if err != nil {
			return err
		}
		m, err := io.CopyBuffer(io.Discard, c, buf)
		fmt.Printf("%d %f\n", int64(n)+m, time.Since(start).Seconds())
		return err
	},
	// send ADDR BYTES
	"send": func(args []string) error {
		n, _ := strconv.Atoi(args[1])
		c, err := net.Dial("tcp", args[0])
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Write(make([]byte, n))
		return err
	},
	// spin SECONDS: busy for that long in wall time; print the CPU seconds it got.
	"spin": func(args []string) error {
		d, _ := time.ParseDuration(args[0])
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		fmt.Printf("%f\n", cpu.Seconds())
		return nil
	},
	// tree N: start N sleeping children, print "ready", sleep.
	"tree": func(args []string) error {
		n, _ := strconv.Atoi(args[0])
		for i := 0; i < n; i++ {
			if err := exec.Command("sleep", "1000").Start(); err != nil {
				return err
			}
		}
		fmt.Println("ready")
		time.Sleep(time.Hour)
		return nil
	},
	// up INSTANCE NODES: bring a testbed up, then wait to be killed.
	"up": func(args []string) error {
		inst, _ := strconv.Atoi(args[0])
		nodes, _ := strconv.Atoi(args[1])
		if _, err := Up(context.Background(), Config{Nodes: nodes, Instance: inst}); err != nil {
			return err
		}
		time.Sleep(time.Hour)
		return nil
	},
}

// fakeAgent is enough of `shoal agent` to check how the testbed starts agents: it accepts
// the flags agentArgv passes, writes the secret with --init, requires it otherwise, listens
// on --bind, and then publishes its address in the data dir as the real agent does.
func fakeAgent(args []string) int {
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	bind := fs.String("bind", "", "address")
	dataDir := fs.String("data-dir", "", "data dir")
	name := fs.String("name", "", "node name")
	join := fs.String("join", "", "join address")
	initFlag := fs.Bool("init", false, "write a new secret")
	secret := fs.String("secret-file", "", "secret")
	cores := fs.Int("cores", 0, "cores")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	host, _ := os.Hostname()
	if host != *name {
		fmt.Fprintf(os.Stderr, "fake agent: hostname %q, --name %q\n", host, *name)
		return 1
	}
	if *initFlag {
		if err := os.WriteFile(*secret, []byte("s3cret\n"), 0o600); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	} else if _, err := os.Stat(*secret); err != nil || *join == "" {
		fmt.Fprintf(os.Stderr, "fake agent: want --join (%q) and the secret: %v\n", *join, err)
		return 1
	}
	l, err := net.Listen("tcp", *bind)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	line := fmt.Sprintf("name=%s join=%s cores=%d tmpdir=%s datadir=%s\n", *name, *join, *cores, os.Getenv("TMPDIR"), os.Getenv("SHOAL_DATA_DIR"))
	os.WriteFile(filepath.Join(*dataDir, "fake-agent"), []byte(line), 0o644)
	os.WriteFile(filepath.Join(*dataDir, agentAddrFile), []byte(*bind+"\n"), 0o600)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	return 0
}

// fakeNodes is enough of `shoal nodes --json` for the testbed's wait for the agents: every
// host of the testbed (SHOAL_TESTBED_INSTANCE) is alive.
func fakeNodes() int {
	inst, err := InstanceFromEnv(os.Getenv, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake nodes:", err)
		return 1
	}
	st, err := loadState(names{inst})
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake nodes:", err)
		return 1
	}
	var list struct {
		Nodes []map[string]string `json:"nodes"`
	}
	for _, h := range st.Hosts {
		list.Nodes = append(list.Nodes, map[string]string{"name": h.Name, "state": "alive"})
	}
	json.NewEncoder(os.Stdout).Encode(list)
	return 0
}

// helper returns the argv that runs helper name in a host.
func helper(name string, args ...string) []string {
	return append([]string{os.Args[0], "helper", name}, args...)
}

// started is a helper process running in a host.
type started struct {
	cmd   *exec.Cmd
	lines chan string // its standard output, closed at its end
	done  chan error
}

// start runs argv in node and, if waitReady, waits for its "ready" line.
func start(t *testing.T, b *Bed, node string, waitReady bool, argv ...string) *started {
	t.Helper()
	cmd, err := b.Command(context.Background(), node, argv...)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &started{cmd: cmd, lines: make(chan string, 100), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
		s.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		s.done <- <-s.done
	})
	if waitReady {
		if line := s.line(t, 10*time.Second); line != "ready" {
			t.Fatalf("%v on %s: got %q, want ready", argv, node, line)
		}
	}
	return s
}

// line returns the next line of output, or "" at its end or after timeout.
func (s *started) line(t *testing.T, timeout time.Duration) string {
	select {
	case l := <-s.lines:
		return l
	case <-time.After(timeout):
		t.Errorf("no output in %v", timeout)
		return ""
	}
}

// ended reports whether the process has ended within d.
func (s *started) ended(d time.Duration) bool {
	select {
	case err := <-s.done:
		s.done <- err
		return true
	case <-time.After(d):
		return false
	}
}

// waitFor polls cond until it returns nil or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v after %v", what, err, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// leftovers lists whatever instance inst has left on the machine.
func leftovers(t *testing.T, inst int) []string {
	t.Helper()
	n := names{inst}
	var out []string
	netns, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		t.Fatalf("ip netns list: %v", err)
	}
	for _, l := range strings.Split(string(netns), "\n") {
		if f := strings.Fields(l); len(f) > 0 && strings.HasPrefix(f[0], fmt.Sprintf("shoal%d-", inst)) {
			out = append(out, "netns "+f[0])
		}
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		t.Fatalf("ip link: %v", err)
	}
	for _, l := range strings.Split(string(links), "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if name == n.bridge() || strings.HasPrefix(name, fmt.Sprintf("shoal%d-", inst)) {
			out = append(out, "link "+name)
		}
	}
	for _, m := range cgroupMounts() {
		if _, err := os.Stat(filepath.Join(m.dir, n.cgroupGroup())); err == nil {
			out = append(out, "cgroup "+filepath.Join(m.dir, n.cgroupGroup()))
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), n.dir()+"/") {
		out = append(out, "mounts under "+n.dir())
	}
	if _, err := os.Stat(n.dir()); err == nil {
		out = append(out, "dir "+n.dir())
	}
	return out
}

// needRoot skips tests that build hosts when the machine cannot.
func needRoot(t *testing.T) {
	t.Helper()
	if !IsRoot() {
		t.Skip("needs root: the testbed makes network namespaces, a bridge and cgroups")
	}
	for _, tool := range []string{"ip", "tc", "nsenter", "unshare"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s (iproute2, util-linux): %v", tool, err)
		}
	}
}

// testInstance is this package's testbed instance: tests of other packages use others,
// so that `go test ./...` may run packages at the same time.
const testInstance = 201

// upForTest brings a testbed up and takes it down, checking it leaves nothing, when the
// test ends.
func upForTest(t *testing.T, cfg Config) *Bed {
	t.Helper()
	return upForTestOn(t, testInstance, cfg)
}

// upForTestOn is upForTest on instance inst.
func upForTestOn(t *testing.T, inst int, cfg Config) *Bed {
	t.Helper()
	needRoot(t)
	cfg.Instance = inst
	if cfg.Logf == nil {
		cfg.Logf = t.Logf
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	b, err := Up(ctx, cfg)
	if err != nil {
		t.Fatalf("Up: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Down(context.Background()); err != nil {
			t.Errorf("Down: %v", err)
		}
		if l := leftovers(t, inst); len(l) > 0 {
			t.Errorf("after Down: %v", l)
		}
	})
	return b
}
