package jobdir

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
)

// TestAliveAsTheVectors: every line of testdata/jobdir/alive.tsv, padded as
// libshoal writes it, reads back as its record (alive.c writes each record as
// that line: make test-c, test_jobdir).
func TestAliveAsTheVectors(t *testing.T) {
	b, err := os.ReadFile("../../testdata/jobdir/alive.tsv")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 8 {
			t.Fatalf("alive.tsv line %d: %d fields, want 8", i+1, len(f))
		}
		var v [6]int64
		for j := range v {
			v[j], _ = strconv.ParseInt(f[1+j], 10, 64)
		}
		want := Alive{State: f[0], Calls: v[0], At: time.Duration(v[1]), Gap: time.Duration(v[2]),
			Every: time.Duration(v[3]), PID: int(v[4]), CPU: time.Duration(v[5])}
		padded := f[7] + strings.Repeat(" ", 159-len(f[7])) + "\n"
		got, ok := ParseAlive([]byte(padded))
		// A pid beyond pid_max is no process's: the vector of the largest
		// numbers is refused for it alone.
		if want.PID > 1<<22 {
			if ok {
				t.Errorf("line %d: pid %d read as a record", i+1, want.PID)
			}
			want.PID = 4242
			padded = strings.Replace(padded, "pid "+f[5], "pid 4242", 1)
			got, ok = ParseAlive([]byte(padded))
		}
		if !ok || got != want {
			t.Errorf("line %d: ParseAlive = %+v, %v; want %+v", i+1, got, ok, want)
		}
		n++
	}
	if n == 0 {
		t.Error("alive.tsv holds no record")
	}
	for _, bad := range []string{"", "alive run\n", "alive sleep calls 1 at 1 gap 1 every 1 pid 1 cpu 1\n",
		"alive run calls -1 at 1 gap 1 every 1 pid 1 cpu 1\n", "alive run calls 1 at 1 gap 1 every 1 pid 0 cpu 1\n",
		"alive run calls 1 at 1 gap 1 every 1 cpu 1 pid 1\n", "alive run calls 1 at 1 gap 1 every 1 pid 1 cpu 1 more\n",
		"alive run calls x at 1 gap 1 every 1 pid 1 cpu 1\n"} {
		if a, ok := ParseAlive([]byte(bad)); ok {
			t.Errorf("%q: %+v, want refused", bad, a)
		}
	}
}

func TestAliveSilent(t *testing.T) {
	rec := Alive{State: AliveRun, Calls: 40, At: 100 * time.Second, Gap: 200 * time.Millisecond, Every: 5 * time.Millisecond, PID: 7, CPU: 3 * time.Second}
	held := rec
	held.State = AliveHold
	done := rec
	done.State = AliveDone
	slow := rec
	slow.Gap = 2 * time.Second
	tests := []struct {
		name     string
		a        Alive
		now, cpu time.Duration
		want     bool
		wantBusy float64
	}{
		{"just called", rec, 100*time.Second + 300*time.Millisecond, 3 * time.Second, false, 0},
		{"stopped", rec, 104 * time.Second, 3 * time.Second, true, 0},
		{"polling in MPI", rec, 104 * time.Second, 5 * time.Second, true, 0.5},
		{"cpu unknown", rec, 104 * time.Second, -1, true, -1},
		{"held on purpose", held, time.Hour, 3 * time.Second, false, 0},
		{"finalizing", done, time.Hour, 3 * time.Second, false, 0},
		{"within twice a long gap", slow, 103 * time.Second, 3 * time.Second, false, 0},
		{"past twice a long gap", slow, 105 * time.Second, 3 * time.Second, true, 0},
	}
	for _, tt := range tests {
		got, ok := tt.a.Silent(3, tt.now, tt.cpu)
		if ok != tt.want {
			t.Errorf("%s: silent %v, want %v", tt.name, ok, tt.want)
			continue
		}
		if ok && (got.Busy != tt.wantBusy || got.Rank != 3 || got.Calls != 40 || got.For != job.Duration(tt.now-tt.a.At) || got.Gap != job.Duration(tt.a.Gap)) {
			t.Errorf("%s: got %+v, want busy %v", tt.name, got, tt.wantBusy)
		}
	}
}
