package liblog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Level is the agent's level for a line the libraries log at l.
func Level(l hclog.Level) slog.Level {
	switch {
	case l >= hclog.Error:
		return slog.LevelError
	case l == hclog.Warn:
		return slog.LevelWarn
	case l == hclog.Trace:
		return slog.LevelDebug - 4
	default: // info, debug, and a line of no level
		return slog.LevelDebug
	}
}

// ParseLine splits a line of a library's standard logger, "[WARN] raft: text",
// into its level and the text after the level and the name; a line with no
// level is an info line.
func ParseLine(line, name string) (hclog.Level, string) {
	level, msg := hclog.Info, line
	if i := strings.Index(line, "] "); strings.HasPrefix(line, "[") && i > 0 {
		switch line[1:i] {
		case "TRACE":
			level = hclog.Trace
		case "DEBUG":
			level = hclog.Debug
		case "WARN":
			level = hclog.Warn
		case "ERR", "ERROR":
			level = hclog.Error
		}
		msg = line[i+2:]
	}
	return level, strings.TrimPrefix(msg, name+": ")
}

// New returns an hclog.Logger that writes to log, each line with the
// attribute component=name unless name is ""; an argument named as one of slog's own keys
// (time, level, msg, source) gets a "_" after its name. Warnings and errors go
// through lim when it is not nil; a line written after others were held back
// carries suppressed=N, the number held back. What makes two lines the same
// for lim is the component, the level, the message and the arguments other
// than errors, durations and times, which change from one repeat to the next.
func New(log *slog.Logger, name string, lim *Limiter) hclog.Logger {
	return &logger{log: log, name: name, lim: lim, level: new(atomic.Int32)}
}

type logger struct {
	log   *slog.Logger
	name  string
	args  []any // implied, from With
	lim   *Limiter
	level *atomic.Int32 // hclog.Level set by SetLevel, shared with the loggers derived from this one
}

var _ hclog.Logger = (*logger)(nil)

func (l *logger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || level < hclog.Level(l.level.Load()) {
		return
	}
	sl := Level(level)
	ctx := context.Background()
	if !l.log.Enabled(ctx, sl) {
		return
	}
	all := append(append([]any{}, l.args...), args...)
	attrs := make([]slog.Attr, 0, len(all)/2+2)
	if l.name != "" {
		attrs = append(attrs, slog.String("component", l.name))
	}
	key := []string{l.name, sl.String(), msg}
	for i := 0; i < len(all); i += 2 {
		if i+1 == len(all) {
			attrs = append(attrs, slog.Any("EXTRA_VALUE_AT_END", value(all[i])))
			break
		}
		k, v := fmt.Sprint(all[i]), value(all[i+1])
		switch k {
		case slog.TimeKey, slog.LevelKey, slog.MessageKey, slog.SourceKey:
			k += "_" // raft's "time" is a duration, not the line's time
		}
		attrs = append(attrs, slog.Any(k, v))
		switch v.(type) {
		case error, time.Duration, time.Time:
		default:
			key = append(key, k+"="+fmt.Sprint(v))
		}
	}
	if l.lim != nil && sl >= slog.LevelWarn {
		ok, n := l.lim.Allow(strings.Join(key, "\x00"))
		if !ok {
			return
		}
		if n > 0 {
			attrs = append(attrs, slog.Int("suppressed", n))
		}
	}
	l.log.LogAttrs(ctx, sl, msg, attrs...)
}

// value turns hclog's formatting types into what they print as.
func value(v any) any {
	switch v := v.(type) {
	case hclog.Format:
		if len(v) == 0 {
			return ""
		}
		if f, ok := v[0].(string); ok {
			return fmt.Sprintf(f, v[1:]...)
		}
		return fmt.Sprint(v...)
	case hclog.Hex:
		return fmt.Sprintf("0x%x", int(v))
	case hclog.Octal:
		return fmt.Sprintf("0%o", int(v))
	case hclog.Binary:
		return fmt.Sprintf("0b%b", int(v))
	case hclog.Quote:
		return fmt.Sprintf("%q", string(v))
	case hclog.CapturedStacktrace:
		return string(v)
	}
	return v
}

func (l *logger) Trace(msg string, args ...any) { l.Log(hclog.Trace, msg, args...) }
func (l *logger) Debug(msg string, args ...any) { l.Log(hclog.Debug, msg, args...) }
func (l *logger) Info(msg string, args ...any)  { l.Log(hclog.Info, msg, args...) }
func (l *logger) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l *logger) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l *logger) enabled(level hclog.Level) bool {
	return level >= hclog.Level(l.level.Load()) && l.log.Enabled(context.Background(), Level(level))
}

func (l *logger) IsTrace() bool { return l.enabled(hclog.Trace) }
func (l *logger) IsDebug() bool { return l.enabled(hclog.Debug) }
func (l *logger) IsInfo() bool  { return l.enabled(hclog.Info) }
func (l *logger) IsWarn() bool  { return l.enabled(hclog.Warn) }
func (l *logger) IsError() bool { return l.enabled(hclog.Error) }

func (l *logger) ImpliedArgs() []any { return l.args }

func (l *logger) With(args ...any) hclog.Logger {
	c := *l
	c.args = append(append([]any{}, l.args...), args...)
	return &c
}

func (l *logger) Name() string { return l.name }

func (l *logger) Named(name string) hclog.Logger {
	c := *l
	if l.name != "" {
		name = l.name + "." + name
	}
	c.name = name
	return &c
}

func (l *logger) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	return &c
}

func (l *logger) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }

func (l *logger) GetLevel() hclog.Level {
	if lv := hclog.Level(l.level.Load()); lv != hclog.NoLevel {
		return lv
	}
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn} {
		if l.log.Enabled(context.Background(), Level(lv)) {
			return lv
		}
	}
	return hclog.Error
}

func (l *logger) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

// StandardWriter returns a writer whose lines are logged at the level in
// their "[LEVEL]" prefix, or opts.ForceLevel when set.
func (l *logger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	force := hclog.NoLevel
	if opts != nil {
		force = opts.ForceLevel
	}
	return writerFunc(func(p []byte) (int, error) {
		for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
			level, msg := ParseLine(string(line), l.name)
			if force != hclog.NoLevel {
				level = force
			}
			l.Log(level, msg)
		}
		return len(p), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
