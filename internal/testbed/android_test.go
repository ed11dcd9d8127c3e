package testbed

import (
	"slices"
	"testing"
)

// runFilter runs a seccomp program of the three instructions noSysVIPCFilter uses on
// one call, and returns what it decides.
func runFilter(t *testing.T, prog []sockFilter, arch, nr uint32) uint32 {
	t.Helper()
	var acc uint32
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.code {
		case 0x20:
			acc = map[uint32]uint32{0: nr, 4: arch}[in.k]
		case 0x15:
			if acc == in.k {
				pc += int(in.jt)
			} else {
				pc += int(in.jf)
			}
		case 0x06:
			return in.k
		default:
			t.Fatalf("instruction %d: unknown code %#x", pc, in.code)
		}
	}
	t.Fatal("the program ran off its end")
	return 0
}

func TestNoSysVIPCFilter(t *testing.T) {
	const arch, other, allow, trap = 0xc000003e, 0xc00000b7, 0x7fff0000, 0x00030000
	nrs := []uint32{29, 30, 31, 64, 65, 66, 67, 68, 69, 70, 71, 220}
	prog := noSysVIPCFilter(arch, nrs)
	for nr := uint32(0); nr < 450; nr++ {
		want := uint32(allow)
		if slices.Contains(nrs, nr) {
			want = trap
		}
		if got := runFilter(t, prog, arch, nr); got != want {
			t.Errorf("call %d: filter returns %#x, want %#x", nr, got, want)
		}
		if got := runFilter(t, prog, other, nr); got != allow {
			t.Errorf("call %d of another instruction set: filter returns %#x, want allow", nr, got)
		}
	}
}

func TestPhantomExcess(t *testing.T) {
	procs := func(starts ...uint64) []proc {
		var out []proc
		for i, s := range starts {
			out = append(out, proc{pid: 100 + i, start: s})
		}
		return out
	}
	tests := []struct {
		name  string
		procs []proc
		limit int
		want  []int
	}{
		{"under the limit", procs(1, 2, 3), 3, nil},
		{"the newest go", procs(5, 1, 9, 3), 2, []int{102, 100}},
		{"ties by pid, newest first", procs(1, 7, 7, 7), 2, []int{103, 102}},
		{"none", nil, 32, nil},
	}
	for _, tt := range tests {
		if got := phantomExcess(tt.procs, tt.limit); !slices.Equal(got, tt.want) {
			t.Errorf("%s: phantomExcess = %v, want %v", tt.name, got, tt.want)
		}
	}
}
