package membership

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"shoal/internal/liblog"
)

// logSink receives hashicorp/memberlist's log lines ("[LEVEL] memberlist: message")
// and passes them on to slog at a matching level ([liblog.Level]), its
// warnings and errors through limit when it is not nil.
//
// Two facts that memberlist knows but does not expose through its API are taken
// from its log text here, and only here: that this node's probes of a node failed
// (memberlist's suspicion, which has no delegate callback), and that a peer's
// gossip could not be decrypted (a node with another cluster secret). The texts
// are pinned by tests against the memberlist version in go.mod; if a new version
// changes them, suspect events and the wrong-secret log line stop, nothing else.
type logSink struct {
	log       *slog.Logger
	onSuspect func(name string)
	limit     *liblog.Limiter

	mu       sync.Mutex
	rejected map[string]time.Time // remote host → last logged, to log one line a minute
	now      func() time.Time
}

const (
	suspectPrefix = "Suspect "
	suspectSuffix = " has failed, no acks received"
	rejectEvery   = time.Minute
)

func (s *logSink) Write(p []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(p), "\n"), "\n") {
		s.line(line)
	}
	return len(p), nil
}

func (s *logSink) line(line string) {
	hl, msg := liblog.ParseLine(line, "memberlist")
	level := liblog.Level(hl)

	if strings.HasPrefix(msg, suspectPrefix) && strings.HasSuffix(msg, suspectSuffix) {
		if s.onSuspect != nil {
			s.onSuspect(msg[len(suspectPrefix) : len(msg)-len(suspectSuffix)])
		}
	}
	if strings.Contains(strings.ToLower(msg), "decrypt") && strings.Contains(msg, "from=") {
		s.reject(msg)
		return
	}
	args := []any{"component", "memberlist"}
	if level >= slog.LevelWarn && s.limit != nil {
		// The text after the first ": " is an error's, which may change
		// from one repeat to the next (a local port).
		key, _, _ := strings.Cut(msg, ": ")
		ok, n := s.limit.Allow(key)
		if !ok {
			return
		}
		if n > 0 {
			args = append(args, "suppressed", n)
		}
	}
	s.log.Log(context.Background(), level, msg, args...)
}

// reject logs, at most once a minute per remote host, that a peer's gossip could
// not be authenticated.
func (s *logSink) reject(msg string) {
	from := "unknown address"
	if i := strings.LastIndex(msg, "from="); i >= 0 {
		from = strings.TrimSpace(msg[i+len("from="):])
	}
	host := from
	if i := strings.LastIndex(from, ":"); i > 0 {
		host = from[:i]
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	t := now()
	s.mu.Lock()
	if s.rejected == nil {
		s.rejected = map[string]time.Time{}
	}
	last, seen := s.rejected[host]
	if seen && t.Sub(last) < rejectEvery {
		s.mu.Unlock()
		return
	}
	s.rejected[host] = t
	s.mu.Unlock()
	s.log.Warn("refused gossip that does not decrypt with this cluster's key (wrong cluster secret?)", "from", from)
}
