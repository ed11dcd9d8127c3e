package jobs

import (
	"context"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// userWithShell returns the uid of a local user named name whose login shell
// is shell, made (or given that shell) for the test.
func userWithShell(t *testing.T, name, shell string) string {
	t.Helper()
	if _, err := os.Stat(shell); err != nil {
		t.Skipf("no %s on this machine (make deps installs zsh and ksh): %v", shell, err)
	}
	args := []string{"useradd", "--system", "--no-create-home", "--shell", shell, name}
	if _, err := user.Lookup(name); err == nil {
		args = []string{"usermod", "--shell", shell, name}
	}
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Skipf("cannot make a local user %s with the shell %s: %v: %s", name, shell, err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return u.Uid
}

// TestLoginShells: users whose login shell is sh, dash, bash, zsh or ksh run
// a job across two nodes under Open MPI and under MPICH. Open MPI's launcher
// words the daemon's command by the launching user's login shell (a subshell
// sourcing ./.profile for sh, dash and ksh); Hydra's does not.
func TestLoginShells(t *testing.T) {
	shells := []struct{ name, path string }{
		{"sh", "/bin/sh"}, {"dash", "/bin/dash"}, {"bash", "/bin/bash"}, {"zsh", "/bin/zsh"}, {"ksh", "/bin/ksh"},
	}
	uids := map[string]string{}
	for _, sh := range shells {
		uids[sh.name] = userWithShell(t, "shoal-shell-"+sh.name, sh.path)
	}
	b := up(t, 2)
	waitVoters(t, b, 1, time.Minute) // a cluster of two has one voter
	dir, err := os.MkdirTemp("", "shoal-shells-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	script := filepath.Join(dir, "whoami.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"uid: $(id -u) on $(hostname)\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	rankLine := regexp.MustCompile(`(?m)^\[\d\] uid: (\d+) on (\S+)$`)
	for _, engine := range []string{"openmpi", "mpich"} {
		for _, sh := range shells {
			t.Run(engine+"/"+sh.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				start := time.Now()
				out, err := asUser(ctx, b, "n1", "shoal-shell-"+sh.name, "run", "-n", "2", "--ranks-per-node", "1",
					"--engine", engine, "--max-restarts", "0", "--ckpt-interval", "0", "--", script)
				if err != nil {
					t.Fatalf("shoal run as a user whose login shell is %s: %v\n%s", sh.path, err, out)
				}
				hosts := map[string]bool{}
				for _, m := range rankLine.FindAllStringSubmatch(out, -1) {
					if m[1] != uids[sh.name] {
						t.Errorf("a rank ran as uid %s on %s, want %s", m[1], m[2], uids[sh.name])
					}
					hosts[m[2]] = true
				}
				if len(hosts) != 2 {
					t.Errorf("ranks reported on %d hosts, want 2:\n%s", len(hosts), out)
				}
				t.Logf("%s as a %s user: %v", engine, sh.name, time.Since(start).Round(10*time.Millisecond))
			})
		}
	}
}
