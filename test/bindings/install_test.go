package bindings

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"shoal/test/testenv"
	"shoal/test/watch"
)

// tool returns the path of a program the test needs that scripts/deps.sh installs,
// failing under make test and skipping a bare go test without it.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("SHOAL_REQUIRE_BUILD") != "" {
			t.Fatalf("%s not installed: make deps installs it", name)
		}
		t.Skipf("%s not installed (make deps installs it)", name)
	}
	return p
}

// output runs a command in dir to its end (2 minutes at most) and returns what it
// printed, failing the test when it fails.
func output(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := tryOutput(dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func tryOutput(dir string, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// makeInstall runs make target (install, install-mpich, uninstall) in the repository
// with the given variables.
func makeInstall(t *testing.T, target string, vars ...string) (string, error) {
	t.Helper()
	return tryOutput(testenv.Root, nil, "make", append([]string{"--no-print-directory", target}, vars...)...)
}

// buildCounter configures and builds examples/cmake against the Shoal installed in
// prefix, with extra cmake arguments, and returns the build directory.
func buildCounter(t *testing.T, prefix string, args ...string) string {
	t.Helper()
	cmake := tool(t, "cmake")
	dir := t.TempDir()
	out := output(t, "", nil, cmake, append([]string{"-S", filepath.Join(testenv.Root, "examples/cmake"), "-B", dir,
		"-DCMAKE_PREFIX_PATH=" + prefix}, args...)...)
	cache, _ := os.ReadFile(filepath.Join(dir, "CMakeCache.txt"))
	if want := "Shoal_DIR:PATH=" + filepath.Join(prefix, "lib/cmake/Shoal") + "\n"; !strings.Contains(string(cache), want) {
		t.Fatalf("cmake did not take Shoal from %s (want %q in CMakeCache.txt):\n%s", prefix, want, out)
	}
	output(t, "", nil, cmake, "--build", dir)
	return dir
}

// counterTotal matches what examples/cmake/counter prints for steps steps on n ranks.
func counterTotal(steps, n int) string {
	return regexp.QuoteMeta("counter: total "+strconv.Itoa(steps*n*(n+1)/2)+" after ") + strconv.Itoa(steps) + " steps"
}

// make install puts a usable Shoal under a prefix: examples/cmake builds against it
// with find_package(Shoal) and survives a killed rank under the installed shoal run; the
// installed pkg-config files compile C and Fortran programs that load the installed
// libraries; the Python package loads the installed libshoal; an MPI of the other family
// is refused at configure time; MPICH installs into a prefix of its own; DESTDIR stages;
// make uninstall removes it all.
func TestInstall(t *testing.T) {
	requireOpenMPI(t)
	for _, rel := range []string{"bin/shoal", "build/lib/libshoal.so", "build/lib/libshoalf.so", "build/venv/bin/python"} {
		testenv.Built(t, rel)
	}
	pkgConfig := tool(t, "pkg-config")
	tool(t, "cmake")
	prefix := filepath.Join(t.TempDir(), "shoal")
	if out, err := makeInstall(t, "install", "PREFIX="+prefix); err != nil {
		t.Fatalf("make install PREFIX=%s: %v\n%s", prefix, err, out)
	}
	pkgEnv := []string{"PKG_CONFIG_PATH=" + filepath.Join(prefix, "lib/pkgconfig")}

	t.Run("pkg-config", func(t *testing.T) {
		pc, _ := os.ReadFile(filepath.Join(prefix, "lib/pkgconfig/shoal.pc"))
		if strings.Contains(string(pc), filepath.Join(testenv.Root, "build")) {
			t.Errorf("the installed shoal.pc points into the build tree:\n%s", pc)
		}
		if got, want := strings.TrimSpace(output(t, "", pkgEnv, pkgConfig, "--cflags", "shoal")), "-I"+filepath.Join(prefix, "include"); got != want {
			t.Errorf("pkg-config --cflags shoal = %q, want %q", got, want)
		}
		mpicc := strings.TrimSpace(output(t, "", pkgEnv, pkgConfig, "--variable=mpicc", "shoal"))
		if filepath.Base(mpicc) != "mpicc.openmpi" {
			t.Errorf("pkg-config --variable=mpicc shoal = %q, want Open MPI's mpicc.openmpi", mpicc)
		}
		dir := t.TempDir()
		src := filepath.Join(dir, "version.c")
		os.WriteFile(src, []byte(`#include <stdio.h>
#include <shoal.h>
int main(void)
{
    printf("%d %d %s\n", SHOAL_VERSION_NUMBER, shoal_version_number(), shoal_strerror(SHOAL_ERR_ARG));
    return 0;
}
`), 0o644)
		flags := strings.Fields(output(t, "", pkgEnv, pkgConfig, "--cflags", "--libs", "shoal"))
		output(t, dir, nil, mpicc, append([]string{"-o", "version", src}, flags...)...)
		got := strings.Fields(output(t, dir, nil, "./version"))
		if len(got) < 3 || got[0] != got[1] || got[0] == "0" {
			t.Errorf("the pkg-config program printed %q, want SHOAL_VERSION_NUMBER twice (header and library agree) and a message", got)
		}
		checkLinked(t, filepath.Join(dir, "version"), filepath.Join(prefix, "lib/libshoal.so"))
	})

	t.Run("Fortran module with pkg-config", func(t *testing.T) {
		mpifort := strings.TrimSpace(output(t, "", pkgEnv, pkgConfig, "--variable=mpifort", "shoal-fortran"))
		dir := t.TempDir()
		src := filepath.Join(dir, "version.f90")
		os.WriteFile(src, []byte(`program version
    use mpi
    use shoal
    implicit none
    print '(i0, 1x, a)', shoal_version_number(), shoal_strerror(SHOAL_ERR_ARG)
end program version
`), 0o644)
		flags := strings.Fields(output(t, "", pkgEnv, pkgConfig, "--cflags", "--libs", "shoal-fortran"))
		output(t, dir, nil, mpifort, append([]string{"-o", "version", src}, flags...)...)
		if got := strings.Fields(output(t, dir, nil, "./version")); len(got) < 2 || got[0] == "0" {
			t.Errorf("the Fortran program printed %q, want the version number and a message", got)
		}
		checkLinked(t, filepath.Join(dir, "version"), filepath.Join(prefix, "lib/libshoalf.so"))
	})

	t.Run("CMake example survives a killed rank", func(t *testing.T) {
		build := buildCounter(t, prefix)
		checkLinked(t, filepath.Join(build, "counter"), filepath.Join(prefix, "lib/libshoal.so"))
		data := t.TempDir()
		shoal := filepath.Join(prefix, "bin/shoal")
		p := watch.Spawn(t, []string{"SHOAL_DATA_DIR=" + data}, shoal, "run", "-n", "2", "--ckpt-interval", "200ms",
			"--", filepath.Join(build, "counter"), "2000", "1000")
		job := p.WaitLine(`^shoal: job ([^:]+):`, 30*time.Second)[1]
		p.WaitLine(`epoch 2 complete`, time.Minute)
		syscall.Kill(testenv.RankPID(t, data, job, 1), syscall.SIGKILL)
		if code := p.Wait(2 * time.Minute); code != 0 {
			t.Fatalf("counter under the installed shoal run exited %d:\n%s", code, p.Output())
		}
		out := p.Output()
		if !strings.Contains(out, "shoal: rank 1 killed by signal 9; restarting from epoch") {
			t.Errorf("no restart line naming rank 1 and signal 9:\n%s", out)
		}
		if !regexp.MustCompile(`(?m)counter: resumed at step [1-9]`).MatchString(out) {
			t.Errorf("the relaunched counter did not resume mid-run:\n%s", out)
		}
		if !regexp.MustCompile(counterTotal(2000, 2)).MatchString(out) {
			t.Errorf("counter's total after the kill is not the uninterrupted %s:\n%s", counterTotal(2000, 2), out)
		}

		if _, err := exec.LookPath("gfortran"); err != nil {
			return
		}
		fortran := filepath.Join(build, "counter_f")
		if _, err := os.Stat(fortran); err != nil {
			t.Fatalf("gfortran is installed but examples/cmake built no counter_f (Shoal::shoalf missing?)")
		}
		out = output(t, t.TempDir(), []string{"SHOAL_DATA_DIR=" + t.TempDir()}, shoal, "run", "-n", "2",
			"--ckpt-interval", "0", "--", fortran, "50", "0")
		if !regexp.MustCompile(counterTotal(50, 2)).MatchString(out) {
			t.Errorf("counter_f did not print the total %s:\n%s", counterTotal(50, 2), out)
		}
	})

	t.Run("Python package", func(t *testing.T) {
		python := testenv.Built(t, "build/venv/bin/python")
		site := strings.TrimSpace(output(t, "", nil, python, "-c",
			`import sys, sysconfig; print(sysconfig.get_path("purelib", "posix_prefix", {"base": sys.argv[1], "platbase": sys.argv[1]}))`, prefix))
		// The venv has its own shoal; PYTHONPATH puts the installed one first, as a
		// module system would.
		out := output(t, t.TempDir(), []string{"PYTHONPATH=" + site}, python, "-c", `
import shoal
shoal.version_number()  # loads libshoal
maps = open("/proc/self/maps").read()
print(shoal.__file__)
print(shoal.library_path(), shoal.library_path() in maps)
`)
		want := filepath.Join(site, "shoal/__init__.py") + "\n" + filepath.Join(prefix, "lib/libshoal.so") + " True"
		if strings.TrimSpace(out) != want {
			t.Errorf("the installed package printed\n%s\nwant\n%s", out, want)
		}
	})

	mpiccMPICH, errMPICH := exec.LookPath("mpicc.mpich")
	t.Run("CMake refuses another MPI", func(t *testing.T) {
		if errMPICH != nil {
			t.Skip("MPICH not installed (make deps installs it)")
		}
		out, err := tryOutput("", nil, "cmake", "-S", filepath.Join(testenv.Root, "examples/cmake"), "-B", t.TempDir(),
			"-DCMAKE_PREFIX_PATH="+prefix, "-DMPI_C_COMPILER="+mpiccMPICH)
		msg := "is built with Open MPI, but MPI_C_COMPILER (" + mpiccMPICH + ") is MPICH"
		if err == nil || !strings.Contains(strings.Join(strings.Fields(out), " "), msg) {
			t.Errorf("configuring against the Open MPI Shoal with MPICH's mpicc: err %v, want a failure saying %q:\n%s", err, msg, out)
		}
	})

	t.Run("MPICH", func(t *testing.T) {
		if errMPICH != nil {
			t.Skip("MPICH not installed (make deps installs it)")
		}
		testenv.Built(t, "build/mpich/lib/libshoal.so")
		out, err := makeInstall(t, "install-mpich", "PREFIX="+prefix)
		if want := "holds Shoal built with Open MPI; install the MPICH build into a prefix of its own"; err == nil || !strings.Contains(out, want) {
			t.Errorf("make install-mpich into the Open MPI prefix: err %v, want a refusal saying %q:\n%s", err, want, out)
		}
		mprefix := filepath.Join(t.TempDir(), "shoal-mpich")
		if out, err := makeInstall(t, "install-mpich", "PREFIX="+mprefix); err != nil {
			t.Fatalf("make install-mpich PREFIX=%s: %v\n%s", mprefix, err, out)
		}
		build := buildCounter(t, mprefix)
		checkLinked(t, filepath.Join(build, "counter"), filepath.Join(mprefix, "lib/libshoal.so"))
		out = output(t, t.TempDir(), []string{"SHOAL_DATA_DIR=" + t.TempDir()}, filepath.Join(mprefix, "bin/shoal"),
			"run", "-n", "2", "--engine", "mpich", "--ckpt-interval", "0", "--", filepath.Join(build, "counter"), "50", "0")
		if !regexp.MustCompile(counterTotal(50, 2)).MatchString(out) {
			t.Errorf("the MPICH counter did not print the total %s:\n%s", counterTotal(50, 2), out)
		}
	})

	t.Run("DESTDIR", func(t *testing.T) {
		stage := t.TempDir()
		if out, err := makeInstall(t, "install", "DESTDIR="+stage, "PREFIX=/opt/shoal"); err != nil {
			t.Fatalf("make install DESTDIR=%s PREFIX=/opt/shoal: %v\n%s", stage, err, out)
		}
		filepath.WalkDir(stage, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !strings.HasPrefix(path, filepath.Join(stage, "opt/shoal")+"/") {
				t.Errorf("%s is outside DESTDIR/PREFIX", path)
			}
			if b, _ := os.ReadFile(path); strings.Contains(string(b), stage) {
				t.Errorf("%s records the staging directory %s", path, stage)
			}
			return nil
		})
		pc, _ := os.ReadFile(filepath.Join(stage, "opt/shoal/lib/pkgconfig/shoal.pc"))
		if !strings.HasPrefix(string(pc), "prefix=/opt/shoal\n") {
			t.Errorf("staged shoal.pc begins %q, want prefix=/opt/shoal", strings.SplitN(string(pc), "\n", 2)[0])
		}
		libs, _ := filepath.Glob(filepath.Join(stage, "opt/shoal/lib/python3*/site-packages/shoal/_libshoal.py"))
		if len(libs) != 1 {
			t.Fatalf("staged Python package: %d _libshoal.py files, want 1", len(libs))
		}
		if b, _ := os.ReadFile(libs[0]); string(b) != "PATH = '/opt/shoal/lib/libshoal.so'\n" {
			t.Errorf("staged _libshoal.py = %q, want the library's final path", b)
		}
	})

	t.Run("relative PREFIX refused", func(t *testing.T) {
		out, err := makeInstall(t, "install", "PREFIX=opt/shoal")
		if want := "install: PREFIX must be an absolute path, not 'opt/shoal'"; err == nil || !strings.Contains(out, want) {
			t.Errorf("make install PREFIX=opt/shoal: err %v, want a refusal saying %q:\n%s", err, want, out)
		}
		if _, err := os.Stat(filepath.Join(testenv.Root, "opt")); err == nil {
			t.Errorf("make install PREFIX=opt/shoal created %s", filepath.Join(testenv.Root, "opt"))
		}
	})

	t.Run("uninstall", func(t *testing.T) {
		if out, err := makeInstall(t, "uninstall", "PREFIX="+prefix); err != nil {
			t.Fatalf("make uninstall PREFIX=%s: %v\n%s", prefix, err, out)
		}
		filepath.WalkDir(prefix, func(path string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("%s is left after make uninstall", path)
			}
			return err
		})
	})
}

// checkLinked fails unless the program loads lib (ldd's view: the RUNPATH that pkg-config
// or CMake gave it), not a libshoal from the build tree or elsewhere.
func checkLinked(t *testing.T, program, lib string) {
	t.Helper()
	out := output(t, "", nil, "ldd", program)
	if !strings.Contains(out, "=> "+lib+" ") {
		t.Errorf("%s does not load %s:\n%s", program, lib, out)
	}
}
