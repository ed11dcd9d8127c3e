package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/testbed"
)

// Shared is a testbed that the tests of one package share: the first test that
// asks for it brings it up, and Main cleans it once they are all done. Tests
// using it run one after the other.
type Shared struct {
	// Config is the testbed to bring up; Up sets its AgentBinary and Logf.
	Config testbed.Config
	bed    *testbed.Bed
}

// Main runs the package's tests (call it from TestMain) without the caller's
// SHOAL_AGENT and SHOAL_TESTBED_INSTANCE, then cleans the testbed if one came
// up, and returns the exit code for os.Exit.
func (s *Shared) Main(m *testing.M) int {
	os.Unsetenv("SHOAL_AGENT")
	os.Unsetenv("SHOAL_TESTBED_INSTANCE")
	code := m.Run()
	if s.bed != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := testbed.Clean(ctx, s.Config.Instance); err != nil {
			fmt.Fprintf(os.Stderr, "clean testbed %d: %v\n", s.Config.Instance, err)
			code = 1
		}
	}
	return code
}

// Up returns the shared testbed, bringing it up first if need be (a test that
// cannot run one is skipped, see NeedTestbed). When t fails, the tail of every
// host's agent log is logged.
func (s *Shared) Up(t *testing.T) *testbed.Bed {
	t.Helper()
	bin := NeedTestbed(t)
	t.Cleanup(func() {
		if !t.Failed() || s.bed == nil {
			return
		}
		hosts, _ := s.bed.Hosts()
		for _, h := range hosts {
			if log, err := os.ReadFile(filepath.Join(s.bed.Dir(), h.Name, "agent.log")); err == nil {
				lines := strings.Split(strings.TrimRight(string(log), "\n"), "\n")
				t.Logf("agent log of %s (tail):\n%s", h.Name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})
	if s.bed != nil {
		return s.bed
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := s.Config
	cfg.AgentBinary = bin
	// Not t.Logf: later tests use the testbed after this one has ended.
	cfg.Logf = func(format string, args ...any) { fmt.Fprintf(os.Stderr, "testbed: "+format+"\n", args...) }
	b, err := testbed.Up(ctx, cfg)
	if err != nil {
		t.Fatalf("testbed up: %v", err)
	}
	s.bed = b
	return b
}
