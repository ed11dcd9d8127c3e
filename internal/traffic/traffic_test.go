package traffic

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const vectorDir = "../../testdata/traffic"

// vector is one entry of testdata/traffic/vectors.json, which the C writer's test
// (lib/tests/test_traffic_file.c) reads too.
type vector struct {
	File         string      `json:"file"`
	OK           bool        `json:"ok"`
	Error        string      `json:"error"`
	Canonical    bool        `json:"canonical"` // the bytes libshoal writes for these values
	Rank         int         `json:"rank"`
	NRanks       int         `json:"nranks"`
	Epoch        uint64      `json:"epoch"`
	FirstEpoch   uint64      `json:"first_epoch"`
	SecondsMPI   float64     `json:"seconds_mpi"`
	SecondsTotal float64     `json:"seconds_total"`
	Peers        [][3]uint64 `json:"peers"`
}

func readVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(vectorDir, "vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var vs []vector
	if err := json.Unmarshal(b, &vs); err != nil {
		t.Fatal(err)
	}
	return vs
}

func TestVectors(t *testing.T) {
	vs := readVectors(t)
	listed := map[string]bool{"vectors.json": true}
	for _, v := range vs {
		listed[v.File] = true
		t.Run(v.File, func(t *testing.T) {
			f, err := os.Open(filepath.Join(vectorDir, v.File))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := Parse(f)
			if !v.OK {
				if got := ShortName(err); got != v.Error {
					t.Fatalf("Parse error = %v (%q), want %q", err, got, v.Error)
				}
				var le *LineError
				if !errors.As(err, &le) || le.Line < 1 {
					t.Errorf("Parse error %v does not name its line", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := File{Rank: v.Rank, NRanks: v.NRanks, Epoch: v.Epoch, FirstEpoch: v.FirstEpoch,
				SecondsMPI: v.SecondsMPI, SecondsTotal: v.SecondsTotal}
			for _, p := range v.Peers {
				want.Peers = append(want.Peers, Peer{int(p[0]), p[1], p[2]})
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Parse = %+v, want %+v", got, want)
			}
		})
	}
	// Every file in the directory is a vector that some reader checks.
	ents, err := os.ReadDir(vectorDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !listed[e.Name()] {
			t.Errorf("%s is not listed in vectors.json", e.Name())
		}
	}
}

func TestParseNamesTheLine(t *testing.T) {
	const header = "shoal-traffic 1 rank 0 nranks 3 epoch 2 first_epoch 1 seconds_mpi 0.5 seconds_total 1\n"
	tests := []struct {
		name, text string
		line       int
		err        error
		detail     string
	}{
		{"empty", "", 1, ErrTruncated, "empty"},
		{"cut peer line", header + "1 2 3\n2 5", 3, ErrTruncated, "newline"},
		{"version", strings.Replace(header, "traffic 1", "traffic 12", 1), 1, ErrVersion, "version 12"},
		{"version not a number", strings.Replace(header, "traffic 1", "traffic v1", 1), 1, ErrBadHeader, "version"},
		{"field name", strings.Replace(header, "epoch 2", "epochs 2", 1), 1, ErrBadHeader, `"epochs"`},
		{"rank", strings.Replace(header, "rank 0", "rank 3", 1), 1, ErrBadHeader, "rank 3 is not below nranks 3"},
		{"too many ranks", strings.Replace(header, "nranks 3", "nranks 1000001", 1), 1, ErrBadHeader, "nranks"},
		{"epoch too large", strings.Replace(header, "epoch 2", "epoch 100000000", 1), 1, ErrBadHeader, "epoch"},
		{"seconds", strings.Replace(header, "seconds_total 1", "seconds_total 1.", 1), 1, ErrBadHeader, "seconds_total"},
		{"third line", header + "1 2 3\n3 1 1\n", 3, ErrBadPeer, "peer \"3\""},
		{"order", header + "2 2 3\n1 1 1\n", 3, ErrBadPeer, "peer 1 after peer 2"},
		{"no messages", header + "1 0 0\n", 2, ErrBadPeer, "0 messages"},
		{"plus sign", header + "+1 0 1\n", 2, ErrBadPeer, "not a decimal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tt.text))
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("Parse error = %v, want a *LineError", err)
			}
			if le.Line != tt.line || !errors.Is(err, tt.err) || !strings.Contains(le.Detail, tt.detail) {
				t.Errorf("Parse error = %q (line %d), want %v at line %d mentioning %q",
					err, le.Line, tt.err, tt.line, tt.detail)
			}
		})
	}
}

func TestParseReadError(t *testing.T) {
	want := errors.New("disk gone")
	if _, err := Parse(failingReader{want}); !errors.Is(err, want) {
		t.Errorf("Parse error = %v, want %v", err, want)
	}
}

type failingReader struct{ err error }

func (r failingReader) Read([]byte) (int, error) { return 0, r.err }

// file builds a File of a 4-rank job's first run; peers are (rank, bytes, messages).
func file(rank int, epoch uint64, mpi, total float64, peers ...[3]uint64) File {
	f := File{Rank: rank, NRanks: 4, Epoch: epoch, FirstEpoch: 1, SecondsMPI: mpi, SecondsTotal: total}
	for _, p := range peers {
		f.Peers = append(f.Peers, Peer{int(p[0]), p[1], p[2]})
	}
	return f
}

func mustSum(t *testing.T, files ...File) Matrix {
	t.Helper()
	m, err := Sum(files)
	if err != nil {
		t.Fatalf("Sum: %v", err)
	}
	return m
}

func TestFlowsAndPairs(t *testing.T) {
	// A ring 0 → 1 → 2 → 3 → 0, with 1 ↔ 2 busier and a rank that talks to itself.
	m := mustSum(t,
		file(2, 3, 1, 4, [3]uint64{1, 500, 5}, [3]uint64{3, 100, 1}),
		file(0, 3, 1, 4, [3]uint64{1, 100, 1}),
		file(1, 3, 1, 4, [3]uint64{1, 7, 7}, [3]uint64{2, 500, 5}),
		file(3, 3, 1, 4, [3]uint64{0, 100, 1}),
	)
	wantFlows := []Flow{
		{1, 2, 500, 5}, {2, 1, 500, 5}, {0, 1, 100, 1}, {2, 3, 100, 1}, {3, 0, 100, 1}, {1, 1, 7, 7},
	}
	if got := m.Flows(); !reflect.DeepEqual(got, wantFlows) {
		t.Errorf("Flows = %v, want %v", got, wantFlows)
	}
	wantPairs := []Flow{{1, 2, 1000, 10}, {0, 1, 100, 1}, {0, 3, 100, 1}, {2, 3, 100, 1}}
	if got := m.Pairs(); !reflect.DeepEqual(got, wantPairs) {
		t.Errorf("Pairs = %v, want %v", got, wantPairs)
	}
	for _, tt := range []struct {
		n    int
		want []Flow
	}{{0, []Flow{}}, {-1, []Flow{}}, {2, wantFlows[:2]}, {10, wantFlows}} {
		if got := m.Top(tt.n); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Top(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
	if got := m.CommShare(); got != 0.25 {
		t.Errorf("CommShare = %v, want 0.25", got)
	}
}

func TestSumRejects(t *testing.T) {
	other := file(1, 3, 0, 1)
	other.NRanks = 8
	tests := []struct {
		name  string
		files []File
	}{
		{"rank counts", []File{file(0, 3, 0, 1), other}},
		{"one rank twice", []File{file(0, 3, 0, 1), file(2, 3, 0, 1), file(0, 4, 0, 1)}},
	}
	for _, tt := range tests {
		if _, err := Sum(tt.files); !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: Sum error = %v, want %v", tt.name, err, ErrMismatch)
		}
	}
	if m, err := Sum(nil); err != nil || len(m.Flows()) != 0 || m.CommShare() != 0 {
		t.Errorf("Sum(nil) = %+v, %v; want an empty matrix", m, err)
	}
}

func TestSub(t *testing.T) {
	older := mustSum(t,
		file(0, 2, 1, 10, [3]uint64{1, 100, 1}),
		file(1, 2, 2, 10, [3]uint64{0, 50, 2}, [3]uint64{2, 10, 1}),
	)
	newer := mustSum(t,
		file(0, 5, 4, 40, [3]uint64{1, 100, 1}, [3]uint64{3, 30, 3}),
		file(1, 5, 12, 40, [3]uint64{0, 250, 4}, [3]uint64{2, 10, 1}),
	)
	got, err := newer.Sub(older)
	if err != nil {
		t.Fatalf("Sub: %v", err)
	}
	want := Matrix{NRanks: 4, Files: []File{
		{Rank: 0, NRanks: 4, Epoch: 5, FirstEpoch: 1, Since: 2, SecondsMPI: 3, SecondsTotal: 30,
			Peers: []Peer{{3, 30, 3}}},
		{Rank: 1, NRanks: 4, Epoch: 5, FirstEpoch: 1, Since: 2, SecondsMPI: 10, SecondsTotal: 30,
			Peers: []Peer{{0, 200, 2}}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Sub = %+v, want %+v", got, want)
	}
	if got, want := got.Flows(), []Flow{{1, 0, 200, 2}, {0, 3, 30, 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Sub(...).Flows = %v, want %v", got, want)
	}
	if share := got.CommShare(); share != 13.0/60 {
		t.Errorf("CommShare = %v, want %v", share, 13.0/60)
	}
	// The snapshots are left as they were.
	if len(newer.Files[0].Peers) != 2 || newer.Files[1].Peers[0].Bytes != 250 {
		t.Errorf("Sub changed its receiver: %+v", newer)
	}
}

func TestSubRejects(t *testing.T) {
	base := func() []File {
		return []File{file(0, 2, 1, 10, [3]uint64{1, 100, 1}), file(1, 2, 1, 10)}
	}
	older := mustSum(t, base()...)
	relaunched := base()
	relaunched[1].FirstEpoch, relaunched[1].Epoch = 3, 4
	fewer := base()
	fewer[0].Peers[0].Messages = 0
	fewer[0].Peers[0].Bytes = 0
	gone := base()
	gone[0].Peers = nil
	otherRank := base()
	otherRank[1].Rank = 2
	diff, _ := mustSum(t, base()...).Sub(older)
	tests := []struct {
		name  string
		newer Matrix
		older Matrix
		want  error
	}{
		{"another run", mustSum(t, relaunched...), older, ErrOtherRun},
		{"older is newer", older, mustSum(t, file(0, 3, 1, 10), file(1, 3, 1, 10)), ErrMismatch},
		{"fewer messages", mustSum(t, fewer...), older, ErrMismatch},
		{"a peer gone", mustSum(t, gone...), older, ErrMismatch},
		{"other ranks", mustSum(t, otherRank...), older, ErrMismatch},
		{"fewer files", mustSum(t, base()[:1]...), older, ErrMismatch},
		{"a difference", diff, older, ErrMismatch},
	}
	for _, tt := range tests {
		if _, err := tt.newer.Sub(tt.older); !errors.Is(err, tt.want) {
			t.Errorf("%s: Sub error = %v, want %v", tt.name, err, tt.want)
		}
	}
}
