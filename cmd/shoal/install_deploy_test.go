package main

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// make install puts deploy/ in place (scripts/install-deploy.sh): the unit
// where systemd finds it, running the installed shoal with the installed
// configuration; the configuration as an example, and as agent.toml only
// where there is none; make uninstall removes them, but a configuration that
// was edited.
func TestInstallDeploy(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash to run scripts/install-deploy.sh")
	}
	shipped, err := os.ReadFile("../../deploy/agent.toml")
	if err != nil {
		t.Fatal(err)
	}
	script := func(t *testing.T, dest, prefix, mode string) string {
		t.Helper()
		cmd := exec.Command("../../scripts/install-deploy.sh", mode)
		cmd.Env = append(os.Environ(), "DESTDIR="+dest, "PREFIX="+prefix, "BINDIR=", "SYSCONFDIR=", "SYSTEMDUNITDIR=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("scripts/install-deploy.sh %s (PREFIX=%s): %v\n%s", mode, prefix, err, out)
		}
		return string(out)
	}
	read := func(t *testing.T, path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	files := func(root string) []string {
		var out []string
		filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(root, path)
				out = append(out, rel)
			}
			return err
		})
		return out
	}
	for _, tt := range []struct {
		prefix, unit, exec, config string
	}{
		{"/usr/local", "usr/local/lib/systemd/system/shoal-agent.service", "/usr/local/bin/shoal agent --config /etc/shoal/agent.toml", "etc/shoal"},
		{"/usr", "usr/lib/systemd/system/shoal-agent.service", "/usr/bin/shoal agent --config /etc/shoal/agent.toml", "etc/shoal"},
		{"/opt/shoal", "opt/shoal/lib/systemd/system/shoal-agent.service", "/opt/shoal/bin/shoal agent --config /opt/shoal/etc/shoal/agent.toml", "opt/shoal/etc/shoal"},
	} {
		t.Run(tt.prefix, func(t *testing.T) {
			dest := t.TempDir()
			script(t, dest, tt.prefix, "install")
			unit := read(t, filepath.Join(dest, tt.unit))
			if !strings.Contains(unit, "\nExecStart="+tt.exec+"\n") || !strings.Contains(unit, "\nType=notify\n") {
				t.Errorf("%s: want ExecStart=%s, the rest as deploy/ has it:\n%s", tt.unit, tt.exec, unit)
			}
			conf := filepath.Join(dest, tt.config)
			for _, name := range []string{"agent.toml", "agent.toml.example"} {
				if got := read(t, filepath.Join(conf, name)); got != string(shipped) {
					t.Errorf("%s/%s is not deploy/agent.toml", tt.config, name)
				}
			}
			// An edited configuration is kept, by an install and an uninstall.
			edited := string(shipped) + "init = true\n"
			os.WriteFile(filepath.Join(conf, "agent.toml"), []byte(edited), 0o644)
			if out := script(t, dest, tt.prefix, "install"); !strings.Contains(out, "kept "+filepath.Join(conf, "agent.toml")) {
				t.Errorf("install over an edited agent.toml says %q, want that it kept it", out)
			}
			if got := read(t, filepath.Join(conf, "agent.toml")); got != edited {
				t.Errorf("install wrote over an edited agent.toml")
			}
			script(t, dest, tt.prefix, "uninstall")
			if got := strings.Join(files(dest), " "); got != filepath.Join(tt.config, "agent.toml") {
				t.Errorf("after uninstall with an edited agent.toml: files %q, want only it", got)
			}
			// An unchanged one goes with the rest.
			script(t, dest, tt.prefix, "install")
			os.WriteFile(filepath.Join(conf, "agent.toml"), shipped, 0o644)
			script(t, dest, tt.prefix, "uninstall")
			if got := files(dest); len(got) != 0 {
				t.Errorf("after uninstall: %q left", got)
			}
		})
	}
}
