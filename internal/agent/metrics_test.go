package agent

import (
	"errors"
	"testing"
)

func TestCheckMetricsListen(t *testing.T) {
	tests := []struct {
		addr   string
		public bool
		ok     bool
	}{
		{"", false, true},
		{"127.0.0.1:9108", false, true},
		{"[::1]:9108", false, true},
		{"127.0.0.1:0", false, true},
		{"0.0.0.0:9108", false, false},
		{"10.0.0.5:9108", false, false},
		{"10.0.0.5:9108", true, true},
		{"localhost:9108", false, false}, // a name may resolve anywhere
		{"127.0.0.1", false, false},
	}
	for _, tt := range tests {
		err := CheckMetricsListen(tt.addr, tt.public)
		if got := err == nil; got != tt.ok {
			t.Errorf("CheckMetricsListen(%q, public %v): got %v, want ok %v", tt.addr, tt.public, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrMetricsListen) {
			t.Errorf("CheckMetricsListen(%q): got %v, want it to wrap %v", tt.addr, err, ErrMetricsListen)
		}
	}
}
