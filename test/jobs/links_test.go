package jobs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/internal/testbed"
	"shoal/test/testenv"
	"shoal/test/watch"
)

// victims are files and directories of root's that a user's links point at: none
// may change, and nothing may appear beside them.
type victims struct {
	dir  string
	want map[string]victim // by path
}

type victim struct {
	data     []byte // nil: a directory
	mode     os.FileMode
	uid, gid uint32
}

func newVictims(t *testing.T) *victims {
	t.Helper()
	v := &victims{dir: filepath.Join(t.TempDir(), "root-only"), want: map[string]victim{}}
	if err := os.Mkdir(v.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return v
}

// file makes a victim file name, mode 0644 or 0600 by turns, and returns its path.
func (v *victims) file(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(v.dir, name)
	data := []byte("root's own " + name + "\n")
	mode := os.FileMode(0o644)
	if len(v.want)%2 == 1 {
		mode = 0o600
	}
	if err := os.WriteFile(path, data, mode); err != nil {
		t.Fatal(err)
	}
	v.want[path] = victim{data: data, mode: mode}
	return path
}

// directory makes a victim directory name holding one victim file.
func (v *victims) directory(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(v.dir, name)
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	v.want[path] = victim{mode: os.ModeDir | 0o700}
	inner := filepath.Join(path, "inside")
	if err := os.WriteFile(inner, []byte("root's own file in "+name+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v.want[inner] = victim{data: []byte("root's own file in " + name + "\n"), mode: 0o600}
	return path
}

// absent names a path in the victims' directory where nothing is: a link to it
// must not make root create it.
func (v *victims) absent(name string) string { return filepath.Join(v.dir, name) }

// check fails t for every victim whose bytes, mode or owner changed, and for
// anything new in the victims' directories.
func (v *victims) check(t *testing.T) {
	t.Helper()
	var found []string
	filepath.Walk(v.dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil || path == v.dir {
			return nil
		}
		found = append(found, path)
		want, ok := v.want[path]
		if !ok {
			t.Errorf("%s appeared among root's files (owner %d)", path, fi.Sys().(*syscall.Stat_t).Uid)
			return nil
		}
		st := fi.Sys().(*syscall.Stat_t)
		if fi.Mode() != want.mode || st.Uid != want.uid || st.Gid != want.gid {
			t.Errorf("%s: mode %v owner %d:%d, want %v %d:%d", path, fi.Mode(), st.Uid, st.Gid, want.mode, want.uid, want.gid)
		}
		if want.data != nil {
			if b, err := os.ReadFile(path); err != nil || !bytes.Equal(b, want.data) {
				t.Errorf("%s holds %d bytes beginning %.20q (%v), want root's %q", path, len(b), b, err, want.data)
			}
		}
		return nil
	})
	if len(found) != len(v.want) {
		var gone []string
		for p := range v.want {
			if _, err := os.Lstat(p); err != nil {
				gone = append(gone, p)
			}
		}
		sort.Strings(gone)
		if len(gone) > 0 {
			t.Errorf("root's files removed: %v", gone)
		}
	}
}

// plant is a shell script a user runs in a host: each line "PATH TARGET" makes
// PATH a link to TARGET (a file there goes, a directory is moved aside), and
// says whether it could.
const plantScript = `
while read -r path target; do
	if [ -d "$path" ] && [ ! -L "$path" ]; then mv "$path" "$path.aside" 2>/dev/null; fi
	if ln -sfn "$target" "$path" 2>/dev/null; then echo "planted $path"; else echo "refused $path"; fi
done
`

// plantAs runs plantScript as user in host for links (path → target), and
// returns how many it planted.
func plantAs(t *testing.T, b *testbed.Bed, host, user string, links map[string]string) int {
	t.Helper()
	var in strings.Builder
	for path, target := range links {
		fmt.Fprintf(&in, "%s %s\n", path, target)
	}
	cmd, err := b.Command(context.Background(), host, "setpriv", "--reuid="+user, "--regid="+user, "--clear-groups", "sh", "-c", plantScript)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = "/"
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("planting links in %s as %s: %v\n%s", host, user, err, out)
	}
	t.Logf("links in %s:\n%s", host, out)
	return strings.Count(string(out), "planted ")
}

// TestUsersLinksNotFollowed: a local user owns their job's directories on every
// node and may put anything there. While their job runs, each name the agents
// write, copy into, chown or remove there (the coordinator's launch files and
// manifest, the shards' spares, the checkpoint request, links among the job's
// files) is made a link to a file or directory of root's, or to a name where
// nothing of root's is yet. The user then kills one of their own ranks, so that
// the job relaunches: launch files written again, grants given, the old run
// fenced, copies made. Once it has ended, root collects its data. Root's files
// keep their bytes, mode and owner, nothing appears beside them, and the job
// still ends with the result of an uninterrupted run. A second job has the
// epoch it restarts from moved aside on one node and a link put in its place,
// where the agent stages the shard again: that job may fail (the user took its
// checkpoint away), root's files may not change.
func TestUsersLinksNotFollowed(t *testing.T) {
	const user = "shoal-test-a"
	localUser(t, user)
	b := up(t, 3)
	waitVoters(t, b, 3, time.Minute)
	v := newVictims(t)
	hosts, err := b.Hosts()
	if err != nil {
		t.Fatal(err)
	}

	heat := filepath.Join(testenv.Root, "build/examples/heat")
	args := []string{"--size", "400", "--steps", "6000", "--pace", "3000"}
	want := reference(t, "checksum", 2, append([]string{heat}, unpaced(args)...)...)
	j, newest := userHeat(t, b, user, args)
	planted := 0
	for _, h := range hosts {
		links := map[string]string{}
		if h.Name == "n1" {
			// The coordinator's files, written at every launch and epoch.
			coord := filepath.Join(h.DataDir, "coord", j.id)
			for _, f := range []string{"hostfile", "rankfile", "rsh-nodes.json", "manifest.tmp"} {
				links[filepath.Join(coord, f)] = v.file(t, h.Name+"-coord-"+f)
			}
			links[filepath.Join(coord, "launcher.log")] = v.absent(h.Name + "-created-by-root")
		}
		ckpt := filepath.Join(h.DataDir, "ckpt", j.id)
		spares, _ := filepath.Glob(filepath.Join(ckpt, "r*.spare"))
		for _, s := range spares {
			links[s] = v.file(t, h.Name+"-"+filepath.Base(s))
		}
		links[filepath.Join(ckpt, "request-checkpoint.tmp")] = v.file(t, h.Name+"-request")
		links[filepath.Join(ckpt, "elsewhere")] = v.directory(t, h.Name+"-ckpt-dir")
		jobDir := filepath.Join(h.DataDir, "jobs", j.id)
		links[filepath.Join(jobDir, "elsewhere")] = v.directory(t, h.Name+"-jobs-dir")
		links[filepath.Join(jobDir, "a-file")] = v.file(t, h.Name+"-jobs-file")
		planted += plantAs(t, b, h.Name, user, links)
	}
	if planted == 0 {
		t.Fatalf("the user could plant no link at all: the test tries nothing")
	}
	killRank1(t, b, user, j, newest)
	if code := j.Wait(3 * time.Minute); code != 0 {
		t.Errorf("the user's heat exited %d:\n%s", code, grepShoal(j.Output()))
	} else if got := field(j.Output(), "checksum"); got != want {
		t.Errorf("checksum = %q, want %q (uninterrupted run)", got, want)
	}
	v.check(t)

	// Root collects the job's data on every node, links and all.
	if out, err := b.Exec(context.Background(), "n1", filepath.Join(testenv.Root, "bin/shoal"), "gc", "--job", j.id); err != nil {
		t.Errorf("shoal gc --job %s: %v\n%s", j.id, err, out)
	}
	for _, h := range hosts {
		for _, d := range []string{"jobs", "ckpt", "coord"} {
			if _, err := os.Lstat(filepath.Join(h.DataDir, d, j.id)); err == nil {
				t.Errorf("%s: %s/%s is still there after shoal gc", h.Name, d, j.id)
			}
		}
	}
	v.check(t)

	// The epoch to restart from, replaced on n2 by a link to a directory of
	// root's: the agent stages rank 1's shard there again from a copy.
	j, newest = userHeat(t, b, user, args)
	n2, _ := b.Host("n2")
	plantAs(t, b, "n2", user, map[string]string{
		filepath.Join(n2.DataDir, "ckpt", j.id, fmt.Sprintf("e%08d", newest)): v.directory(t, "n2-epoch"),
	})
	killRank1(t, b, user, j, newest)
	code := j.Wait(3 * time.Minute)
	t.Logf("the job whose epoch was taken away exited %d:\n%s", code, grepShoal(j.Output()))
	v.check(t)
}

// userHeat starts heat as user on n1, two ranks on n1 and n2, and returns it
// once the newest epoch is the third or later: the older ones pruned, which
// leaves spares on the nodes.
func userHeat(t *testing.T, b *testbed.Bed, user string, args []string) (*job, int) {
	t.Helper()
	heat := filepath.Join(testenv.Root, "build/examples/heat")
	// Epochs 2 s apart: time to plant links and kill a rank before the next.
	argv := append([]string{"setpriv", "--reuid=" + user, "--regid=" + user, "--clear-groups", filepath.Join(testenv.Root, "bin/shoal"),
		"run", "-n", "2", "--ranks-per-node", "1", "--ckpt-interval", "2s", "--no-replan", "--", heat}, args...)
	cmd, err := b.Command(context.Background(), "n1", argv...)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Dir = "/"
	j := &job{Proc: watch.Start(t, cmd)}
	j.id = j.WaitLine(`^shoal: job ([^:]+):`, time.Minute)[1]
	return j, j.waitEpoch(3)
}

// killRank1 has user kill their job's rank 1 on n2, and waits for the job to
// say it restarts.
func killRank1(t *testing.T, b *testbed.Bed, user string, j *job, newest int) {
	t.Helper()
	n2, err := b.Host("n2")
	if err != nil {
		t.Fatal(err)
	}
	pid := testenv.RankPID(t, n2.DataDir, j.id, 1)
	if out, err := b.Exec(context.Background(), "n2", "setpriv", "--reuid="+user, "--regid="+user, "--clear-groups", "kill", "-9", strconv.Itoa(pid)); err != nil {
		t.Fatalf("the user's kill of their rank 1 (pid %d): %v\n%s", pid, err, out)
	}
	if m := j.WaitLine(`rank 1 killed by signal 9; restarting from epoch (\d+)`, time.Minute); m[1] != strconv.Itoa(newest) {
		t.Logf("the job restarts from epoch %s, not %d", m[1], newest)
	}
}
