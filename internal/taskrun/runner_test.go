package taskrun

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"shoal/internal/farm"
	"shoal/internal/results"
)

// serve runs a runner of slots over reqs, with a script "task.sh" in its
// directory, and returns its replies by task, their outputs and its stderr.
func serve(t *testing.T, slots int, script string, reqs ...farm.Request) (map[int]farm.Reply, map[int]string, string, *results.Store) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "task.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for _, r := range reqs {
		if err := farm.WriteRequest(&in, r); err != nil {
			t.Fatal(err)
		}
	}
	store := &results.Store{Dir: t.TempDir()}
	r := Runner{Job: "j", Slots: slots, Dir: dir, Store: store, Env: []string{"FROM_RUNNER=yes"}}
	var out, errOut bytes.Buffer
	if err := r.Serve(&in, &out, &errOut); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	replies, outputs := map[int]farm.Reply{}, map[int]string{}
	br := bufio.NewReader(&out)
	for {
		rep, b, err := farm.ReadReply(br, results.MaxSize)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ReadReply: %v", err)
		}
		replies[rep.Task], outputs[rep.Task] = rep, string(b)
	}
	return replies, outputs, errOut.String(), store
}

func TestRunnerRunsTasks(t *testing.T) {
	script := `#!/bin/sh
echo "out $1 $SHOAL_TASK $FROM_RUNNER $EXTRA"
echo "err line of $1" >&2
printf 'no newline' >&2
exit $2
`
	replies, outputs, stderr, store := serve(t, 2, script,
		farm.Request{Task: 0, Argv: []string{"task.sh", "a", "0"}, Env: map[string]string{"EXTRA": "x"}},
		farm.Request{Task: 1, Argv: []string{"task.sh", "b", "3"}},
		farm.Request{Task: 2, Argv: []string{"missing-program"}},
		farm.Request{Task: 7, Argv: []string{"/bin/sh", "-c", "kill -9 $$"}},
	)
	if got := outputs[0]; got != "out a 0 yes x\n" || replies[0].ExitCode != 0 || !replies[0].Stored {
		t.Errorf("task 0: output %q, reply %+v; want its line, exit 0, stored", got, replies[0])
	}
	if replies[1].ExitCode != 3 || outputs[1] != "" || replies[1].Stored {
		t.Errorf("task 1: reply %+v, output %q; want exit 3, no output kept, not stored", replies[1], outputs[1])
	}
	if replies[2].ExitCode != 127 || replies[2].Error == "" {
		t.Errorf("missing program: reply %+v; want exit 127 and the error", replies[2])
	}
	if replies[7].Signal != 9 || replies[7].ExitCode != 137 {
		t.Errorf("killed task: reply %+v; want signal 9, exit 137", replies[7])
	}
	for _, want := range []string{"[task 0] err line of a\n", "[task 0] no newline\n", "[task 1] err line of b\n", "[task 2] shoal: cannot run missing-program"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	rc, _, _, err := store.Open("j", 0)
	if err != nil {
		t.Fatalf("stored result of task 0: %v", err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != outputs[0] {
		t.Errorf("stored result %q, want %q", b, outputs[0])
	}
	if tasks, _ := store.List("j"); len(tasks) != 1 {
		t.Errorf("stored results of tasks %v, want only task 0's", tasks)
	}
}

// No more than Slots tasks run at once, and every task runs.
func TestRunnerSlots(t *testing.T) {
	dir := t.TempDir()
	// Each task notes the tasks running beside it: files in dir/running.
	script := `#!/bin/sh
mkdir -p ` + dir + `/running
touch ` + dir + `/running/$1
sleep 0.05
ls ` + dir + `/running | wc -l
rm ` + dir + `/running/$1
`
	var reqs []farm.Request
	for i := 0; i < 12; i++ {
		reqs = append(reqs, farm.Request{Task: i, Argv: []string{"task.sh", string(rune('a' + i))}})
	}
	replies, outputs, _, _ := serve(t, 3, script, reqs...)
	if len(replies) != 12 {
		t.Fatalf("%d replies, want 12", len(replies))
	}
	var most []string
	for _, o := range outputs {
		most = append(most, strings.TrimSpace(o))
	}
	sort.Strings(most)
	if top := most[len(most)-1]; top > "3" {
		t.Errorf("at most %s tasks ran at once, want at most 3 (slots)", top)
	}
}

func TestRunnerRefusesOtherVersions(t *testing.T) {
	r := Runner{Job: "j", Slots: 1, Dir: t.TempDir()}
	in := strings.NewReader(`{"v":99,"task":0,"argv":["x"]}` + "\n")
	if err := r.Serve(in, io.Discard, io.Discard); err == nil {
		t.Error("Serve of a request of another version: no error")
	}
}
