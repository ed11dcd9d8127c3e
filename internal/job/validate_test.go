package job

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestValidateRefusesControlBytes: a NUL or another control character in a
// word of argv, an environment name or value, a file's name, a task or any
// other text of a job that reaches a command line, a file name or a log is
// refused naming the field and the byte; a tab passes in words, values and tasks,
// never in names.
func TestValidateRefusesControlBytes(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	tests := []struct {
		name string
		edit func(*Spec)
		want string // "" for accepted
	}{
		{"a NUL in a word", func(s *Spec) { s.Argv = []string{"./heat", "--in", "a\x00b"} }, "argv[2]: contains a NUL byte (byte 1)"},
		{"a NUL in the program", func(s *Spec) { s.Argv = []string{"./he\x00at"} }, "argv[0]: contains a NUL byte (byte 4)"},
		{"an escape in a word", func(s *Spec) { s.Argv = []string{"./heat", "\x1b[2J"} }, "argv[1]: contains control byte 0x1b (byte 0)"},
		{"a newline in a word", func(s *Spec) { s.Argv = []string{"./heat", "a\nb"} }, "argv[1]: contains control byte 0x0a (byte 1)"},
		{"a carriage return in a word", func(s *Spec) { s.Argv = []string{"./heat", "ok\r"} }, "argv[1]: contains control byte 0x0d (byte 2)"},
		{"DEL in a word", func(s *Spec) { s.Argv = []string{"./heat", "\x7f"} }, "argv[1]: contains control byte 0x7f (byte 0)"},
		{"a C1 control in a word", func(s *Spec) { s.Argv = []string{"./heat", "é\u009b2J"} }, "argv[1]: contains control character U+009B (byte 2)"},
		{"the first bad word only", func(s *Spec) { s.Argv = []string{"./heat", "\x01", "\x02"} }, "argv[1]: contains control byte 0x01 (byte 0)"},
		{"a tab in a word", func(s *Spec) { s.Argv = []string{"sort", "-t", "\t"} }, ""},
		{"UTF-8 in a word", func(s *Spec) { s.Argv = []string{"./heat", "Grüße, 世界"} }, ""},
		{"a NUL in an env value", func(s *Spec) { s.Env = map[string]string{"FOO": "a\x00"} }, `env "FOO": value contains a NUL byte (byte 1)`},
		{"an escape in an env value", func(s *Spec) { s.Env = map[string]string{"FOO": "abc\x1b]0;x\x07"} }, `env "FOO": value contains control byte 0x1b (byte 3)`},
		{"a newline in an env value", func(s *Spec) { s.Env = map[string]string{"FOO": "a\nb"} }, `env "FOO": value contains control byte 0x0a (byte 1)`},
		{"a tab in an env value", func(s *Spec) { s.Env = map[string]string{"SEP": "\t"} }, ""},
		{"a NUL in an env name", func(s *Spec) { s.Env = map[string]string{"F\x00O": "x"} }, `env key "F\x00O": contains a NUL byte (byte 1)`},
		{"a tab in an env name", func(s *Spec) { s.Env = map[string]string{"F\tO": "x"} }, `env key "F\tO": contains control byte 0x09 (byte 1)`},
		{"an env name with =", func(s *Spec) { s.Env = map[string]string{"A=B": "x"} }, `env key "A=B": want a non-empty name without '='`},
		{"a NUL in a file name", func(s *Spec) { s.Files = []File{{Name: "in\x00put", SHA256: sum}} }, `files[0].name "in\x00put": contains a NUL byte (byte 2)`},
		{"a newline in a file name", func(s *Spec) { s.Files = []File{{Name: "ok", SHA256: sum}, {Name: "a\nb", SHA256: sum}} }, `files[1].name "a\nb": contains control byte 0x0a (byte 1)`},
		{"a tab in a file name", func(s *Spec) { s.Files = []File{{Name: "a\tb", SHA256: sum}} }, `files[0].name "a\tb": contains control byte 0x09 (byte 1)`},
		{"a file name in UTF-8", func(s *Spec) { s.Files = []File{{Name: "données/entrée.txt", SHA256: sum}} }, ""},
		{"a build per instruction set", func(s *Spec) {
			s.Files = []File{{Name: "heat", SHA256: sum, Arch: "amd64"}, {Name: "heat", SHA256: sum, Arch: "arm64"}}
		}, ""},
		{"two builds for one set", func(s *Spec) {
			s.Files = []File{{Name: "heat", SHA256: sum, Arch: "arm64"}, {Name: "heat", SHA256: sum, Arch: "arm64"}}
		}, `files[1].name "heat": given twice`},
		{"a build for every set and one for a set", func(s *Spec) {
			s.Files = []File{{Name: "heat", SHA256: sum}, {Name: "heat", SHA256: sum, Arch: "arm64"}}
		}, `files[1].name "heat": given twice`},
		{"a build for a set and one for every set", func(s *Spec) {
			s.Files = []File{{Name: "heat", SHA256: sum, Arch: "arm64"}, {Name: "heat", SHA256: sum}}
		}, `files[1].name "heat": given twice`},
		{"an instruction set misspelt", func(s *Spec) { s.Files = []File{{Name: "heat", SHA256: sum, Arch: "ARM64"}} }, `files[0].arch "ARM64": want an instruction set as Go names it (amd64, arm64)`},
		{"an escape in the owner's name", func(s *Spec) { s.Owner = &Owner{UID: 1001, GID: 1001, Name: "al\x1bice"} }, `owner.name "al\x1bice": contains control byte 0x1b (byte 2)`},
		{"a carriage return in resume_from", func(s *Spec) {
			s.ID, s.ResumeEpoch, s.ResumeFrom = "heat", 3, "/keep/heat\rfake line"
		}, `resume_from "/keep/heat\rfake line": contains control byte 0x0d (byte 10)`},
		{"an object store its coordinator keeps epochs in", func(s *Spec) {
			s.Durable = &DurableTarget{Location: "s3://lab/app", Endpoint: "http://10.0.0.5:8333", Rate: 20e6}
		}, ""},
		{"a directory its coordinator would keep epochs in", func(s *Spec) { s.Durable = &DurableTarget{Location: "/shared/app"} }, `durable.location "/shared/app": want s3://BUCKET/PREFIX`},
		{"credentials in the store's location", func(s *Spec) { s.Durable = &DurableTarget{Location: "s3://key:secret@lab/app"} }, "durable.location: s3://BUCKET/PREFIX, with no credentials in it"},
		{"credentials in the store's endpoint", func(s *Spec) {
			s.Durable = &DurableTarget{Location: "s3://lab/app", Endpoint: "http://key:secret@10.0.0.5:8333"}
		}, "durable.endpoint: http(s)://HOST[:PORT], with no credentials in it"},
		{"a negative upload rate", func(s *Spec) { s.Durable = &DurableTarget{Location: "s3://lab/app", Rate: -1} }, "durable.rate -1: want bytes a second"},
		{"a world for a resumed epoch", func(s *Spec) { s.ID, s.ResumeEpoch, s.ResumeWorld = "heat", 3, 4 }, ""},
		{"a world without an epoch", func(s *Spec) { s.ResumeWorld = 4 }, "resume_world 4: want 0, or the ranks of the run that wrote resume_epoch"},
		{"an escape in a task", func(s *Spec) {
			s.Ranks, s.Farm = 0, &FarmSpec{Tasks: []string{"1", "2\x1b[1A"}}
		}, "farm.tasks[1]: contains control byte 0x1b (byte 1)"},
		{"a carriage return in a task", func(s *Spec) { s.Ranks, s.Farm = 0, &FarmSpec{Tasks: []string{"1\r"}} }, "farm.tasks[0]: contains control byte 0x0d (byte 1)"},
		{"a tab in a task", func(s *Spec) { s.Ranks, s.Farm = 0, &FarmSpec{Tasks: []string{"a\tb"}} }, ""},
		{"every field at once", func(s *Spec) {
			s.Argv, s.Env = []string{"x", "\x00"}, map[string]string{"A": "\x00"}
		}, `argv[1]: contains a NUL byte (byte 0); env "A": value contains a NUL byte (byte 0)`},
	}
	for _, tt := range tests {
		s := Spec{Ranks: 2, Argv: []string{"./heat"}}
		tt.edit(&s)
		err := s.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want accepted", tt.name, err)
		case tt.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: got %v, want ErrInvalid containing %q", tt.name, err, tt.want)
		}
	}
}

