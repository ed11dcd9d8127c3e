package liblog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// capture returns a logger at level that writes text lines without a time,
// and the buffer they go to.
func capture(level slog.Level) (*slog.Logger, *bytes.Buffer) {
	var out bytes.Buffer
	h := slog.NewTextHandler(&out, &slog.HandlerOptions{Level: level, ReplaceAttr: func(g []string, a slog.Attr) slog.Attr {
		if len(g) == 0 && a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})
	return slog.New(h), &out
}

func TestLoggerLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		level slog.Level // the agent's
		log   func(hclog.Logger)
		want  string
	}{
		{"warning, args as attributes", slog.LevelInfo,
			func(l hclog.Logger) { l.Warn("failed to contact", "server-id", "n2", "time", 2*time.Second) },
			`level=WARN msg="failed to contact" component=raft server-id=n2 time_=2s`},
		{"error with an error value", slog.LevelInfo,
			func(l hclog.Logger) {
				l.Error("failed to heartbeat to", "peer", "10.0.0.2:7947", "error", errors.New("refused"))
			},
			`level=ERROR msg="failed to heartbeat to" component=raft peer=10.0.0.2:7947 error=refused`},
		{"info is the agent's debug: hidden", slog.LevelInfo,
			func(l hclog.Logger) { l.Info("entering follower state") }, ``},
		{"info is the agent's debug: shown verbose", slog.LevelDebug,
			func(l hclog.Logger) { l.Info("entering follower state") },
			`level=DEBUG msg="entering follower state" component=raft`},
		{"named and with", slog.LevelInfo,
			func(l hclog.Logger) { l.Named("snapshot").With("id", "s1").Warn("reaping", "path", "/x") },
			`level=WARN msg=reaping component=raft.snapshot id=s1 path=/x`},
		{"hclog formats", slog.LevelInfo,
			func(l hclog.Logger) { l.Warn("odd", "f", hclog.Fmt("%d-%s", 3, "x"), "h", hclog.Hex(255), "dangling") },
			`level=WARN msg=odd component=raft f=3-x h=0xff EXTRA_VALUE_AT_END=dangling`},
		{"SetLevel filters", slog.LevelDebug,
			func(l hclog.Logger) { l.SetLevel(hclog.Error); l.Warn("dropped") }, ``},
		{"no name, no component", slog.LevelInfo,
			func(l hclog.Logger) { l.ResetNamed("").Warn("plain") },
			`level=WARN msg=plain`},
		{"standard logger infers the level", slog.LevelInfo,
			func(l hclog.Logger) {
				l.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}).Print("[ERR] raft: pipe broke")
			},
			`level=ERROR msg="pipe broke" component=raft`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sl, out := capture(tc.level)
			tc.log(New(sl, "raft", nil))
			if got := strings.TrimSpace(out.String()); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}

// Raft tries a voter that is gone about once a second, each time with another
// backoff and error text: one line, then one a period with the count.
func TestLoggerRateLimitsRepeats(t *testing.T) {
	start := time.Unix(1000, 0)
	now := start
	sl, out := capture(slog.LevelInfo)
	l := New(sl, "raft", NewLimiter(30*time.Second, func() time.Time { return now }))
	for i := range 61 {
		now = start.Add(time.Duration(i) * time.Second)
		l.Error("failed to heartbeat to", "peer", "10.0.0.2:7947", "backoff time", time.Duration(i)*10*time.Millisecond,
			"error", errors.New("dial tcp 10.0.0.1:4"+strings.Repeat("1", i%3)+"->10.0.0.2:7947: connection refused"))
		l.Error("failed to heartbeat to", "peer", "10.0.0.3:7947", "error", errors.New("refused"))
	}
	l.Info("entering follower state") // not limited, and hidden at info
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var got []string
	for _, line := range lines {
		peer, supp := "", "-"
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "peer="); ok {
				peer = v
			}
			if v, ok := strings.CutPrefix(f, "suppressed="); ok {
				supp = v
			}
		}
		got = append(got, peer+" "+supp)
	}
	want := []string{
		"10.0.0.2:7947 -", "10.0.0.3:7947 -",
		"10.0.0.2:7947 29", "10.0.0.3:7947 29",
		"10.0.0.2:7947 29", "10.0.0.3:7947 29",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got lines (peer, suppressed):\n%s\nwant:\n%s\n\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
}

func TestParseLine(t *testing.T) {
	for _, tc := range []struct {
		line      string
		wantLevel hclog.Level
		wantMsg   string
	}{
		{"[WARN] memberlist: Refuting a suspect message", hclog.Warn, "Refuting a suspect message"},
		{"[ERR] memberlist: Failed to send", hclog.Error, "Failed to send"},
		{"[DEBUG] memberlist: Stream connection", hclog.Debug, "Stream connection"},
		{"no level", hclog.Info, "no level"},
	} {
		level, msg := ParseLine(tc.line, "memberlist")
		if level != tc.wantLevel || msg != tc.wantMsg {
			t.Errorf("ParseLine(%q): got %v %q, want %v %q", tc.line, level, msg, tc.wantLevel, tc.wantMsg)
		}
	}
}
