package engine

import (
	"fmt"
	"os/exec"
)

// Engine builds the command that launches one run of a job with one MPI
// implementation's launcher. The command's stdout and stderr carry the ranks' lines
// tagged "[1,RANK]<stream>:" (see [ParseTagged]); every rank runs Launch.Wrapper, which
// finds its rank in OMPI_COMM_WORLD_RANK or PMI_RANK. Implementations are plain values,
// safe for concurrent use.
type Engine interface {
	// Name is the engine's name in `shoal run --engine` and job specs.
	Name() string
	// Command returns the launcher command for l.
	Command(l Launch) *exec.Cmd
	// Version returns the first line of the launcher's version, or an error naming
	// the packages that provide it.
	Version() (string, error)
	// Installed reports, without running it, whether the launcher is on PATH,
	// with Version's error when it is not.
	Installed() error
}

var (
	_ Engine = OpenMPI{}
	_ Engine = MPICH{}
)

// Names are the engines' names, the default first.
var Names = []string{"openmpi", "mpich"}

// ByName returns the engine called name ("" is the default, Open MPI).
func ByName(name string) (Engine, error) {
	switch name {
	case "", "openmpi":
		return OpenMPI{}, nil
	case "mpich":
		return MPICH{}, nil
	}
	return nil, fmt.Errorf("engine: %q: want openmpi or mpich", name)
}

// firstLine runs path with args and returns the first line of its output.
func firstLine(path string, args ...string) (string, error) {
	out, err := exec.Command(path, args...).Output()
	if err != nil {
		return "", fmt.Errorf("engine: %s %v: %w", path, args, err)
	}
	for i, c := range out {
		if c == '\n' {
			return string(out[:i]), nil
		}
	}
	return string(out), nil
}
