package membership

import (
	"bytes"
	"fmt"
	"log"
	"log/slog"
	"strings"
	"testing"
	"time"

	"shoal/internal/liblog"
)

// The texts below are memberlist's (state.go probeNode, net.go handleConn and
// ingestPacket). If an upgrade changes them, these tests say so.
func TestLogSink(t *testing.T) {
	var out bytes.Buffer
	var suspects []string
	now := time.Unix(1000, 0)
	s := &logSink{
		log:       slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug})),
		onSuspect: func(n string) { suspects = append(suspects, n) },
		now:       func() time.Time { return now },
	}
	l := log.New(s, "", 0)
	l.Printf("[INFO] memberlist: Suspect %s has failed, no acks received", "n3")
	l.Printf("[ERR] memberlist: failed to receive: %s %s", "No installed keys could decrypt the message", "from=127.0.0.1:4000")
	l.Printf("[ERR] memberlist: Decrypt packet failed: %v %s", "no installed keys could decrypt the message", "from=127.0.0.1:4001")
	now = now.Add(2 * time.Minute)
	l.Printf("[ERR] memberlist: Decrypt packet failed: %v %s", "no installed keys could decrypt the message", "from=127.0.0.1:4002")
	l.Printf("[WARN] memberlist: Refuting a suspect message (from: n2)")

	if fmt.Sprint(suspects) != "[n3]" {
		t.Errorf("suspects = %v, want [n3]", suspects)
	}
	got := out.String()
	if n := strings.Count(got, "wrong cluster secret?"); n != 2 {
		t.Errorf("wrong-secret lines = %d, want 2 (one per host per minute):\n%s", n, got)
	}
	if !strings.Contains(got, "from=127.0.0.1:4000") || strings.Contains(got, "4001") {
		t.Errorf("want the first rejection from 127.0.0.1 logged, the second suppressed:\n%s", got)
	}
	if !strings.Contains(got, "level=WARN msg=\"Refuting a suspect message") {
		t.Errorf("WARN line not passed on at warn level:\n%s", got)
	}
}

// A memberlist error that repeats (gossip to a node that is gone) is written
// once, then once a period with the count of lines held back; the error text
// after the first ": " does not make lines apart.
func TestLogSinkRateLimits(t *testing.T) {
	var out bytes.Buffer
	start := time.Unix(1000, 0)
	now := start
	s := &logSink{
		log:   slog.New(slog.NewTextHandler(&out, nil)),
		limit: liblog.NewLimiter(30*time.Second, func() time.Time { return now }),
	}
	l := log.New(s, "", 0)
	for i := range 150 { // 200 ms apart, 30 s
		now = start.Add(time.Duration(i) * 200 * time.Millisecond)
		l.Printf("[ERR] memberlist: Failed to send gossip to 10.0.0.3:7946: write udp 10.0.0.1:%d->10.0.0.3:7946: refused", 40000+i)
	}
	now = start.Add(30 * time.Second)
	l.Printf("[ERR] memberlist: Failed to send gossip to 10.0.0.3:7946: write udp 10.0.0.1:1->10.0.0.3:7946: refused")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=ERROR") || strings.Contains(lines[0], "suppressed") ||
		!strings.Contains(lines[1], "suppressed=149") {
		t.Errorf("got %d lines, want 2: the first at level ERROR, the second with suppressed=149:\n%s", len(lines), &out)
	}
}
