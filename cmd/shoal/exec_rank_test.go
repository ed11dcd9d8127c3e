package main

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExecRankDiesWithLauncher: SIGKILL to the process that started `shoal
// exec-rank` (orted or mpirun) ends the wrapper and its rank.
func TestExecRankDiesWithLauncher(t *testing.T) {
	bin := buildShoal(t)
	ranks := t.TempDir()
	var m [8]byte
	rand.Read(m[:])
	marker := hex.EncodeToString(m[:])
	// sh stands for the launcher; "& wait" keeps it from exec'ing the wrapper.
	launcher := exec.Command("/bin/sh", "-c", `"$0" exec-rank -- sleep 60 & wait`, bin)
	launcher.Env = append(os.Environ(), "SHOAL_RANKS_DIR="+ranks, "OMPI_COMM_WORLD_RANK=0", "SHOAL_TEST_MARKER="+marker)
	if err := launcher.Start(); err != nil {
		t.Fatal(err)
	}
	ours := func() []int { return pidsWithEnv("SHOAL_TEST_MARKER", func(v string) bool { return v == marker }) }
	defer func() {
		for _, pid := range ours() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(filepath.Join(ranks, "r000000"))
		if strings.Contains(string(b), "state=running") && len(ours()) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rank did not start: state %q, processes %v", b, ours())
		}
		time.Sleep(20 * time.Millisecond)
	}
	launcher.Process.Kill()
	launcher.Wait()
	deadline = time.Now().Add(5 * time.Second)
	for len(ours()) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("processes still running after the launcher was killed: %v", ours())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExecRankStagesOnce: on a node, exec-rank places the job's staged file
// into the job's work directory and, at later launches, finds it there by its
// stamp in the job directory; an input the program changed is copied again.
func TestExecRankStagesOnce(t *testing.T) {
	bin := buildShoal(t)
	node := t.TempDir()
	content := []byte("input of the job\n")
	h := sha256.Sum256(content)
	sum := hex.EncodeToString(h[:])
	if err := os.MkdirAll(filepath.Join(node, "files"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(node, "files", sum), content, 0o644); err != nil {
		t.Fatal(err)
	}
	jobDir := filepath.Join(node, "jobs", "j1")
	input := filepath.Join(jobDir, "work", "in.txt")
	stampFile := filepath.Join(jobDir, "staged", "in.txt")
	launch := func() {
		t.Helper()
		cmd := exec.Command(bin, "exec-rank", "--stage", "in.txt="+sum+":644", "--", "/bin/cat", "in.txt")
		cmd.Env = append(os.Environ(), "SHOAL_NODE_DATA="+node, "SHOAL_JOB=j1", "OMPI_COMM_WORLD_RANK=0")
		out, err := cmd.CombinedOutput()
		if err != nil || string(out) != string(content) {
			t.Fatalf("exec-rank: %v, output %q, want the staged input", err, out)
		}
	}
	launch() // copies the input into place
	time.Sleep(50 * time.Millisecond)
	launch() // hashes it once and stamps it
	stamp, err := os.ReadFile(stampFile)
	if err != nil || !strings.HasPrefix(string(stamp), sum+" ") {
		t.Fatalf("stamp %s: %q, %v; want one beginning with the input's sha256", stampFile, stamp, err)
	}
	time.Sleep(50 * time.Millisecond)
	if err := os.WriteFile(input, []byte("changed by the program\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	launch() // the change is seen and undone
}
