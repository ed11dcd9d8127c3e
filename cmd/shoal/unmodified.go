package main

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// usesLibshoal tells from the program's symbols whether it calls libshoal: an ELF
// executable that never references shoal_init (or the Fortran module's shoal_init)
// writes no checkpoint. known is false when the file says nothing either way: not an
// ELF file, or an interpreter (python, sh, ...) whose script may well use libshoal.
func usesLibshoal(program string) (uses, known bool) {
	f, err := elf.Open(program)
	if err != nil {
		return false, false
	}
	defer f.Close()
	if libs, _ := f.ImportedLibraries(); slices.ContainsFunc(libs, func(l string) bool { return strings.HasPrefix(l, "libpython") }) {
		return false, false
	}
	base := filepath.Base(program)
	for _, interp := range []string{"python", "perl", "ruby", "sh", "bash", "dash", "env", "julia", "node", "R"} {
		if base == interp || strings.HasPrefix(base, interp+"3") || strings.HasPrefix(base, interp+"2") {
			return false, false
		}
	}
	var syms []elf.Symbol
	if s, err := f.DynamicSymbols(); err == nil {
		syms = append(syms, s...)
	}
	if s, err := f.Symbols(); err == nil {
		syms = append(syms, s...)
	}
	for _, s := range syms {
		if s.Name == "shoal_init" || s.Name == "shoal_f_init" || strings.HasPrefix(s.Name, "__shoal_MOD_shoal_init") {
			return true, true
		}
	}
	if len(syms) == 0 {
		return false, false // stripped of every symbol: cannot tell
	}
	return false, true
}

// noCheckpointsNote is what shoal run says at launch instead of where checkpoints go
// when the program is not linked with libshoal.
func noCheckpointsNote(program string) string {
	return fmt.Sprintf("%s does not use libshoal (no shoal_init in it): it writes no checkpoints, so a lost rank restarts it from the beginning", filepath.Base(program))
}

// importsShoal matches a Python line that imports the shoal package: `import
// shoal`, `import numpy, shoal`, `from shoal import ...`.
var importsShoal = regexp.MustCompile(`(?m)^[ \t]*(?:from[ \t]+shoal(?:[ \t.]|$)|import[ \t]+(?:[\w.]+[ \t]*(?:as[ \t]+\w+[ \t]*)?,[ \t]*)*shoal\b)`)

// checkpointsNote is what shoal run says of a job of program with args that
// cannot checkpoint, in place of where its checkpoints go, and "" when it may:
// an ELF program without shoal_init, or a Python script (python's first
// argument that is a file) that never imports shoal.
func checkpointsNote(program string, args []string) string {
	if interpreter(program) {
		i := scriptArg(args)
		if i < 0 {
			return ""
		}
		text, err := os.ReadFile(args[i])
		if err != nil || importsShoal.Match(text) {
			return ""
		}
		return fmt.Sprintf("%s does not import shoal: it writes no checkpoints, so a lost rank restarts it from the beginning", filepath.Base(args[i]))
	}
	if uses, known := usesLibshoal(program); known && !uses {
		return noCheckpointsNote(program)
	}
	return ""
}

// jobName is what a job of program with args is named after: the program, or
// a Python interpreter's script without its .py.
func jobName(program string, args []string) string {
	if interpreter(program) {
		if i := scriptArg(args); i >= 0 {
			return strings.TrimSuffix(filepath.Base(args[i]), ".py")
		}
	}
	return filepath.Base(program)
}

// jobWhat is how a line names what a job of program with args runs: heat, or
// python3 heat.py.
func jobWhat(program string, args []string) string {
	what := filepath.Base(program)
	if interpreter(program) {
		if i := scriptArg(args); i >= 0 {
			what += " " + filepath.Base(args[i])
		}
	}
	return what
}
