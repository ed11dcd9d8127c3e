package jobs

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
)

// TestMultiHost runs clean jobs, nothing taken away, of 6 ranks submitted on n1 to three
// hosts of 2 cores: each host gets 2 ranks, and the results are those of a run on one
// node. One testbed serves every part, to keep the test short.
func TestMultiHost(t *testing.T) {
	b := up(t, 3)
	shoal := filepath.Join(testenv.Root, "bin/shoal")
	spread := `launching 6 ranks on 3 nodes \(n1:0-1 n2:2-3 n3:4-5\)`

	t.Run("heat", func(t *testing.T) {
		heat := filepath.Join(testenv.Root, "build/examples/heat")
		// 4000 steps of at least 2.5 ms: 10 s or more, time to look at the nodes
		// meanwhile.
		args := []string{"--size", "600", "--steps", "4000", "--pace", "2500"}
		want := reference(t, "checksum", 6, append([]string{heat}, unpaced(args)...)...)
		j := submit(t, b, "n1", append([]string{"-n", "6", "--", heat}, args...)...)
		j.WaitLine(spread, time.Minute)
		// Every node's agent shows every node's ranks, whoever coordinates the job: ask n2
		// and n3, which do not.
		for _, h := range []string{"n2", "n3"} {
			waitRanks(t, b, h, "n1=2 n2=2 n3=2", 30*time.Second)
		}
		if table, err := b.Exec(context.Background(), "n2", shoal, "nodes"); err != nil {
			t.Fatal(err)
		} else if got := ranksColumn(t, string(table)); got != "n1=2 n2=2 n3=2" {
			t.Errorf("shoal nodes in n2 while the job runs shows ranks %q, want n1=2 n2=2 n3=2:\n%s", got, table)
		}
		if code := j.Wait(2 * time.Minute); code != 0 {
			t.Fatalf("job exited %d", code)
		}
		t.Logf("output:\n%s", grepShoal(j.Output()))
		if got := field(j.Output(), "checksum"); got != want {
			t.Errorf("checksum = %q, want %q (the same program on one node)", got, want)
		}
		for _, h := range []string{"n1", "n2", "n3"} {
			waitRanks(t, b, h, "n1=0 n2=0 n3=0", 30*time.Second)
		}
	})

	t.Run("nqueens", func(t *testing.T) {
		nq := filepath.Join(testenv.Root, "build/examples/nqueens")
		j := submit(t, b, "n1", "--job-id", "nq14", "-n", "6", "--", nq, "14")
		j.WaitLine(`^shoal: job nq14: 6 ranks of nqueens, coordinated by n1`, time.Minute)
		j.WaitLine(spread, time.Minute)
		if code := j.Wait(2 * time.Minute); code != 0 {
			t.Fatalf("job exited %d", code)
		}
		out := j.Output()
		// The job store keeps ended jobs (shoal jobs lists them): the id is taken.
		again := submit(t, b, "n1", "--job-id", "nq14", "-n", "6", "--", nq, "14")
		if code := again.Wait(time.Minute); code != 1 || !strings.Contains(again.Output(), `job id "nq14" is taken; choose another id`) {
			t.Errorf("a second job with id nq14: exit %d, output %q; want 1 and the id named as taken", code, again.Output())
		}
		if got := field(out, "solutions"); got != "365596" {
			t.Errorf("solutions = %q, want 365596 (OEIS A000170)", got)
		}
		if !strings.Contains(out, "check: matches the known count for N=14") {
			t.Error("nqueens did not confirm the known count")
		}
	})

	t.Run("file", func(t *testing.T) {
		prog := testenv.Built(t, "build/test/filecheck")
		// Random content: no node can hold it from an earlier run.
		input := filepath.Join(t.TempDir(), "input.txt")
		noise := make([]byte, 48<<10)
		rand.Read(noise)
		content := []byte("shoal --file test " + hex.EncodeToString(noise[:8]) + "\n" + hex.EncodeToString(noise) + "\n")
		if err := os.WriteFile(input, content, 0o644); err != nil {
			t.Fatal(err)
		}
		h := fnv.New64a()
		h.Write(content)
		wantRank := fmt.Sprintf(`%d bytes, fnv1a64 %016x, first line "%s"`, len(content), h.Sum64(), strings.SplitN(string(content), "\n", 2)[0])
		run := func() string {
			t.Helper()
			j := submit(t, b, "n1", "-n", "6", "--file", input, "--", prog, "input.txt")
			if code := j.Wait(2 * time.Minute); code != 0 {
				t.Fatalf("job exited %d", code)
			}
			out := j.Output()
			t.Logf("output:\n%s", out)
			hosts := map[string]int{}
			for _, m := range regexp.MustCompile(`(?m)^\[\d+\] filecheck: rank \d+ on (\S+): (.*)$`).FindAllStringSubmatch(out, -1) {
				hosts[m[1]]++
				if m[2] != wantRank {
					t.Errorf("a rank on %s read %s, want %s", m[1], m[2], wantRank)
				}
			}
			if fmt.Sprint(hosts) != "map[n1:2 n2:2 n3:2]" {
				t.Errorf("ranks read the file on %v, want 2 on each of n1, n2, n3", hosts)
			}
			if !strings.Contains(out, "filecheck: all 6 ranks read the same") {
				t.Error("rank 0 did not confirm that all ranks read the same bytes")
			}
			return out
		}

		out := run()
		staged := regexp.MustCompile(`(?m)^shoal: staged filecheck, input\.txt \([^)]+\) to n2, n3; n1 had them$`)
		if !staged.MatchString(out) {
			t.Errorf("first run: no line saying filecheck and input.txt were staged to n2 and n3:\n%s", grepShoal(out))
		}
		sum := sha256.Sum256(content)
		cached := map[string]os.FileInfo{}
		for _, node := range []string{"n2", "n3"} {
			host, err := b.Host(node)
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(host.DataDir, "files", hex.EncodeToString(sum[:])))
			if err != nil {
				t.Fatalf("input.txt in %s's file cache: %v", node, err)
			}
			cached[node] = fi
		}

		// The same run again: the nodes hold both files, so nothing is sent.
		out = run()
		if !strings.Contains(out, "shoal: job files already on every node (n1, n2, n3): nothing staged") || strings.Contains(out, "shoal: staged ") {
			t.Errorf("second run: want a line saying nothing was staged, and none staging a file:\n%s", grepShoal(out))
		}
		for node, before := range cached {
			host, _ := b.Host(node)
			fi, err := os.Stat(filepath.Join(host.DataDir, "files", hex.EncodeToString(sum[:])))
			if err != nil {
				t.Fatalf("input.txt in %s's file cache after the second run: %v", node, err)
			}
			// A file is stored by a rename over its name, so a new inode; its mtime
			// says when a job last used it (retention), and changes.
			if !os.SameFile(before, fi) {
				t.Errorf("%s's cached input.txt was written again (inode %d → %d)", node,
					before.Sys().(*syscall.Stat_t).Ino, fi.Sys().(*syscall.Stat_t).Ino)
			}
		}
	})

	t.Run("ranks-per-node", func(t *testing.T) {
		// One rank per node, and one per two cores: 3 ranks on three hosts of 2
		// cores, each rank on its own host (its own network namespace, so its own
		// address), where --max-oversubscribe 1 would put two on n1 and one on n2.
		for _, flags := range [][]string{{"--ranks-per-node", "1"}, {"--max-oversubscribe", "0.5"}} {
			j := submit(t, b, "n1", append(append([]string{"-n", "3"}, flags...), "--", "/bin/sh", "-c", "echo host: $(hostname -I | tr -d ' ')")...)
			if code := j.Wait(time.Minute); code != 0 {
				t.Fatalf("%v: job exited %d\n%s", flags, code, j.Output())
			}
			out := j.Output()
			if !strings.Contains(out, "launching 3 ranks on 3 nodes (n1:0 n2:1 n3:2)") {
				t.Errorf("%v: not one rank per node:\n%s", flags, grepShoal(out))
			}
			hosts := map[string]bool{}
			for _, m := range regexp.MustCompile(`(?m)^\[\d\] host: (\S+)$`).FindAllStringSubmatch(out, -1) {
				hosts[m[1]] = true
			}
			if len(hosts) != 3 {
				t.Errorf("%v: the ranks ran on %d hosts, want 3:\n%s", flags, len(hosts), out)
			}
		}
		// Four ranks cannot go one per node on three nodes: refused, naming the bound.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := b.Exec(ctx, "n1", shoal, "run", "-n", "4", "--ranks-per-node", "1", "--", "/bin/true")
		if err == nil || !strings.Contains(err.Error(), "4 nodes at --ranks-per-node 1; the live nodes (n1, n2, n3) have 6") {
			t.Errorf("4 ranks one per node on 3 nodes: %v\n%s\nwant a refusal naming --ranks-per-node", err, out)
		}
	})

	t.Run("open-files", func(t *testing.T) {
		// The launcher runs with a soft limit on open files of 1024 + 8 a host and
		// 8 a rank beside it (mpirun closes every descriptor below it in each
		// daemon it forks); the
		// rank it starts beside itself gets its agent's back from the wrapper, and
		// the daemons and ranks on the other nodes keep their agents'.
		show := `l=$(awk '{print $4}' /proc/$PPID/stat); ` +
			`echo "launcher: $(cat /proc/$l/comm) $(awk '/^Max open files/{print $4}' /proc/$l/limits) rank: $(ulimit -Sn)"`
		j := submit(t, b, "n1", "-n", "3", "--ranks-per-node", "1", "--", "/bin/sh", "-c", show)
		if code := j.Wait(time.Minute); code != 0 {
			t.Fatalf("job exited %d\n%s", code, j.Output())
		}
		lines := regexp.MustCompile(`(?m)^\[\d\] launcher: (\S+) (\d+) rank: (\d+)$`).FindAllStringSubmatch(j.Output(), -1)
		if len(lines) != 3 {
			t.Fatalf("%d ranks said their limits, want 3:\n%s", len(lines), j.Output())
		}
		mpirun := 0
		for _, m := range lines {
			launcher, rank := m[2], m[3]
			switch {
			case strings.HasPrefix(m[1], "mpirun"):
				mpirun++
				if launcher != "1056" || rank == "1056" {
					t.Errorf("beside mpirun: mpirun's soft limit %s, the rank's %s; want 1056 (3 hosts, 1 rank beside it) and the agent's", launcher, rank)
				}
			case launcher != rank:
				t.Errorf("beside %s: its soft limit %s, the rank's %s; want them the agent's, the same", m[1], launcher, rank)
			}
		}
		if mpirun != 1 {
			t.Errorf("%d ranks ran beside mpirun, want 1:\n%s", mpirun, j.Output())
		}
	})

	t.Run("too-many-ranks", func(t *testing.T) {
		// 7 ranks on 6 cores at the default --max-oversubscribe 1, with no
		// --wait-for-nodes: the job must fail at once, saying why, and run nothing.
		heat := filepath.Join(testenv.Root, "build/examples/heat")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd, err := b.Command(ctx, "n1", shoal, "run", "-n", "7", "--", heat, "--size", "100", "--steps", "10")
		if err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		var ee *exec.ExitError
		if ctx.Err() != nil || !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("shoal run -n 7 on 6 cores: %v (%v), want exit status 1 at once\nstdout:\n%s\nstderr:\n%s", err, ctx.Err(), &stdout, &stderr)
		}
		t.Logf("stderr: %s", &stderr)
		var lines []string // but the warning that the job runs as root
		for _, l := range strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n") {
			if !strings.HasPrefix(l, "shoal: warning: ") {
				lines = append(lines, l)
			}
		}
		want := regexp.MustCompile(`^shoal run: job heat-\w+ failed: too few nodes: 7 ranks need 7 cores at --max-oversubscribe 1; the live nodes \(n1, n2, n3\) have 6 \(.*--max-oversubscribe.*--wait-for-nodes.*\)$`)
		if len(lines) != 1 || !want.MatchString(lines[0]) {
			t.Errorf("stderr = %q, want one line matching %s", stderr.String(), want)
		}
		if strings.Contains(stdout.String(), "heat:") || strings.Contains(stdout.String(), "launching") {
			t.Errorf("ranks were launched:\n%s", &stdout)
		}
	})
}

