package job

import (
	"regexp"
	"testing"
)

func TestNewID(t *testing.T) {
	for _, tt := range []struct{ program, want string }{
		{"heat", `^heat-[0-9a-f]{6}$`},
		{"/usr/bin/heat", `^heat-[0-9a-f]{6}$`},
		{"my prog$", `^my_prog_-[0-9a-f]{6}$`},
		{string(make([]byte, 60)), `^_{50}-[0-9a-f]{6}$`},
	} {
		if got := NewID(tt.program); !regexp.MustCompile(tt.want).MatchString(got) {
			t.Errorf("NewID(%q) = %q, want a match of %s", tt.program, got, tt.want)
		}
	}
	if a, b := NewID("heat"), NewID("heat"); a == b {
		t.Errorf("NewID twice = %q both times, want two ids", a)
	}
}
