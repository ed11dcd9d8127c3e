package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"shoal/test/testenv"
)

// mandelbrotSize keeps every run of the example a few milliseconds.
var mandelbrotSize = []string{"--width", "200", "--height", "150"}

// mandelbrotRun runs the example and returns its stdout, its stderr and its exit status.
func mandelbrotRun(t *testing.T, bin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("mandelbrot %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), errOut.String(), code
}

// mandelbrotTiles writes the output of tiles 0..n-1 to dir/0..dir/(n-1), as a farm of
// n tasks numbered from 0 would.
func mandelbrotTiles(t *testing.T, bin, dir string, n int, size []string) {
	t.Helper()
	for i := 0; i < n; i++ {
		args := append([]string{"--tile", strconv.Itoa(i), "--of", strconv.Itoa(n)}, size...)
		out, stderr, code := mandelbrotRun(t, bin, args...)
		if code != 0 {
			t.Fatalf("tile %d of %d exited %d: %s", i, n, code, stderr)
		}
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestMandelbrotJoinMatchesSerial computes the image as tiles, joins them and compares
// the checksum and the PGM with those of the whole image computed in one process, for
// splits with uneven bands and with more tiles than rows (empty tiles).
func TestMandelbrotJoinMatchesSerial(t *testing.T) {
	bin := testenv.Built(t, "build/examples/mandelbrot")
	for _, tc := range []struct {
		n    int
		size []string
	}{
		{8, mandelbrotSize},
		{7, mandelbrotSize},
		{1, mandelbrotSize},
		{8, []string{"--width", "9", "--height", "5", "--iters", "50"}},
	} {
		t.Run(fmt.Sprintf("%s/of%d", strings.Join(tc.size, ""), tc.n), func(t *testing.T) {
			dir := t.TempDir()
			serialPGM, joinedPGM := filepath.Join(dir, "serial.pgm"), filepath.Join(dir, "joined.pgm")
			out, stderr, code := mandelbrotRun(t, bin, append([]string{"--serial", "--image", serialPGM}, tc.size...)...)
			if code != 0 {
				t.Fatalf("--serial exited %d: %s", code, stderr)
			}
			want := field(out, "checksum")
			if len(want) != 16 {
				t.Fatalf("--serial printed checksum %q, want 16 hex digits\n%s", want, out)
			}

			tiles := filepath.Join(dir, "tiles")
			if err := os.Mkdir(tiles, 0o755); err != nil {
				t.Fatal(err)
			}
			mandelbrotTiles(t, bin, tiles, tc.n, tc.size)
			out, stderr, code = mandelbrotRun(t, bin, append([]string{"--join", tiles, "--of", strconv.Itoa(tc.n), "--image", joinedPGM}, tc.size...)...)
			if code != 0 {
				t.Fatalf("--join exited %d: %s", code, stderr)
			}
			if got := field(out, "checksum"); got != want {
				t.Errorf("joined checksum %q, want %q (serial)", got, want)
			}
			serial, err1 := os.ReadFile(serialPGM)
			joined, err2 := os.ReadFile(joinedPGM)
			if err := errors.Join(err1, err2); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(joined, serial) {
				t.Errorf("joined PGM (%d bytes) differs from the serial one (%d bytes)", len(joined), len(serial))
			}
		})
	}
}

// TestMandelbrotJoinRejectsBadTiles spoils one tile file at a time: the join must exit 1
// with a line naming that file.
func TestMandelbrotJoinRejectsBadTiles(t *testing.T) {
	bin := testenv.Built(t, "build/examples/mandelbrot")
	good := t.TempDir()
	mandelbrotTiles(t, bin, good, 8, mandelbrotSize)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(good, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		tile5 []byte // the content of tile 5's file; nil removes it
		msg   string
	}{
		{"missing", nil, "no such file"},
		{"wrong tile", read("6"), `header "tile 6 of 8`},
		{"truncated", read("5")[:len(read("5"))-10], "truncated"},
		{"longer", append(read("5"), 'x'), "more than"},
		{"empty", []byte{}, "empty file"},
		{"not a tile", []byte("\x00\x01garbage\n"), "not a tile's output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for i := 0; i < 8; i++ {
				name := strconv.Itoa(i)
				b := read(name)
				if i == 5 {
					if tc.tile5 == nil {
						continue
					}
					b = tc.tile5
				}
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			out, stderr, code := mandelbrotRun(t, bin, append([]string{"--join", dir, "--of", "8"}, mandelbrotSize...)...)
			if code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			if strings.Contains(out, "checksum") {
				t.Errorf("printed a checksum for a bad set of tiles: %s", out)
			}
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			if len(lines) != 1 {
				t.Fatalf("stderr has %d lines, want 1:\n%s", len(lines), stderr)
			}
			file := filepath.Join(dir, "5")
			if !strings.Contains(lines[0], file+":") || !strings.Contains(strings.ToLower(lines[0]), strings.ToLower(tc.msg)) {
				t.Errorf("stderr %q, want a line naming %s and saying %q", lines[0], file, tc.msg)
			}
		})
	}
}

// TestMandelbrotFirst reads tiles from files numbered from 1 with --first 1.
func TestMandelbrotFirst(t *testing.T) {
	bin := testenv.Built(t, "build/examples/mandelbrot")
	from0, from1 := t.TempDir(), t.TempDir()
	mandelbrotTiles(t, bin, from0, 4, mandelbrotSize)
	for i := 0; i < 4; i++ {
		if err := os.Rename(filepath.Join(from0, strconv.Itoa(i)), filepath.Join(from1, strconv.Itoa(i+1))); err != nil {
			t.Fatal(err)
		}
	}
	out, stderr, code := mandelbrotRun(t, bin, append([]string{"--join", from1, "--of", "4", "--first", "1"}, mandelbrotSize...)...)
	if code != 0 {
		t.Fatalf("--join --first 1 exited %d: %s", code, stderr)
	}
	want, _, _ := mandelbrotRun(t, bin, append([]string{"--serial"}, mandelbrotSize...)...)
	if got := field(out, "checksum"); got != field(want, "checksum") {
		t.Errorf("checksum %q, want %q (serial)", got, field(want, "checksum"))
	}
	if _, stderr, code := mandelbrotRun(t, bin, append([]string{"--join", from1, "--of", "4"}, mandelbrotSize...)...); code != 1 || !strings.Contains(stderr, filepath.Join(from1, "0")+":") {
		t.Errorf("without --first: exit %d, stderr %q; want 1 and a line naming %s", code, stderr, filepath.Join(from1, "0"))
	}
}

// TestMandelbrotBadArguments: every bad command line exits 2 with one line naming the
// problem; --help exits 0.
func TestMandelbrotBadArguments(t *testing.T) {
	bin := testenv.Built(t, "build/examples/mandelbrot")
	for _, tc := range []struct {
		args string
		msg  string
	}{
		{"--tile 3 --of 8 --colour red", "unknown option --colour"},
		{"--tile 3 --of", "--of needs a value"},
		{"--tile 8 --of 8", "--tile 8 is out of range for --of 8"},
		{"--tile -1 --of 8", "--tile -1 is out of range"},
		{"--tile 0 --of 0", "--of 0 is out of range"},
		{"--tile three --of 8", `--tile: "three" is not a whole number`},
		{"--serial --width 2x", `--width: "2x" is not a whole number`},
		{"--tile 3", "--tile needs --of"},
		{"--join dir", "--join needs --of"},
		{"--serial --tile 1 --of 2", "only one of"},
		{"", "give one of"},
	} {
		t.Run(tc.args, func(t *testing.T) {
			out, stderr, code := mandelbrotRun(t, bin, strings.Fields(tc.args)...)
			if code != 2 {
				t.Errorf("exit %d, want 2", code)
			}
			if out != "" {
				t.Errorf("stdout %q, want nothing", out)
			}
			if strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, tc.msg) {
				t.Errorf("stderr %q, want one line with %q", stderr, tc.msg)
			}
		})
	}
	out, _, code := mandelbrotRun(t, bin, "--help")
	if code != 0 || !strings.HasPrefix(out, "usage: mandelbrot --tile I --of N") {
		t.Errorf("--help: exit %d, stdout %q; want 0 and the usage", code, out)
	}
}
