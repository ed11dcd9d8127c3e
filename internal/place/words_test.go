package place

import (
	"testing"

	"shoal/internal/job"
)

func TestPerIteration(t *testing.T) {
	for _, c := range []struct {
		secs float64
		want string
	}{
		{0.651, "651 ms"}, {0.0004, "0 ms"}, {0.84, "840 ms"}, {0.88, "880 ms"}, {1.494, "1.49 s"}, {12.3, "12 s"},
	} {
		if got := PerIteration(c.secs); got != c.want {
			t.Errorf("PerIteration(%g) = %q, want %q", c.secs, got, c.want)
		}
	}
}

// Why ranks do not fit: the cores they need at the job's oversubscription,
// and the nodes at its ranks per node, against the live nodes' cores.
func TestTooFew(t *testing.T) {
	tests := []struct {
		name string
		spec job.Spec
		live []Node
		want string
	}{
		{"a core each", job.Spec{Ranks: 6}, nodes("n2", 2, "n1", 2),
			"too few nodes: 6 ranks need 6 cores at --max-oversubscribe 1; the live nodes (n1, n2) have 4"},
		{"two per core", job.Spec{Ranks: 9, MaxOversubscribe: 2}, nodes("n1", 4),
			"too few nodes: 9 ranks need 5 cores at --max-oversubscribe 2; the live nodes (n1) have 4"},
		{"ranks per node", job.Spec{Ranks: 5, RanksPerNode: 2}, nodes("n1", 8, "n2", 8),
			"too few nodes: 5 ranks need 5 cores at --max-oversubscribe 1 and 3 nodes at --ranks-per-node 2; the live nodes (n1, n2) have 16"},
		{"no node", job.Spec{Ranks: 2}, nil,
			"too few nodes: 2 ranks need 2 cores at --max-oversubscribe 1; the live nodes (none) have 0"},
	}
	for _, tt := range tests {
		if got := TooFew(tt.spec, tt.live); got != tt.want {
			t.Errorf("%s: TooFew =\n %q\nwant\n %q", tt.name, got, tt.want)
		}
	}
}

func TestOversubscribed(t *testing.T) {
	want := "warning: 6 ranks on 4 cores of n1, n2: oversubscribed, the job runs slower (--wait-for-nodes waits for joins instead)"
	if got := Oversubscribed(6, nodes("n2", 1, "n1", 3)); got != want {
		t.Errorf("Oversubscribed =\n %q\nwant\n %q", got, want)
	}
}
