package slurm

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// roleEnv names the part this test binary plays when a test runs it as another user
// (TestMain): "agent", "attacker" or "reader".
const roleEnv = "SHOAL_SLURM_TEST_ROLE"

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(m.Run())
	case "agent":
		os.Exit(playAgent())
	case "attacker":
		os.Exit(playAttacker())
	case "reader":
		if _, err := os.ReadFile(os.Getenv("READ")); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("read")
		os.Exit(0)
	}
	fmt.Fprintf(os.Stderr, "%s=%s: no such role\n", roleEnv, os.Getenv(roleEnv))
	os.Exit(2)
}

// playAgent makes the NodeDir of job $JOB under $BASE with secret $SECRET, $RUNS
// times over (a requeued job's runs, each removing the one before), and prints the
// last as JSON.
func playAgent() int {
	runs, _ := strconv.Atoi(os.Getenv("RUNS"))
	var nd NodeDir
	for range max(runs, 1) {
		var err error
		if nd, err = MakeNodeDir(os.Getenv("BASE"), os.Getenv("JOB"), []byte(os.Getenv("SECRET"))); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	json.NewEncoder(os.Stdout).Encode(nd)
	return 0
}

// playAttacker does what another user can do to read job $JOB's secret under $BASE:
// it makes the old predictable directory (mode 0777) and one under a name the new
// ones may draw, with symbolic links named secret in both to $TARGET, a file of
// theirs anyone may write; it says "planted" and keeps planting the links, which an
// agent removing them would clear, until its standard input closes.
func playAttacker() int {
	base, job, target := os.Getenv("BASE"), os.Getenv("JOB"), os.Getenv("TARGET")
	var links []string
	for _, dir := range []string{filepath.Join(base, DirName(job)), filepath.Join(base, agentPrefix(job)+"1")} {
		if err := os.Mkdir(dir, 0o777); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		os.Chmod(dir, 0o777)
		links = append(links, filepath.Join(dir, "secret"), filepath.Join(dir, "data"))
	}
	fmt.Println("planted")
	done := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(done) }()
	for {
		select {
		case <-done:
			return 0
		default:
		}
		for _, l := range links {
			os.Symlink(target, l)
		}
	}
}

// TestNodeDirAnotherUser: another user who creates the paths an allocation's agent
// could use before it does, and keeps planting symbolic links there, neither gets
// the secret into their file nor can read it; a base directory of theirs is refused.
func TestNodeDirAnotherUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: makes two local users and runs this test binary as each")
	}
	a, b := localUser(t, "shoal-test-a"), localUser(t, "shoal-test-b")
	bin := shareBinary(t)
	base, err := os.MkdirTemp("", "shoal-slurm-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, os.ModeSticky|0o777) // as /tmp
	// The other user's own directory, and the file they hope the secret lands in.
	theirs := filepath.Join(base, "b-home")
	mkdir(t, theirs, 0o777)
	target := filepath.Join(theirs, "planted")
	os.WriteFile(target, []byte("planted\n"), 0o666)
	os.Chmod(target, 0o666)
	for _, p := range []string{theirs, target} {
		os.Lchown(p, b.uid, b.gid)
	}
	const job, secret = "7", "the-allocation-secret\n"

	attacker := asUser(bin, b, "attacker", "BASE="+base, "JOB="+job, "TARGET="+target)
	in, err := attacker.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := attacker.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := attacker.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { attacker.Process.Kill(); attacker.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "planted\n" {
		t.Fatalf("the attacker: %q, want planted", line)
	}

	tests := []struct {
		name    string
		base    string
		refusal string // "" when the agent's directory is made
	}{
		{"sticky base", base, ""},
		{"base of theirs", theirs, fmt.Sprintf("slurm: unsafe directory %s: owned by uid %d, not by root or uid %d", theirs, b.uid, a.uid)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := asUser(bin, a, "agent", "BASE="+tt.base, "JOB="+job, "SECRET="+secret, "RUNS=100")
			var stderr strings.Builder
			agent.Stderr = &stderr
			stdout, err := agent.Output()
			if tt.refusal != "" {
				if got := strings.TrimSpace(stderr.String()); err == nil || got != tt.refusal {
					t.Errorf("agent: %v: %q, want it refused: %q", err, got, tt.refusal)
				}
				return
			}
			if err != nil {
				t.Fatalf("agent: %v: %s", err, stderr.String())
			}
			var nd NodeDir
			if err := json.Unmarshal(stdout, &nd); err != nil {
				t.Fatalf("agent printed %q: %v", stdout, err)
			}
			checkPrivate(t, nd.Dir, a.uid)
			checkSecret(t, nd.SecretFile, []byte(secret), a.uid)
			if got := filepath.Dir(nd.Dir); got != tt.base {
				t.Errorf("agent's directory in %s, want %s", got, tt.base)
			}
			reader := asUser(bin, b, "reader", "READ="+nd.SecretFile)
			if got, err := reader.Output(); err == nil || !strings.Contains(string(got), "permission denied") {
				t.Errorf("the other user reading %s: %q, want permission denied", nd.SecretFile, got)
			}
		})
	}
	in.Close()
	if err := attacker.Wait(); err != nil {
		t.Errorf("the attacker: %v", err)
	}
	if got, _ := os.ReadFile(target); string(got) != "planted\n" {
		t.Errorf("the other user's file holds %q, want %q as they planted it", got, "planted\n")
	}
}

// account is a local user's ids.
type account struct{ uid, gid int }

// localUser returns the ids of local user name, made (a system user with no home)
// when there is none, as test/jobs does.
func localUser(t *testing.T, name string) account {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Skipf("cannot make a local user %s: %v: %s", name, err, out)
		}
		if u, err = user.Lookup(name); err != nil {
			t.Fatal(err)
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return account{uid, gid}
}

// shareBinary copies this test binary where every user may run it.
func shareBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "shoal-slurm-test-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "slurm.test")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// asUser is a command running this test binary, bin, as user u in role, with env.
func asUser(bin string, u account, role string, env ...string) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Dir = "/"
	cmd.Env = append([]string{roleEnv + "=" + role, "PATH=/usr/bin:/bin"}, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.uid), Gid: uint32(u.gid), Groups: []uint32{}}}
	return cmd
}
