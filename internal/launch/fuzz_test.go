package launch

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

// FuzzDaemonArgv checks the launch request's command line decoder: it never
// panics, refuses with one of its two errors, and what it accepts are words
// that, quoted again for sh and joined, decode to the same words: a shell would
// have run exactly what the agent executes (after sourcing ./.profile, for a
// line in Open MPI's sh wrapper, which the agent does not).
func FuzzDaemonArgv(f *testing.F) {
	for _, line := range []string{
		` orted -mca ess "env" -mca orte_hnp_uri "431685632.0;tcp://192.0.2.2:58335" --mca plm_rsh_agent "/opt/shoal rsh"`,
		`"/usr/bin/hydra_pmi_proxy" --control-port vm:40123 --proxy-id 0`,
		`orted ; id > file`,
		`PATH=/opt/ompi/bin:$PATH ; export PATH ; /opt/ompi/bin/orted`,
		`prted 'a b' c\ d "e\"f"`,
		`( test ! -r ./.profile || . ./.profile;  orted -mca ess "env" --tree-spawn )`,
	} {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words, err := DaemonArgv(line)
		if err != nil {
			if !errors.Is(err, ErrNotSimple) && !errors.Is(err, ErrNotDaemon) {
				t.Fatalf("DaemonArgv(%q): unexpected error %v", line, err)
			}
			return
		}
		if len(words) == 0 {
			t.Fatalf("DaemonArgv(%q) accepted no words", line)
		}
		var quoted []string
		for _, w := range words {
			quoted = append(quoted, "'"+strings.ReplaceAll(w, "'", `'\''`)+"'")
		}
		again, err := DaemonArgv(strings.Join(quoted, " "))
		if err != nil || !slices.Equal(again, words) {
			t.Fatalf("DaemonArgv(%q) = %q, but quoted again it gives %q, %v", line, words, again, err)
		}
	})
}

// FuzzReadFrame checks the launch protocol's frame decoder: no panic, and a frame
// it reads is written back as the same bytes.
func FuzzReadFrame(f *testing.F) {
	var b bytes.Buffer
	WriteFrame(&b, FrameStdout, []byte("hi"))
	f.Add(b.Bytes())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, in []byte) {
		fr, err := ReadFrame(bytes.NewReader(in))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteFrame(&out, fr.Type, fr.Payload); err != nil {
			t.Fatalf("frame %v read from %x does not write back: %v", fr.Type, in, err)
		}
		if !bytes.HasPrefix(in, out.Bytes()) {
			t.Fatalf("frame read from %x writes back as %x", in, out.Bytes())
		}
	})
}
