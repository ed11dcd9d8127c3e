#!/usr/bin/env bash
# make test-fortran: the generated module is current, a Fortran program's checkpoint of
# every supported type survives a killed run (test_fortran write, then read, on 2 ranks,
# in the same directory), and one of distributed and replicated regions written by 2
# ranks is restored by 3 (elastic-write, elastic-read), and SHOAL_ELASTIC=1 refuses a
# per-rank region; and the Fortran heat resumes on other counts (lib/tests/resize_heat.sh).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
MPIRUN=(${MPIRUN:-mpirun.openmpi})
case ${MPIRUN[0]} in *openmpi*) MPIRUN+=(--oversubscribe) ; [ "$(id -u)" = 0 ] && MPIRUN+=(--allow-run-as-root) ;; esac
failures=0

echo "== lib/fortran/shoal.f90 is what lib/fortran/generate.sh writes"
if lib/fortran/generate.sh | diff -u lib/fortran/shoal.f90 -; then
	echo "1 passed, 0 failed"
else
	echo "0 passed, 1 failed: run lib/fortran/generate.sh > lib/fortran/shoal.f90"
	failures=$((failures + 1))
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
exe=$(realpath "$BUILD/lib/tests/test_fortran")
for mode in write read; do
	echo "== test_fortran $mode (2 ranks)"
	(cd "$scratch" && SHOAL_CKPT_INTERVAL=0 TEST_FORTRAN_MODE=$mode "${MPIRUN[@]}" -n 2 "$exe") || failures=$((failures + 1))
done

elastic=$(mktemp -d)
for step in "elastic-write 2" "elastic-read 3"; do
	set -- $step
	echo "== test_fortran $1 ($2 ranks)"
	(cd "$elastic" && SHOAL_CKPT_INTERVAL=0 TEST_FORTRAN_MODE=$1 "${MPIRUN[@]}" -n "$2" "$exe") || failures=$((failures + 1))
done
echo "== test_fortran elastic-refuse (1 rank)"
(cd "$elastic" && SHOAL_ELASTIC=1 SHOAL_CKPT_INTERVAL=0 TEST_FORTRAN_MODE=elastic-refuse "${MPIRUN[@]}" -n 1 "$exe") || failures=$((failures + 1))
rm -rf "$elastic"

# The Fortran heat stopped after a checkpoint and resumed with mpirun on another number of
# ranks prints the uninterrupted checksum.
MPIRUN="${MPIRUN[0]}" lib/tests/resize_heat.sh 4:2 4:3 3:4 2:4 -- "$(realpath "$BUILD/examples/fortran/heat")" ||
	failures=$((failures + 1))

if [ "$failures" -ne 0 ]; then
	echo "test-fortran: $failures failed"
	exit 1
fi
echo "test-fortran: all passed"
