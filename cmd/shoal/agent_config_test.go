package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"shoal/internal/node"
)

func TestAgentConfig(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    string
		args    []string          // the command line's
		want    map[string]string // flag → its value, as flag.Value prints it
		wantErr string
	}{
		{name: "every type",
			file: "init = true\njoin = \"a:7946,b:7946\"\ncores = 8\ncpus = 3.5\nspeed = 900\nkeep-failed = \"72h\"\nfile-quota = \"0\"\n",
			want: map[string]string{"init": "true", "join": "a:7946,b:7946", "cores": "8", "cpus": "3.5", "speed": "900", "keep-failed": "72h0m0s", "file-quota": "0"}},
		{name: "a whole number for a float", file: "cpus = 2\n", want: map[string]string{"cpus": "2"}},
		{name: "metrics on a local port", file: "metrics-listen = \"127.0.0.1:9108\"\n", want: map[string]string{"metrics-listen": "127.0.0.1:9108"}},
		{name: "the command line wins",
			file: "cores = 8\nprofile = \"wifi\"\n", args: []string{"--cores", "4"},
			want: map[string]string{"cores": "4", "profile": "wifi"}},
		{name: "a bad value the command line replaces is still an error",
			file: "cores = \"eight\"\n", args: []string{"--cores", "4"}, wantErr: "agent.toml:1: cores: a string, want a whole number"},
		{name: "comments and blank lines", file: "# the node\n\nname = \"n7\" # here\n", want: map[string]string{"name": "n7"}},
		{name: "unknown key", file: "cores = 8\n\nbind-addr = \"0.0.0.0:7946\"\n",
			wantErr: "agent.toml:3: bind-addr: not a key of shoal agent's config (its keys are the flags of 'shoal agent --help', without --config)"},
		{name: "config names no config", file: "config = \"other.toml\"\n",
			wantErr: "agent.toml:1: config: not a key of shoal agent's config (its keys are the flags of 'shoal agent --help', without --config)"},
		{name: "a table", file: "cores = 8\n[agent]\nbind = \"x\"\n",
			wantErr: "agent.toml:2: [agent]: a table; the keys of shoal agent's config are at the top, in no table"},
		{name: "bool as a string", file: "init = \"yes\"\n", wantErr: "agent.toml:1: init: a string, want true or false"},
		{name: "number as a string", file: "cores = \"8\"\n", wantErr: "agent.toml:1: cores: a string, want a whole number"},
		{name: "string as a number", file: "file-quota = 10\n", wantErr: "agent.toml:1: file-quota: a number, want a string in quotes"},
		{name: "duration unquoted", file: "gc-interval = 10\n", wantErr: `agent.toml:1: gc-interval: a number, want a duration in quotes, such as "72h" or "30m"`},
		{name: "bad duration", file: "keep-failed = \"3 days\"\n", wantErr: `agent.toml:1: keep-failed "3 days": want a duration such as "72h" or "30m"`},
		{name: "negative speed", file: "speed = -1\n", wantErr: "agent.toml:1: speed -1: want a whole number ≥ 0"},
		{name: "bad profile", file: "\nprofile = \"lte\"\n", wantErr: `agent.toml:2: profile "lte": want lan, wifi or local`},
		{name: "negative cores", file: "cores = -2\n", wantErr: "agent.toml:1: cores -2: must not be negative"},
		{name: "bad log format", file: "log-format = \"xml\"\n", wantErr: `agent.toml:1: log-format "xml": want text or json`},
		{name: "an array", file: "join = [\"a\", \"b\"]\n", wantErr: "agent.toml:1: join: an array, want a string in quotes"},
		{name: "not TOML", file: "cores = 8\ncores 9\n", wantErr: "agent.toml:2: expected '.' or '=', but got '9' instead"},
		{name: "a key twice", file: "cores = 8\ncores = 9\n", wantErr: "agent.toml:2: Key 'cores' has already been defined."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, o := agentFlags()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			given := map[string]bool{}
			for _, a := range tc.args {
				if n, ok := strings.CutPrefix(a, "--"); ok {
					given[n] = true
				}
			}
			err := applyAgentConfig(fs, o, "agent.toml", []byte(tc.file), given)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got error %v\nwant         %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			for name, want := range tc.want {
				if got := fs.Lookup(name).Value.String(); got != want {
					t.Errorf("%s: got %q, want %q", name, got, want)
				}
			}
		})
	}
}

