package launch

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// DaemonNames are the MPI daemons [FindDaemons] looks for: Open MPI's per-node
// daemons (orted; prted from Open MPI 5's PRRTE) and MPICH Hydra's.
var DaemonNames = []string{"orted", "prted", "hydra_pmi_proxy"}

// TaskRunnerArg is the first argument with which the agent's own executable is a
// daemon: `shoal exec-task`, a task farm's runner, which runs the farm's staged
// program as the job's owner as an MPI daemon's ranks do.
const TaskRunnerArg = "exec-task"

// launcherNames are the MPI launchers whose directories [FindDaemons] searches:
// an MPI installation keeps its daemon beside its launcher (Debian's names
// included, as the engines run them).
var launcherNames = []string{"mpirun", "mpiexec", "mpirun.openmpi", "mpiexec.openmpi", "orterun", "prterun", "mpiexec.mpich", "mpiexec.hydra"}

// StandardDirs are where [FindDaemons] also looks, in case the agent's PATH
// misses an MPI installation: the distributions' own places (Debian's and
// Fedora's), as patterns for filepath.Glob.
var StandardDirs = []string{"/usr/bin", "/usr/local/bin", "/usr/lib/*/openmpi/bin", "/usr/lib64/openmpi/bin", "/usr/lib64/mpich/bin"}

// Daemon is a program a launch may start.
type Daemon struct {
	// Path is the program's file: absolute, with no symbolic link in it.
	Path string
	// Arg, when set, must be the program's first argument.
	Arg string
}

func (d Daemon) String() string {
	if d.Arg != "" {
		return d.Path + " " + d.Arg
	}
	return d.Path
}

// FindDaemons returns the daemons of the MPI installations of this machine:
// each of [DaemonNames] found in the absolute directories of pathList, in the
// directory of each MPI launcher found there (after its symbolic links) and in
// [StandardDirs]; and self, the agent's own executable, as `self exec-task`
// ([TaskRunnerArg]). Every path has its symbolic links resolved, so that
// /usr/bin/orted stands for the file it links to.
func FindDaemons(pathList, self string) []Daemon {
	var abs []string
	for _, d := range filepath.SplitList(pathList) {
		if filepath.IsAbs(d) { // a relative entry would depend on where the agent runs
			abs = append(abs, d)
		}
	}
	dirs := slices.Clone(abs)
	for _, name := range launcherNames {
		if p, err := lookPath(name, "/", strings.Join(abs, string(os.PathListSeparator))); err == nil {
			if real, err := filepath.EvalSymlinks(p); err == nil {
				dirs = append(dirs, filepath.Dir(real))
			}
		}
	}
	for _, pattern := range StandardDirs {
		matches, _ := filepath.Glob(pattern)
		dirs = append(dirs, matches...)
	}
	var out []Daemon
	add := func(p, arg string) {
		if real, err := filepath.EvalSymlinks(p); err == nil && executable(real) == nil {
			if d := (Daemon{Path: real, Arg: arg}); !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	for _, dir := range dirs {
		for _, name := range DaemonNames {
			add(filepath.Join(dir, name), "")
		}
	}
	if self != "" {
		add(self, TaskRunnerArg)
	}
	slices.SortFunc(out, func(a, b Daemon) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// checkDaemon returns nil if argv, whose program is the file at program
// (absolute, with no symbolic link in it), runs one of daemons: the same file,
// with the daemon's first argument if it has one. A program is allowed by what
// it is, not by what it is called: a script named orted is not orted.
func checkDaemon(argv []string, program string, daemons []Daemon) error {
	for _, d := range daemons {
		if d.Path == program && (d.Arg == "" || len(argv) > 1 && argv[1] == d.Arg) {
			return nil
		}
	}
	allowed := make([]string, len(daemons))
	for i, d := range daemons {
		allowed[i] = d.String()
	}
	if len(allowed) == 0 {
		allowed = []string{"none found"}
	}
	what := program
	if argv[0] != program {
		what = fmt.Sprintf("%q is %s, which", argv[0], program)
	}
	return fmt.Errorf("%w: %s is not one of this node's daemons (%s)", ErrNotDaemon, what, strings.Join(allowed, ", "))
}

// rootOnly returns nil if only root can change the file at path (absolute, with
// no symbolic link in it): it and every directory above it are owned by root
// and writable by no group or other user, except a directory with the sticky
// bit (/tmp), in which no one else may replace what root owns. A root agent
// starts a daemon only from such a file: one a user could change would run
// that user's code as the job's owner, as root for a job submitted with the
// secret.
func rootOnly(path string) error {
	for p := path; ; p = filepath.Dir(p) {
		st, err := os.Lstat(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrDaemonUnsafe, err)
		}
		if sys, ok := st.Sys().(*syscall.Stat_t); !ok || sys.Uid != 0 {
			return fmt.Errorf("%w: %s is not owned by root", ErrDaemonUnsafe, p)
		}
		if perm := st.Mode().Perm(); perm&0o022 != 0 && !(st.IsDir() && st.Mode()&fs.ModeSticky != 0) {
			return fmt.Errorf("%w: %s is writable by its group or others (mode %04o)", ErrDaemonUnsafe, p, perm)
		}
		if p == "/" || p == "." {
			return nil
		}
	}
}
