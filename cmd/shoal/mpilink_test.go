package main

import (
	"errors"
	"strings"
	"testing"

	"shoal/test/testenv"
)

func TestMPIFamily(t *testing.T) {
	for _, tt := range []struct{ lib, want string }{
		{"libmpi.so.40", familyOpenMPI},
		{"libmpi_mpifh.so.40", familyOpenMPI},
		{"libmpi_usempif08.so.40", familyOpenMPI},
		{"libmpi_cxx.so.40", familyOpenMPI},
		{"libopen-pal.so.40", familyOpenMPI},
		{"libmpich.so.12", familyMPICH},
		{"libmpichfort.so.12", familyMPICH},
		{"libmpi.so.12", familyMPICH},
		{"libmpi.so.12.1.1", familyMPICH},
		{"libm.so.6", ""},
		{"libshoal.so", ""},
		{"libmpfr.so.6", ""},
	} {
		if got := mpiFamily(tt.lib); got != tt.want {
			t.Errorf("mpiFamily(%q) = %q, want %q", tt.lib, got, tt.want)
		}
	}
}

func TestChooseEngine(t *testing.T) {
	openmpi := mpiLink{Family: familyOpenMPI, Lib: "libmpi.so.40"}
	mpich := mpiLink{Family: familyMPICH, Lib: "libmpich.so.12"}
	mixed := mpiLink{Family: familyMPICH, Lib: "libmpich.so.12", Shoal: "/b/lib/libshoal.so", ShoalFamily: familyOpenMPI, ShoalLib: "libmpi.so.40"}
	for _, tt := range []struct {
		name  string
		given string
		link  mpiLink
		want  string
		error string // "" when none
	}{
		{"nothing known, nothing given: the agent's default", "", mpiLink{}, "", ""},
		{"nothing known: the one given", "mpich", mpiLink{}, "mpich", ""},
		{"the program's MPI when none is given", "", mpich, "mpich", ""},
		{"the program's MPI when none is given, Open MPI", "", openmpi, "openmpi", ""},
		{"the one given, the program's", "openmpi", openmpi, "openmpi", ""},
		{"the other one given", "openmpi", mpich, "",
			"MPI mismatch: heat is built with MPICH (libmpich.so.12), and --engine openmpi launches Open MPI, whose ranks would not join its world: run it with --engine mpich"},
		{"a libshoal of the other MPI", "mpich", mixed, "",
			"MPI mismatch: heat is built with MPICH (libmpich.so.12) but loads a libshoal built for Open MPI (/b/lib/libshoal.so): build it against the MPICH build of libshoal"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := chooseEngine(tt.given, "/some/where/heat", tt.link)
			if tt.error != "" {
				if !errors.Is(err, ErrMPIMismatch) || err.Error() != tt.error {
					t.Fatalf("chooseEngine = %q, %v; want the error %q", got, err, tt.error)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("chooseEngine = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

// The builds of heat say their MPI and their libshoal's, as the loader would find it.
func TestLinkedMPIOfTheBuilds(t *testing.T) {
	for _, tt := range []struct{ rel, family, shoal string }{
		{"build/examples/heat", familyOpenMPI, "build/lib/libshoal.so"},
		{"build/examples/fortran/heat", familyOpenMPI, "build/lib/libshoalf.so"},
		{"build/mpich/examples/heat", familyMPICH, "build/mpich/lib/libshoal.so"},
	} {
		link := linkedMPI(testenv.Built(t, tt.rel))
		if link.Family != tt.family || link.ShoalFamily != tt.family || !strings.HasSuffix(link.Shoal, tt.shoal) {
			t.Errorf("linkedMPI(%s) = %+v, want %s with %s of %s", tt.rel, link, tt.family, tt.shoal, tt.family)
		}
	}
	if link := linkedMPI("/bin/true"); link != (mpiLink{}) {
		t.Errorf("linkedMPI(/bin/true) = %+v, want nothing known", link)
	}
}
