package staging

import (
	"bytes"
	"io"
	"testing"
	"time"
)

func TestStageNote(t *testing.T) {
	half := []NodeBytes{{Node: "n2", Sent: 20e6, Total: 40e6}, {Node: "n3", Sent: 40e6, Total: 40e6}, {Node: "n1"}}
	done := []NodeBytes{{Node: "n2", Sent: 40e6, Total: 40e6}}
	tests := []struct {
		name      string
		elapsed   time.Duration
		sinceSaid time.Duration
		said      bool
		nodes     []NodeBytes
		want      string
	}{
		{"quiet for the first 2 s", 1900 * time.Millisecond, 0, false, half, ""},
		{"past 2 s", 2100 * time.Millisecond, 0, false, half, "staging job files for 2s: 20.0 MB of 40.0 MB to n2, 40.0 MB of 40.0 MB to n3"},
		{"within 2 s of the last line", 3 * time.Second, time.Second, true, half, ""},
		{"2 s after the last line", 17 * time.Second, 2 * time.Second, true, half, "staging job files for 17s: 20.0 MB of 40.0 MB to n2, 40.0 MB of 40.0 MB to n3"},
		{"every byte sent", 5 * time.Second, 3 * time.Second, true, done, ""},
		{"nothing to send", 5 * time.Second, 0, false, nil, ""},
	}
	for _, tt := range tests {
		if got := Note(tt.elapsed, tt.sinceSaid, tt.said, tt.nodes); got != tt.want {
			t.Errorf("%s: Note = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestStageMeter(t *testing.T) {
	var m Meter
	m.Expect("n2", 5)
	m.Expect("n2", 3)
	if _, err := io.Copy(io.Discard, m.Reader("n2", bytes.NewReader([]byte("hello")))); err != nil {
		t.Fatal(err)
	}
	got := m.Snapshot()
	if len(got) != 1 || got[0] != (NodeBytes{Node: "n2", Sent: 5, Total: 8}) {
		t.Errorf("snapshot = %+v, want n2 sent 5 of 8", got)
	}
	var none *Meter
	none.Expect("n2", 1) // a nil meter counts nothing
	if r := none.Reader("n2", bytes.NewReader(nil)); r == nil {
		t.Error("a nil meter's reader is nil")
	}
}
