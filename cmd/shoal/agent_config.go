package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"
)

// loadAgentConfig sets the flags of fs that the TOML file at path names and
// the command line did not set. A key is a flag's name, its value of the
// flag's type: true or false, a number, or a string (durations and sizes
// too: "72h", "10G"). The error names the file, the line and the key.
func loadAgentConfig(flags *flag.FlagSet, o *agentOptions, path string) error {
	data, err := readAgentConfig(path)
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	if err != nil {
		return fmt.Errorf("--config %s: %w", path, err)
	}
	given := map[string]bool{}
	flags.Visit(func(f *flag.Flag) { given[f.Name] = true })
	return applyAgentConfig(flags, o, path, data, given)
}

// readAgentConfig reads the config file; run as root, it refuses one that
// another user owns or may write, as that user could run the agent's root
// with flags of theirs (--data-dir, --secret-file).
func readAgentConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		if st.Uid != 0 {
			return nil, fmt.Errorf("owned by uid %d, not root", st.Uid)
		}
		if fi.Mode().Perm()&0o022 != 0 {
			return nil, fmt.Errorf("mode %04o: writable by others than root", fi.Mode().Perm())
		}
	}
	return io.ReadAll(f)
}

// applyAgentConfig sets the flags of fs that data, the text of the file
// path, names, except those in given.
func applyAgentConfig(fs *flag.FlagSet, o *agentOptions, path string, data []byte, given map[string]bool) error {
	var keys map[string]toml.Primitive
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&keys)
	if err != nil {
		return configError(path, err)
	}
	for _, k := range md.Keys() {
		if len(k) != 1 { // inside a table, refused with the table
			continue
		}
		v := &configValue{fs: fs, o: o, name: k[0], given: given[k[0]]}
		if err := md.PrimitiveDecode(keys[k[0]], v); err != nil {
			return configError(path, err)
		}
	}
	return nil
}

// configError is err, from the TOML decoder or a configValue, as
// "FILE:LINE: what".
func configError(path string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s:%d: %s", path, pe.Position.Line, pe.Message)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// configValue sets the flag name from its value in the file.
type configValue struct {
	fs    *flag.FlagSet
	o     *agentOptions
	name  string
	given bool // on the command line, which wins
}

func (c *configValue) UnmarshalTOML(v any) error {
	switch v.(type) {
	case map[string]any, []map[string]any:
		return fmt.Errorf("[%s]: a table; the keys of shoal agent's config are at the top, in no table", c.name)
	}
	f := c.fs.Lookup(c.name)
	if f == nil || c.name == "config" {
		return fmt.Errorf("%s: not a key of shoal agent's config (its keys are the flags of 'shoal agent --help', without --config)", c.name)
	}
	var s string
	switch want := f.Value.(flag.Getter).Get().(type) {
	case bool:
		b, ok := v.(bool)
		if !ok {
			return c.badType(v, "true or false")
		}
		s = strconv.FormatBool(b)
	case int, uint64:
		n, ok := v.(int64)
		if !ok {
			return c.badType(v, "a whole number")
		}
		if _, unsigned := want.(uint64); unsigned && n < 0 {
			return fmt.Errorf("%s %d: want a whole number ≥ 0", c.name, n)
		}
		s = strconv.FormatInt(n, 10)
	case float64:
		switch n := v.(type) {
		case int64:
			s = strconv.FormatInt(n, 10)
		case float64:
			s = strconv.FormatFloat(n, 'g', -1, 64)
		default:
			return c.badType(v, "a number")
		}
	case time.Duration:
		str, ok := v.(string)
		if !ok {
			return c.badType(v, `a duration in quotes, such as "72h" or "30m"`)
		}
		if _, err := time.ParseDuration(str); err != nil {
			return fmt.Errorf("%s %q: want a duration such as \"72h\" or \"30m\"", c.name, str)
		}
		s = str
	default:
		str, ok := v.(string)
		if !ok {
			return c.badType(v, "a string in quotes")
		}
		s = str
	}
	if c.given {
		return nil
	}
	if err := c.fs.Set(c.name, s); err != nil {
		return fmt.Errorf("%s %q: %v", c.name, s, err)
	}
	if err := c.o.check(c.name); err != nil {
		return fmt.Errorf("%s %w", c.name, err)
	}
	return nil
}

func (c *configValue) badType(v any, want string) error {
	got := "a string"
	switch v.(type) {
	case bool:
		got = "true or false"
	case int64, float64:
		got = "a number"
	case []any:
		got = "an array"
	case time.Time:
		got = "a date or time"
	}
	return fmt.Errorf("%s: %s, want %s", c.name, got, want)
}

// agentLogger returns the agent's logger: text or JSON lines, debug ones
// too when verbose, to stderr or appended to the file path, which is then
// returned too (to reopen it on SIGHUP; nil for stderr).
func agentLogger(path, format string, verbose bool, stderr io.Writer) (*slog.Logger, *logFile, error) {
	w := stderr
	var file *logFile
	if path != "" {
		var err error
		if file, err = openLogFile(path); err != nil {
			return nil, nil, err
		}
		w = file
	}
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	if verbose {
		opts.Level = slog.LevelDebug
	}
	var h slog.Handler = slog.NewTextHandler(w, opts)
	if format == "json" {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(h), file, nil
}
