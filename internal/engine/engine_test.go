package engine

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"shoal/internal/userdir"
)

func TestParseTagged(t *testing.T) {
	tests := []struct {
		line   string
		rank   int
		stream string
		text   string
		ok     bool
	}{
		{"[1,3]<stdout>:checksum: 42", 3, "stdout", "checksum: 42", true},
		{"[12,0]<stderr>:", 0, "stderr", "", true},
		{"[1,10]<stdout>:a ]<b>: c", 10, "stdout", "a ]<b>: c", true},
		{"mpirun noticed that process rank 1", 0, "", "", false},
		{"[1,x]<stdout>:no", 0, "", "", false},
		{"[1]<stdout>:no", 0, "", "", false},
	}
	for _, tt := range tests {
		rank, stream, text, ok := ParseTagged(tt.line)
		if rank != tt.rank || stream != tt.stream || text != tt.text || ok != tt.ok {
			t.Errorf("ParseTagged(%q) = %d, %q, %q, %v; want %d, %q, %q, %v",
				tt.line, rank, stream, text, ok, tt.rank, tt.stream, tt.text, tt.ok)
		}
	}
}

func TestCopyTagged(t *testing.T) {
	in := "[1,0]<stdout>:hello\n---\n[1,1]<stdout>:world\n"
	var out, launcher bytes.Buffer
	if err := CopyTagged(strings.NewReader(in), &out, &launcher); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "[0] hello\n[1] world\n"; got != want {
		t.Errorf("ranks' output = %q, want %q", got, want)
	}
	if got, want := launcher.String(), "---\n"; got != want {
		t.Errorf("launcher output = %q, want %q", got, want)
	}
}

// TestCopyTaggedPartialLines feeds what Open MPI 4.1 really writes when rank 1 prints
// "abc" without a newline while rank 0 prints a line: mpirun tags each chunk and
// appends the next tag right after "abc". No rank line may merge with another rank's,
// and the raw "[1,0]<stdout>:" tag must not reach the user.
func TestCopyTaggedPartialLines(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"another rank's tag after a partial line",
			"[1,1]<stdout>:abc[1,0]<stdout>:hello\n[1,1]<stdout>:def\n[1,1]<stdout>:tail",
			"[0] hello\n[1] abcdef\n[1] tail\n"},
		{"the same rank continues its line",
			"[1,2]<stdout>:a[1,2]<stdout>:b[1,2]<stdout>:c\n",
			"[2] abc\n"},
		{"several tags on one line", "[1,0]<stdout>:x[1,1]<stdout>:y[1,2]<stdout>:z\n",
			"[2] z\n[0] x\n[1] y\n"},
		{"a tag-like text that is not a tag stays", "[1,0]<stdout>:see [1,x]<stdout>: here\n",
			"[0] see [1,x]<stdout>: here\n"},
		{"a partial line before the launcher's line",
			"[1,0]<stdout>:abc--- launcher\n",
			"[0] abc--- launcher\n"},
	}
	for _, tt := range tests {
		var out, launcher bytes.Buffer
		if err := CopyTagged(strings.NewReader(tt.in), &out, &launcher); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != tt.want {
			t.Errorf("%s: ranks' output = %q, want %q", tt.name, got, tt.want)
		}
		if strings.Contains(out.String(), "<stdout>:") && !strings.Contains(tt.in, "[1,x]") {
			t.Errorf("%s: a raw tag reached the user: %q", tt.name, out.String())
		}
	}
}

func TestClassify(t *testing.T) {
	exited := func(rank, code int, at int64) RankState {
		return RankState{Rank: rank, State: StateExited, Code: code, TimeNs: at}
	}
	killed := func(rank, sig int, at int64) RankState {
		return RankState{Rank: rank, State: StateSignaled, Signal: sig, TimeNs: at}
	}
	stopped := RankState{Rank: 3, State: StateStopped, Signal: 15, TimeNs: 50}
	tests := []struct {
		name      string
		states    []RankState
		code      int
		want      OutcomeKind
		causeRank int
	}{
		{"all exited 0", []RankState{exited(0, 0, 1), exited(1, 0, 2)}, 0, Succeeded, -1},
		{"remote ranks not seen", []RankState{exited(0, 0, 1)}, 0, Succeeded, -1},
		{"launcher failed, remote cause", []RankState{exited(0, 0, 1)}, 1, Unknown, -1},
		{"launcher failed", []RankState{exited(0, 0, 1), exited(1, 0, 2)}, 1, Unknown, -1},
		{"killed rank", []RankState{exited(0, 0, 1), killed(1, 9, 10), stopped}, 137, RankLost, 1},
		{"crash", []RankState{exited(0, 3, 10), stopped}, 3, AppFailed, 0},
		{"peer error after a kill is a consequence", []RankState{exited(0, 1, 20), killed(2, 9, 10), stopped}, 137, RankLost, 2},
		{"kill after a crash is a consequence", []RankState{exited(0, 1, 10), killed(2, 9, 20)}, 1, AppFailed, 0},
		{"only stopped ranks", []RankState{stopped}, 143, Unknown, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.states, 2, tt.code)
			cause := -1
			if got.Cause != nil {
				cause = got.Cause.Rank
			}
			if got.Kind != tt.want || cause != tt.causeRank {
				t.Errorf("Classify = kind %d cause %d, want kind %d cause %d", got.Kind, cause, tt.want, tt.causeRank)
			}
		})
	}
}

