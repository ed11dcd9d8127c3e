package testbed

import (
	"slices"
	"strings"
	"testing"
)

func TestBinfmtUsable(t *testing.T) {
	tests := []struct {
		entry string
		want  string // "" for usable
	}{
		{"enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: POF\noffset 0\n", ""},
		{"enabled\ninterpreter /usr/bin/qemu-aarch64-static\nflags: F\n", ""},
		{"enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: PO\n", "without the F"},
		{"disabled\nflags: POF\n", "disabled"},
	}
	for _, tt := range tests {
		err := binfmtUsable(tt.entry)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("binfmtUsable(%q) = %v, want nil", tt.entry, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("binfmtUsable(%q) = %v, want an error containing %q", tt.entry, err, tt.want)
		}
	}
}

// An arm64 host's commands enter its mount namespace and chroot into its root before
// env; an amd64 host's enter only its network and UTS namespaces.
func TestPrefixArm64(t *testing.T) {
	n := names{235}
	st := &state{Instance: 235, AgentBinary: "/r/bin/shoal", Arm64Agent: "/r/bin/arm64/shoal"}
	amd := Host{Name: "n1", Index: 1, Netns: n.netns(1), UTS: n.utsPath(1), Arch: ArchAmd64}
	arm := Host{Name: "n2", Index: 2, Netns: n.netns(2), UTS: n.utsPath(2), Arch: ArchArm64,
		MountNS: n.mntnsPath(2), Root: n.hostDir(2) + "/root"}
	tests := []struct {
		h         Host
		wantAgent string
		wantEnter []string // the argv between nsenter's --uts and env
	}{
		{amd, "/r/bin/shoal", []string{"--"}},
		{arm, "/r/bin/arm64/shoal", []string{"--mount=/tmp/shoal-testbed-235/mntns/n2", "--", "/usr/sbin/chroot",
			"/tmp/shoal-testbed-235/n2/root", "/bin/sh", "-c", `cd "${PWD:-/}" 2>/dev/null || cd /; exec "$@"`, "shoal-testbed-n2"}},
	}
	for _, tt := range tests {
		argv := prefix(st, &tt.h)
		uts := slices.Index(argv, "--uts="+tt.h.UTS)
		env := slices.Index(argv, "env")
		if uts < 0 || env < uts {
			t.Fatalf("prefix of %s = %q: want nsenter --uts=%s … env", tt.h.Name, argv, tt.h.UTS)
		}
		if got := argv[uts+1 : env]; !slices.Equal(got, tt.wantEnter) {
			t.Errorf("prefix of %s: got %q between --uts and env, want %q", tt.h.Name, got, tt.wantEnter)
		}
		if got := st.agentBinary(&tt.h); got != tt.wantAgent {
			t.Errorf("agent of %s: got %s, want %s", tt.h.Name, got, tt.wantAgent)
		}
	}
}

func TestArm64Agent(t *testing.T) {
	if got, want := arm64Agent("/work/shoal/bin/shoal"), "/work/shoal/bin/arm64/shoal"; got != want {
		t.Errorf("arm64Agent: got %s, want %s", got, want)
	}
	tests := []struct {
		agent string
		share string   // arm64Share
		extra []string // what arm64Mounts adds to /proc, /sys, /dev, /tmp
	}{
		{"/work/shoal/bin/arm64/shoal", "/work/shoal", []string{"/work/shoal"}},
		{"/tmp/x/bin/arm64/shoal", "/tmp/x", nil}, // /tmp is mounted whole
		{"/opt/shoal-arm64/shoal", "/opt/shoal-arm64", []string{"/opt/shoal-arm64"}},
		{"/bin/arm64/shoal", "/bin/arm64", []string{"/bin/arm64"}},
		{"/usr/bin/arm64/shoal", "/usr/bin/arm64", []string{"/usr/bin/arm64"}},
	}
	for _, tt := range tests {
		share := arm64Share(tt.agent)
		if share != tt.share {
			t.Errorf("arm64Share(%s): got %s, want %s", tt.agent, share, tt.share)
		}
		want := append([]string{"/proc", "/sys", "/dev", "/tmp"}, tt.extra...)
		if got := arm64Mounts(share); !slices.Equal(got, want) {
			t.Errorf("arm64Mounts(%s): got %v, want %v", share, got, want)
		}
	}
}
