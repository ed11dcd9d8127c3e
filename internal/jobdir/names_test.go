package jobdir

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"shoal/internal/job"
)

func TestParseInterval(t *testing.T) {
	got := ParseInterval([]byte("interval 4.5 auto 1 cost 0.0125 mtbf 900\n"))
	want := &job.Interval{Every: job.Duration(4500 * time.Millisecond), Auto: true, Cost: job.Duration(12500 * time.Microsecond), MTBF: job.Duration(15 * time.Minute)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "interval 4.5\n", "interval x auto 1 cost 0 mtbf 1\n", "interval 1 auto yes cost 0 mtbf 1\n",
		"interval 1 auto 1 cost -2 mtbf 1\n", "interval 1 auto 1 cost 0 mtbf 1e12\n", "period 1 auto 1 cost 0 mtbf 1\n"} {
		if iv := ParseInterval([]byte(bad)); iv != nil {
			t.Errorf("%q: %+v, want nil", bad, iv)
		}
	}
}

// TestNamesAsTheVectors: every file of a job's directory is named as
// testdata/jobdir/paths.tsv says, the list libshoal's jobdir.c checks too; the
// names read back give the epoch, rank, group and row they were made of.
func TestNamesAsTheVectors(t *testing.T) {
	b, err := os.ReadFile("../../testdata/jobdir/paths.tsv")
	if err != nil {
		t.Fatal(err)
	}
	d := Dir{Root: "/d", Job: "j"}
	kinds := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 4 {
			t.Fatalf("paths.tsv line %d: %q: want 4 fields", i+1, line)
		}
		kind, want := f[0], filepath.Join(d.Path(), f[3])
		epoch, _ := strconv.ParseUint(f[1], 10, 64)
		rank, _ := strconv.Atoi(f[2])
		var got string
		switch kind {
		case "epoch":
			got = d.EpochPath(epoch)
			if es := EpochsIn(dirEntries(filepath.Base(got))); len(es) != 1 || es[0] != epoch {
				t.Errorf("EpochsIn(%s) = %v, want [%d]", filepath.Base(got), es, epoch)
			}
		case "shard":
			got = d.ShardPath(epoch, rank)
			if r, ok := ParseShardName(filepath.Base(got)); !ok || r != rank {
				t.Errorf("ParseShardName(%s) = %d, %v; want %d", filepath.Base(got), r, ok, rank)
			}
		case "sums":
			got = SumsPath(d.ShardPath(epoch, rank))
		case "parity":
			group, row, _ := strings.Cut(f[2], ".")
			g, _ := strconv.Atoi(group)
			r, _ := strconv.Atoi(row)
			got = d.ParityPath(epoch, g, r)
			if gg, rr, ok := ParseParityName(filepath.Base(got)); !ok || gg != g || rr != r {
				t.Errorf("ParseParityName(%s) = %d, %d, %v; want %d, %d", filepath.Base(got), gg, rr, ok, g, r)
			}
		case "spare":
			got = d.SparePath(rank)
		case "stage":
			got = d.StagePath(rank)
		case "traffic":
			got = d.TrafficPath(rank)
		case "alive":
			got = d.AlivePath(rank)
			if r, ok := ParseAliveName(filepath.Base(got)); !ok || r != rank {
				t.Errorf("ParseAliveName(%s) = %d, %v; want %d", filepath.Base(got), r, ok, rank)
			}
		case "manifest", "finished", "progress", "interval", "request":
			got = filepath.Join(d.Path(), map[string]string{"manifest": Manifest, "finished": Finished,
				"progress": Progress, "interval": Interval, "request": Request}[kind])
		default:
			t.Errorf("paths.tsv line %d: kind %q: not a file this package names", i+1, kind)
			continue
		}
		kinds[kind] = true
		if got != want {
			t.Errorf("%s (epoch %s, rank %s): %s, want %s", kind, f[1], f[2], got, want)
		}
	}
	if len(kinds) < 13 {
		t.Errorf("paths.tsv names %d kinds, want every kind of file (13)", len(kinds))
	}
}

// dirEntries is a listing of directories named names.
func dirEntries(names ...string) []fs.DirEntry {
	var out []fs.DirEntry
	for _, n := range names {
		out = append(out, fs.FileInfoToDirEntry(dirInfo(n)))
	}
	return out
}

type dirInfo string

func (d dirInfo) Name() string       { return string(d) }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o755 }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return true }
func (d dirInfo) Sys() any           { return nil }