// A job asks for an automatic interval or a fixed one, not both.
func TestValidateCheckpointAuto(t *testing.T) {
	base := Spec{Ranks: 2, Argv: []string{"/bin/true"}}
	for _, c := range []struct {
		auto           bool
		interval, mtbf time.Duration
		want           string
	}{
		{true, 0, 0, ""},
		{false, 30 * time.Second, 0, ""},
		{false, 0, 0, ""},
		{true, 0, time.Minute, ""},
		{true, 30 * time.Second, 0, "checkpoint_auto with checkpoint_interval 30s: want one of them"},
		{true, 0, -time.Minute, "mtbf -1m0s: want > 0"},
		{false, 30 * time.Second, time.Minute, "mtbf 1m0s without checkpoint_auto"},
	} {
		s := base
		s.CheckpointAuto, s.CheckpointInterval, s.MTBF = c.auto, Duration(c.interval), Duration(c.mtbf)
		err := s.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("auto %v, interval %v, mtbf %v: %v, want %q", c.auto, c.interval, c.mtbf, err, c.want)
		}
	}
}

func TestProgramArchesAndFilesFor(t *testing.T) {
	amd := File{Name: "heat", SHA256: "a", Arch: "amd64"}
	arm := File{Name: "heat", SHA256: "b", Arch: "arm64"}
	in := File{Name: "in.txt", SHA256: "c"}
	tests := []struct {
		name    string
		spec    Spec
		arches  []string
		forArm  []File
		forRisc []File
	}{
		{"two builds", Spec{Argv: []string{"heat"}, Files: []File{amd, in, arm}}, []string{"amd64", "arm64"}, []File{in, arm}, []File{in}},
		{"one build", Spec{Argv: []string{"heat"}, Files: []File{amd, in}}, []string{"amd64"}, []File{in}, []File{in}},
		{"a build of no set", Spec{Argv: []string{"heat"}, Files: []File{{Name: "heat", SHA256: "d"}}}, nil, []File{{Name: "heat", SHA256: "d"}}, []File{{Name: "heat", SHA256: "d"}}},
		{"run by its path", Spec{Argv: []string{"/usr/bin/python3", "heat.py"}, Files: []File{{Name: "heat.py", SHA256: "e"}}}, nil, []File{{Name: "heat.py", SHA256: "e"}}, []File{{Name: "heat.py", SHA256: "e"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.ProgramArches(); !slices.Equal(got, tt.arches) {
				t.Errorf("ProgramArches() = %v, want %v", got, tt.arches)
			}
			if got := tt.spec.FilesFor("arm64"); !slices.Equal(got, tt.forArm) {
				t.Errorf("FilesFor(arm64) = %v, want %v", got, tt.forArm)
			}
			if got := tt.spec.FilesFor("riscv64"); !slices.Equal(got, tt.forRisc) {
				t.Errorf("FilesFor(riscv64) = %v, want %v", got, tt.forRisc)
			}
		})
	}
}

// A hang bound is automatic (0), off, or at least MinHangAfter.
func TestValidateHangAfter(t *testing.T) {
	for _, c := range []struct {
		after Duration
		want  string
	}{
		{0, ""},
		{HangOff, ""},
		{Duration(time.Second), ""},
		{Duration(time.Hour), ""},
		{Duration(500 * time.Millisecond), "hang_after 500ms: want at least 1s, or -1ns for never"},
		{Duration(-2 * time.Second), "hang_after -2s: want at least 1s"},
	} {
		s := Spec{Ranks: 2, Argv: []string{"/bin/true"}, HangAfter: c.after}
		err := s.Validate()
		if c.want == "" && err != nil || c.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("hang_after %v: got %v, want %q", c.after, err, c.want)
		}
	}
}
