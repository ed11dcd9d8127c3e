package main

import (
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The MPI families a program can be built with, as their engines are named.
const (
	familyOpenMPI = "openmpi"
	familyMPICH   = "mpich"
)

// familyWords is a family as its users call it.
var familyWords = map[string]string{familyOpenMPI: "Open MPI", familyMPICH: "MPICH"}

// ErrMPIMismatch is a program whose MPI is not the one that would launch it, or
// that is linked with a libshoal built for the other MPI.
var ErrMPIMismatch = errors.New("MPI mismatch")

// mpiFamily is the MPI family of a shared library by its name: MPICH's
// (libmpich*, and libmpi.so.12, the MPICH ABI's name), Open MPI's (libmpi.so.40,
// libmpi_mpifh, libmpi_cxx and the rest of libmpi*, libopen-pal, libopen-rte), or
// "" for a library of neither.
func mpiFamily(lib string) string {
	switch {
	case strings.HasPrefix(lib, "libmpich"), lib == "libmpi.so.12" || strings.HasPrefix(lib, "libmpi.so.12."):
		return familyMPICH
	case strings.HasPrefix(lib, "libmpi.so"), strings.HasPrefix(lib, "libmpi_"), strings.HasPrefix(lib, "libopen-pal"),
		strings.HasPrefix(lib, "libopen-rte"):
		return familyOpenMPI
	}
	return ""
}

// mpiLink is what a program's dynamic section says of its MPI: the family and
// the library that tells it, and the same of the libshoal it loads (Path "" when
// it loads none, or none was found where the loader would look first).
type mpiLink struct {
	Family, Lib           string
	Shoal                 string // the libshoal*.so the program loads
	ShoalFamily, ShoalLib string
}

// familyOf is the first MPI family among libs, with the library that says it.
func familyOf(libs []string) (family, lib string) {
	for _, l := range libs {
		if f := mpiFamily(l); f != "" {
			return f, l
		}
	}
	return "", ""
}

// linkedMPI reads program's MPI and its libshoal's. A file that is not ELF, or
// an interpreter, has neither: its zero mpiLink says nothing is known.
func linkedMPI(program string) mpiLink {
	f, err := elf.Open(program)
	if err != nil {
		return mpiLink{}
	}
	defer f.Close()
	libs, _ := f.ImportedLibraries()
	var link mpiLink
	link.Family, link.Lib = familyOf(libs)
	dirs := searchDirs(f, filepath.Dir(program))
	for _, l := range libs {
		if !strings.HasPrefix(l, "libshoal") {
			continue
		}
		if path := findLib(l, dirs); path != "" {
			link.Shoal = path
			link.ShoalFamily, link.ShoalLib = libFamily(path, 2)
			break
		}
	}
	return link
}

// libFamily is the MPI family of the shared library at path, from what it
// loads, following its own libshoal* (libshoalf loads libshoal) depth deep.
func libFamily(path string, depth int) (family, lib string) {
	f, err := elf.Open(path)
	if err != nil {
		return "", ""
	}
	defer f.Close()
	libs, _ := f.ImportedLibraries()
	if family, lib = familyOf(libs); family != "" || depth <= 1 {
		return family, lib
	}
	dirs := searchDirs(f, filepath.Dir(path))
	for _, l := range libs {
		if p := findLib(l, dirs); strings.HasPrefix(l, "libshoal") && p != "" {
			return libFamily(p, depth-1)
		}
	}
	return "", ""
}

// searchDirs is where the loader looks first for what f loads: its RUNPATH (or
// RPATH), $ORIGIN as origin, then LD_LIBRARY_PATH. The system's directories are
// left out: a libshoal there is found by name only if nothing above has one.
func searchDirs(f *elf.File, origin string) []string {
	var dirs []string
	paths, _ := f.DynString(elf.DT_RUNPATH)
	if len(paths) == 0 {
		paths, _ = f.DynString(elf.DT_RPATH)
	}
	for _, p := range paths {
		for _, d := range filepath.SplitList(p) {
			dirs = append(dirs, strings.NewReplacer("$ORIGIN", origin, "${ORIGIN}", origin).Replace(d))
		}
	}
	return append(dirs, filepath.SplitList(os.Getenv("LD_LIBRARY_PATH"))...)
}

// findLib is the first file called name in dirs, or "".
func findLib(name string, dirs []string) string {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p
		}
	}
	return ""
}

// chooseEngine is the engine that launches program: the one given (--engine),
// checked against the MPI the program is built with, or, when none is given,
// the program's own MPI's ("" when it says none: the agent's default). A
// program built with one MPI and launched by the other would run as separate
// single-rank jobs, and one linked with a libshoal of the other MPI aborts in
// shoal_init: both are refused, naming each MPI.
func chooseEngine(given string, program string, link mpiLink) (string, error) {
	name := filepath.Base(program)
	if link.Family != "" && link.ShoalFamily != "" && link.Family != link.ShoalFamily {
		return "", fmt.Errorf("%w: %s is built with %s (%s) but loads a libshoal built for %s (%s): build it against the %s build of libshoal",
			ErrMPIMismatch, name, familyWords[link.Family], link.Lib, familyWords[link.ShoalFamily], link.Shoal, familyWords[link.Family])
	}
	switch {
	case link.Family == "":
		return given, nil
	case given == "":
		return link.Family, nil
	case given != link.Family:
		return "", fmt.Errorf("%w: %s is built with %s (%s), and --engine %s launches %s, whose ranks would not join its world: run it with --engine %s",
			ErrMPIMismatch, name, familyWords[link.Family], link.Lib, given, familyWords[given], link.Family)
	}
	return given, nil
}
