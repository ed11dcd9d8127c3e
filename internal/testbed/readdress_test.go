package testbed

import (
	"errors"
	"fmt"
	"testing"
)

func TestChooseAddr(t *testing.T) {
	all := map[string]bool{}
	for i := 2; i <= 254; i++ {
		all[fmt.Sprintf("10.78.5.%d", i)] = true
	}
	three := map[string]bool{"10.78.5.11": true, "10.78.5.12": true, "10.78.5.13": true}
	tests := []struct {
		name    string
		k       int
		to      string
		taken   map[string]bool
		want    string
		wantErr error
	}{
		{name: "default", k: 2, taken: three, want: "10.78.5.102"},
		{name: "default taken: next", k: 2, taken: map[string]bool{"10.78.5.102": true, "10.78.5.103": true}, want: "10.78.5.104"},
		{name: "wraps past .254", k: 154, taken: map[string]bool{"10.78.5.254": true}, want: "10.78.5.2"},
		{name: "back to the old default", k: 1, taken: map[string]bool{"10.78.5.11": true}, want: "10.78.5.101"},
		{name: "to", k: 2, to: "10.78.5.50", taken: three, want: "10.78.5.50"},
		{name: "to: another host's", k: 2, to: "10.78.5.13", taken: three, wantErr: ErrInvalidConfig},
		{name: "to: the bridge", k: 2, to: "10.78.5.1", taken: three, wantErr: ErrInvalidConfig},
		{name: "to: broadcast", k: 2, to: "10.78.5.255", taken: three, wantErr: ErrInvalidConfig},
		{name: "to: another subnet", k: 2, to: "10.78.6.50", taken: three, wantErr: ErrInvalidConfig},
		{name: "to: not an address", k: 2, to: "n3", taken: three, wantErr: ErrInvalidConfig},
		{name: "to: IPv6", k: 2, to: "fe80::1", taken: three, wantErr: ErrInvalidConfig},
		{name: "full", k: 2, taken: all, wantErr: ErrNoFreeAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chooseAddr("10.78.5", tt.k, tt.to, tt.taken)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("chooseAddr(k=%d, to=%q) error = %v, want %v", tt.k, tt.to, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("chooseAddr(k=%d, to=%q) = %q, want %q", tt.k, tt.to, got, tt.want)
			}
		})
	}
}
