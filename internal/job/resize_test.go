package job

import (
	"encoding/json"
	"testing"
)

func TestResizedLine(t *testing.T) {
	tests := []struct {
		cause    string
		from, to int
		epoch    uint64
		why      string
		want     string
	}{
		{"node n3 lost (no answer for 80 ms)", 7, 4, 5, "one per core on n1, n2",
			"node n3 lost (no answer for 80 ms): shrinking from 7 to 4 ranks (one per core on n1, n2), from epoch 5"},
		{"rebalancing onto n3", 4, 7, 9, "one per core on n1, n2, n3",
			"rebalancing onto n3: growing from 4 to 7 ranks (one per core on n1, n2, n3), from epoch 9"},
		{"", 4, 2, 0, "", "shrinking from 4 to 2 ranks, from the beginning: no complete checkpoint"},
	}
	for _, tt := range tests {
		e := Resized(tt.cause, tt.from, tt.to, tt.epoch, tt.why)
		if e.Type != EventResize || e.Message != tt.want {
			t.Errorf("Resized: %s %q\nwant %s %q", e.Type, e.Message, EventResize, tt.want)
		}
		var data Resize
		if err := json.Unmarshal(e.Data, &data); err != nil || data != (Resize{From: tt.from, To: tt.to, Epoch: tt.epoch, Why: tt.why}) {
			t.Errorf("Resized data: %s (%v)", e.Data, err)
		}
	}
}
