package testbed

import "testing"

func TestNeighNeed(t *testing.T) {
	def := neighLimits{Min: 128, Soft: 512, Hard: 1024}
	tests := []struct {
		hosts int
		cur   neighLimits
		want  neighLimits
		raise bool
	}{
		{3, def, def, false},
		{22, def, neighLimits{128, 512, 1024}, false},    // 506 entries: room enough
		{23, def, neighLimits{128, 552, 1104}, true},     // 552 entries
		{32, def, neighLimits{128, 1056, 2112}, true},    // past the default hard limit
		{128, def, neighLimits{128, 16512, 33024}, true}, // the 128-host testbed
		{128, neighLimits{128, 20000, 20000}, neighLimits{128, 20000, 33024}, true},
		{4, neighLimits{128, 66000, 99000}, neighLimits{128, 66000, 99000}, false}, // never lowered
	}
	for _, tt := range tests {
		got, raise := neighNeed(tt.hosts, tt.cur)
		if got != tt.want || raise != tt.raise {
			t.Errorf("neighNeed(%d, %+v) = %+v, %v; want %+v, %v", tt.hosts, tt.cur, got, raise, tt.want, tt.raise)
		}
		if got.Soft > got.Hard {
			t.Errorf("neighNeed(%d, %+v): soft limit %d above hard %d", tt.hosts, tt.cur, got.Soft, got.Hard)
		}
	}
}