// The config through the command: refusals are one line with exit 2.
func TestAgentConfigRefusals(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "agent.toml")
	os.WriteFile(bad, []byte("cores = 8\nbogus = 1\n"), 0o644)
	open := filepath.Join(dir, "open.toml")
	os.WriteFile(open, []byte("cores = 8\n"), 0o644)
	os.Chmod(open, 0o666)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"agent", "--config", bad}, "shoal agent: " + bad + ":2: bogus: not a key of shoal agent's config"},
		{[]string{"agent", "--config", filepath.Join(dir, "none.toml")}, "shoal agent: --config " + filepath.Join(dir, "none.toml") + ": no such file or directory"},
		{[]string{"agent", "--log-format", "xml"}, `shoal agent: --log-format "xml": want text or json`},
		{[]string{"agent", "--metrics-listen", "0.0.0.0:9108"}, `shoal agent: --metrics-listen "0.0.0.0:9108": agent: metrics listen address refused: not a loopback address`},
		{[]string{"agent", "--metrics-listen", "localhost"}, `shoal agent: --metrics-listen "localhost": agent: metrics listen address refused: want IP:PORT`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		if got := stderr.String(); code != exitUsage || !strings.HasPrefix(got, tc.want) || strings.Count(got, "\n") != 1 {
			t.Errorf("shoal %s: exit %d, stderr %q; want exit 2 and one line starting %q", strings.Join(tc.args, " "), code, got, tc.want)
		}
	}
	if os.Geteuid() != 0 {
		t.Skip("not root: a config file others may write is refused to root only")
	}
	var stdout, stderr bytes.Buffer
	want := "shoal agent: --config " + open + ": mode 0666: writable by others than root\n"
	if code := run([]string{"agent", "--config", open}, &stdout, &stderr); code != exitUsage || stderr.String() != want {
		t.Errorf("config file of mode 0666: exit %d, stderr %q; want exit 2, %q", code, &stderr, want)
	}
}

func TestAgentLogFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "agent.log")
	os.WriteFile(path, []byte("before\n"), 0o600)
	for i, format := range []string{"text", "json"} {
		log, file, err := agentLogger(path, format, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("started", "n", i)
		log.Debug("hidden")
		file.Close()
	}
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var rec struct {
		Level, Msg string
		N          int
	}
	if len(lines) != 3 || lines[0] != "before" || !strings.Contains(lines[1], `level=INFO msg=started n=0`) ||
		json.Unmarshal([]byte(lines[2]), &rec) != nil || rec != (struct {
		Level, Msg string
		N          int
	}{"INFO", "started", 1}) {
		t.Errorf("log file:\n%s\nwant the line before, a text line and a JSON line, both info", data)
	}

	fresh := filepath.Join(dir, "fresh.log")
	if _, file, err := agentLogger(fresh, "text", false, nil); err != nil {
		t.Fatal(err)
	} else {
		file.Close()
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a new log file: %v, %v; want mode 0600", fi.Mode(), err)
	}

	link := filepath.Join(dir, "link.log")
	os.Symlink(path, link)
	_, _, err := agentLogger(link, "text", false, nil)
	if want := link + ": a symbolic link; name the file itself"; err == nil || err.Error() != want {
		t.Errorf("a log file through a symbolic link: got %v, want %q", err, want)
	}
}

// An agent run from a config file: it takes its flags from the file (a
// label, the log) and the command line's over the file's (its name).
func TestAgentFromConfigFile(t *testing.T) {
	dir := t.TempDir()
	logPath := filepath.Join(dir, "agent.log")
	conf := filepath.Join(dir, "agent.toml")
	os.WriteFile(conf, []byte(fmt.Sprintf("init = true\nname = \"from-file\"\nlabels = \"room=lab\"\nlog-file = %q\nlog-format = \"json\"\n", logPath)), 0o644)
	a := startCLIAgent(t, "cfg1", "--config", conf)

	var l node.List
	if err := json.Unmarshal([]byte(runCLI(t, exitOK, "nodes", "--json", "--data-dir", a.dir)), &l); err != nil ||
		len(l.Nodes) != 1 || l.Nodes[0].Name != "cfg1" || l.Nodes[0].Labels["room"] != "lab" {
		t.Errorf("shoal nodes --json = %+v, %v; want one node cfg1 (the command line's name) labelled room=lab (the file's)", l, err)
	}
	if s := a.stderr.String(); s != "" {
		t.Errorf("the agent wrote to stderr with log-file set:\n%s", s)
	}
	data, err := os.ReadFile(logPath)
	first, _, _ := strings.Cut(string(data), "\n")
	var rec map[string]any
	if err != nil || json.Unmarshal([]byte(first), &rec) != nil || rec["msg"] == nil || rec["level"] == nil {
		t.Errorf("log file %s: %v\n%s\nwant JSON lines", logPath, err, data)
	}
}

// Under a Type=notify unit the agent says READY=1 once it is up, and its
// ranks do not inherit $NOTIFY_SOCKET.
func TestAgentNotifiesSystemd(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	l, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	startCLIAgent(t, "notify1", "--init")
	l.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 256)
	n, err := l.Read(buf)
	if got := string(buf[:n]); err != nil || got != "READY=1" {
		t.Errorf("systemd was told %q, %v; want READY=1", got, err)
	}
	if v, ok := os.LookupEnv("NOTIFY_SOCKET"); ok {
		t.Errorf("NOTIFY_SOCKET=%s left in the agent's environment, for its ranks", v)
	}
}
