package main

import (
	"debug/elf"
	"fmt"
	"path/filepath"
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
