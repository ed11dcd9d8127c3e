package epochs

import (
	"errors"
	"reflect"
	"testing"
)

func TestChoose(t *testing.T) {
	bad := errors.New("corrupt")
	tests := []struct {
		name        string
		complete    []uint64
		broken      map[uint64]bool
		want        uint64
		wantSkipped []uint64
		wantErr     error
	}{
		{"none", nil, nil, 0, nil, ErrNoEpoch},
		{"newest", []uint64{1, 2, 3}, nil, 3, nil, nil},
		{"unsorted input", []uint64{3, 5, 4}, nil, 5, nil, nil},
		{"newest corrupt falls back", []uint64{2, 3}, map[uint64]bool{3: true}, 2, []uint64{3}, nil},
		{"all corrupt", []uint64{2, 3}, map[uint64]bool{2: true, 3: true}, 0, []uint64{3, 2}, ErrNoEpoch},
		{"duplicates tried once", []uint64{4, 4, 3}, map[uint64]bool{4: true}, 3, []uint64{4}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var tried []uint64
			got, skipped, err := Choose(tt.complete, func(e uint64) error {
				tried = append(tried, e)
				if tt.broken[e] {
					return bad
				}
				return nil
			})
			if got != tt.want || !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("Choose(%v) = %d, %v; want %d, %v", tt.complete, got, err, tt.want, tt.wantErr)
			}
			var sk []uint64
			for _, s := range skipped {
				sk = append(sk, s.Epoch)
				if !errors.Is(s.Err, bad) {
					t.Errorf("skipped %d with %v, want the verify error", s.Epoch, s.Err)
				}
			}
			if !reflect.DeepEqual(sk, tt.wantSkipped) {
				t.Errorf("skipped %v, want %v", sk, tt.wantSkipped)
			}
			for i := 1; i < len(tried); i++ {
				if tried[i] >= tried[i-1] {
					t.Errorf("tried epochs %v, want strictly newest first", tried)
				}
			}
		})
	}
}