// nodeRanks is what `shoal nodes --json` run in host says of each node's ranks:
// "n1=2 n2=2 n3=2".
func nodeRanks(b *testbed.Bed, host string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := b.Exec(ctx, host, filepath.Join(testenv.Root, "bin/shoal"), "nodes", "--json")
	if err != nil {
		return "", err
	}
	var l struct {
		Nodes []struct {
			Name  string `json:"name"`
			Ranks int    `json:"ranks"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return "", fmt.Errorf("shoal nodes --json in %s: %v: %q", host, err, out)
	}
	var s []string
	for _, n := range l.Nodes {
		s = append(s, fmt.Sprintf("%s=%d", n.Name, n.Ranks))
	}
	sort.Strings(s)
	return strings.Join(s, " "), nil
}

// waitRanks polls `shoal nodes --json` in host until it shows want.
func waitRanks(t *testing.T, b *testbed.Bed, host, want string, timeout time.Duration) {
	t.Helper()
	var got string
	var err error
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if got, err = nodeRanks(b, host); err == nil && got == want {
			return
		}
	}
	t.Fatalf("shoal nodes in %s shows ranks %q (%v), want %q", host, got, err, want)
}

// ranksColumn reads the NAME and RANKS columns of `shoal nodes`: "n1=2 n2=2 n3=2".
func ranksColumn(t *testing.T, table string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(table), "\n")
	head := strings.Fields(lines[0])
	col := slices.Index(head, "RANKS")
	if col < 0 {
		t.Fatalf("shoal nodes: no RANKS column:\n%s", table)
	}
	var s []string
	for _, l := range lines[1:] {
		if f := strings.Fields(l); len(f) == len(head) {
			s = append(s, f[0]+"="+f[col])
		}
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}
