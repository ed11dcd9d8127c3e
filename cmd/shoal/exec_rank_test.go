package main

import (
	"crypto/rand"
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
