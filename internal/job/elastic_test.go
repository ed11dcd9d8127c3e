package job

import (
	"strings"
	"testing"
)

func TestElasticRange(t *testing.T) {
	tests := []struct {
		spec    Spec
		allowed []int
		denied  []int
		invalid string // in Validate's error; "" when valid
	}{
		{Spec{Ranks: 7}, []int{7}, []int{6, 8}, ""},
		{Spec{Ranks: 7, MinRanks: 2, MaxRanks: 8}, []int{2, 4, 7, 8}, []int{1, 9}, ""},
		{Spec{MinRanks: 2, MaxRanks: 8, RankMultiple: 2}, []int{2, 4, 8}, []int{3, 7, 10}, ""},
		{Spec{MaxRanks: 16, RanksPow2: true}, []int{1, 2, 8, 16}, []int{3, 6, 12, 32}, ""},
		{Spec{MinRanks: 3}, []int{3, 100, MaxRanks}, []int{2, MaxRanks + 1}, ""},
		{Spec{Ranks: 5, MinRanks: 2, MaxRanks: 8, RankMultiple: 2}, nil, nil, "ranks 5: not a count the job allows (2 to 8 ranks, a multiple of 2)"},
		{Spec{MinRanks: 9, MaxRanks: 4}, nil, nil, "min_ranks 9 above max_ranks 4"},
		{Spec{MinRanks: 5, MaxRanks: 7, RanksPow2: true}, nil, nil, "no rank count satisfies 5 to 7 ranks, a power of two"},
		{Spec{MinRanks: -1, MaxRanks: 4}, nil, nil, "min_ranks -1, max_ranks 4"},
	}
	for _, tt := range tests {
		s := tt.spec
		s.Argv = []string{"heat"}
		err := s.Validate()
		if tt.invalid == "" && err != nil || tt.invalid != "" && (err == nil || !strings.Contains(err.Error(), tt.invalid)) {
			t.Errorf("%+v: Validate = %v, want %q", tt.spec, err, tt.invalid)
		}
		for _, n := range tt.allowed {
			if !s.Allows(n) {
				t.Errorf("%+v: Allows(%d) = false, want true", tt.spec, n)
			}
		}
		for _, n := range tt.denied {
			if s.Allows(n) {
				t.Errorf("%+v: Allows(%d) = true, want false", tt.spec, n)
			}
		}
	}
}