// A state reads back as written, but a rank said to run whose wrapper's process
// is gone reads as vanished.
func TestRankStateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	in := []RankState{
		{Rank: 0, PID: 10, State: StateExited, Code: 0, TimeNs: 5},
		{Rank: 2, PID: 12, State: StateSignaled, Signal: 9, TimeNs: 6},
		{Rank: 11, PID: os.Getpid(), State: StateRunning},
		{Rank: 12, PID: gone.Process.Pid, State: StateRunning},
	}
	for _, s := range in {
		if err := WriteRankState(dir, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadRankStates(userdir.Tree{Base: filepath.Dir(dir)}, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(in)
	want[3].State = StateVanished
	if !slices.Equal(got, want) {
		t.Errorf("read\n%+v\nwant\n%+v", got, want)
	}
}

// Across hosts, Open MPI's mpirun starts every daemon through the agent itself: a
// daemon, which a tree spawn past 64 hosts would have start others, has no
// $SHOAL_RSH_NODES. The tree is kept flat by its radix, not by plm_rsh_no_tree_spawn,
// which daemonizes the daemons out of the agent's launch.
func TestOpenMPICommandAcrossHosts(t *testing.T) {
	l := Launch{NRanks: 4, Program: "/p", Hostfile: "/h", RshAgent: "/s rsh"}
	got := strings.Join(OpenMPI{}.Command(l).Args, " ")
	if strings.Contains(got, "no_tree_spawn") {
		t.Errorf("Open MPI command %s: plm_rsh_no_tree_spawn has the daemons daemonize", got)
	}
	if want := "--mca plm_rsh_agent /s rsh --mca routed_radix 1024"; !strings.Contains(got, want) {
		t.Errorf("Open MPI command\n got %s\nwant it to hold %s", got, want)
	}
	local := strings.Join(OpenMPI{}.Command(Launch{NRanks: 2, Program: "/p"}).Args, " ")
	if strings.Contains(local, "plm_rsh") {
		t.Errorf("on one host mpirun starts no daemon: %s", local)
	}
}

// Across hosts, Hydra's ranks must keep their own host's environment (its
// data directory) and call back to an address, not a host name.
func TestMPICHCommandAcrossHosts(t *testing.T) {
	l := Launch{NRanks: 4, Program: "/p", Args: []string{"-x"}, Hostfile: "/h", RshAgent: "/s rsh", LocalAddr: "10.0.0.1", Env: []string{"A=1"}}
	got := strings.Join(MPICH{}.Command(l).Args, " ")
	want := "mpiexec.mpich -n 4 -prepend-pattern [1,%r]<stdout>: -f /h -launcher ssh -launcher-exec /s rsh -genvnone -localhost 10.0.0.1 -genv A 1 -genv UCX_MEM_EVENTS no -genv UCX_TLS ^sysv /p -x"
	if got != want {
		t.Errorf("MPICH command\n got %s\nwant %s", got, want)
	}
	local := strings.Join(MPICH{}.Command(Launch{NRanks: 2, Program: "/p"}).Args, " ")
	if strings.Contains(local, "-genvnone") || strings.Contains(local, "-localhost") {
		t.Errorf("on one host the ranks inherit the launcher's environment: %s", local)
	}
}

// No launch asks for SysV IPC, which an Android host answers with SIGSYS, unless the
// job's environment chooses otherwise.
func TestNoSysVIPC(t *testing.T) {
	tests := []struct {
		eng  Engine
		l    Launch
		want string
	}{
		{OpenMPI{}, Launch{NRanks: 2, Program: "/p"}, "--mca shmem mmap"},
		{OpenMPI{}, Launch{NRanks: 2, Program: "/p", Env: []string{"OMPI_MCA_shmem=posix"}}, "-x OMPI_MCA_shmem=posix"},
		{MPICH{}, Launch{NRanks: 2, Program: "/p"}, "-genv UCX_MEM_EVENTS no -genv UCX_TLS ^sysv"},
		{MPICH{}, Launch{NRanks: 2, Program: "/p", Env: []string{"UCX_TLS=tcp"}}, "-genv UCX_TLS tcp -genv UCX_MEM_EVENTS no /p"},
	}
	for _, tt := range tests {
		got := strings.Join(tt.eng.Command(tt.l).Args, " ")
		if !strings.Contains(got, tt.want) {
			t.Errorf("%s command for env %v\n got %s\nwant it to contain %s", tt.eng.Name(), tt.l.Env, got, tt.want)
		}
		if n := strings.Count(got, "shmem") + strings.Count(got, "UCX_TLS"); n > 1 {
			t.Errorf("%s command for env %v sets shmem or UCX_TLS %d times: %s", tt.eng.Name(), tt.l.Env, n, got)
		}
	}
}

func TestRankLists(t *testing.T) {
	for _, tt := range []struct {
		ranks []int
		want  string
	}{
		{nil, ""},
		{[]int{3}, "3"},
		{[]int{0, 1, 2, 3, 7}, "0-3,7"},
		{[]int{1, 3, 4, 6, 7, 8}, "1,3-4,6-8"},
	} {
		got := FormatRanks(tt.ranks)
		if got != tt.want {
			t.Errorf("FormatRanks(%v) = %q, want %q", tt.ranks, got, tt.want)
		}
		for r := 0; r < 10; r++ {
			in, err := RanksContain(got, r)
			if err != nil || in != slices.Contains(tt.ranks, r) {
				t.Errorf("RanksContain(%q, %d) = %v, %v", got, r, in, err)
			}
		}
	}
	for _, bad := range []string{"x", "1-", "3-1", "1,,2"} {
		if _, err := RanksContain(bad, 1); err == nil {
			t.Errorf("RanksContain(%q) accepted", bad)
		}
	}
}
