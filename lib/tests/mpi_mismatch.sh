#!/usr/bin/env bash
# A program built with one MPI and linked with the libshoal built for the other (heat,
# both ways): shoal_init refuses it in one line that names both MPIs, before passing
# the other MPI a handle, and the run fails. Needs both builds: BUILD (Open MPI's) and
# BUILD/mpich (make mpich). Prints "N passed, M failed".
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
if [ ! -e "$BUILD/mpich/lib/libshoal.so" ]; then
	echo "skipped: no MPICH build in $BUILD/mpich (make mpich)"
	exit 0
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
root=$(realpath "$BUILD")
passed=0 failed=0
# case CC MPIRUN LIBDIR WANT: heat built by CC against LIBDIR's libshoal, run on 1 rank
# by MPIRUN, must fail with WANT in its output.
case_() {
	local cc=$1 mpirun=$2 lib=$3 want=$4 out
	"$cc" -O1 -Iexamples -I"$lib/../include" -o "$scratch/heat" examples/heat.c -L"$lib" -lshoal \
		-Wl,-rpath,"$lib" || { failed=$((failed + 1)); return; }
	if out=$(cd "$scratch" && "$mpirun" -n 1 ./heat --steps 5 2>&1); then
		echo "FAILED: built with $cc against $lib, heat ran:"
		echo "$out"
		failed=$((failed + 1))
	elif ! grep -qF "$want" <<<"$out"; then
		echo "FAILED: built with $cc against $lib, no line says: $want; it printed:"
		echo "$out"
		failed=$((failed + 1))
	else
		passed=$((passed + 1))
	fi
}
allow=()
[ "$(id -u)" = 0 ] && allow=(--allow-run-as-root)
mpirun_openmpi() { mpirun.openmpi "${allow[@]}" "$@"; }
case_ mpicc.mpich mpirun.mpich "$root/lib" "shoal: this libshoal is built for Open MPI, but the program runs MPICH (MPICH Version: "
case_ mpicc.openmpi mpirun_openmpi "$root/mpich/lib" "shoal: this libshoal is built for MPICH, but the program runs Open MPI (Open MPI v"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
