#!/usr/bin/env bash
# Runs libshoal's C tests (make test-c): the shard format and test vectors, the names of
# a job directory's files and the automatic interval and its variables (no MPI), the API
# on 1 and 2 ranks, a standalone crash-and-resume on 2 ranks, the traffic files (the
# writer against the test vectors, then a known pattern of sends on 4 ranks), the
# library's exported symbols and its layers (the public functions all in shoal.c, no
# circle of calls between its files), and that the generated MPI wrappers are current.
# Each prints "N passed, M failed"; this script exits non-zero if any of them failed.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
T=$BUILD/lib/tests
MPIRUN=(${MPIRUN:-mpirun.openmpi})
case ${MPIRUN[0]} in
*openmpi*)
	MPIRUN+=(--oversubscribe)
	if [ "$(id -u)" = 0 ]; then MPIRUN+=(--allow-run-as-root); fi
	;;
esac

failures=0
# run [-C DIR] COMMAND...: runs COMMAND (in DIR), counting it as failed if it fails.
run() {
	local dir=.
	if [ "$1" = -C ]; then
		dir=$2
		shift 2
	fi
	echo "== $*"
	if (cd "$dir" && "$@"); then
		return 0
	fi
	echo "FAILED: $*"
	failures=$((failures + 1))
}

run "$T/test_shard" testdata/shards
run "$T/test_traffic_file" testdata/traffic
run "$T/test_jobdir" testdata/jobdir
run "$T/test_interval"

# Open MPI leaks by design at MPI_Finalize, so LeakSanitizer is off for MPI programs;
# AddressSanitizer and UBSan stay on.
export ASAN_OPTIONS=detect_leaks=0
# On a tmpfs the staging buffer is a file that becomes the shard; elsewhere shards are
# written from memory. Both ways where the machine has a tmpfs beside $TMPDIR.
parents=("${TMPDIR:-/tmp}")
if [ -d /dev/shm ] && [ -w /dev/shm ] && [ "$(stat -f -c %T /dev/shm)" = tmpfs ] &&
	[ "$(stat -f -c %T "${parents[0]}")" != tmpfs ]; then
	parents+=(/dev/shm)
fi
for parent in "${parents[@]}"; do
	for n in 1 2; do
		run env TMPDIR="$parent" "${MPIRUN[@]}" -n "$n" "$T/test_api"
	done

	# A run that dies after its checkpoints, then the same command again in the same
	# directory: the second run must resume, not start over. A third run starts over:
	# the second one finished.
	scratch=$(mktemp -d -p "$parent")
	exe=$(realpath "$T/test_resume")
	run -C "$scratch" env RESUME_CRASH_AT=120 RESUME_EXPECT=fresh "${MPIRUN[@]}" -n 2 "$exe" 200
	run -C "$scratch" env RESUME_EXPECT=restart "${MPIRUN[@]}" -n 2 "$exe" 200
	run -C "$scratch" env RESUME_EXPECT=fresh "${MPIRUN[@]}" -n 2 "$exe" 200
	rm -rf "$scratch"
done

# A killed run, then the program with other arguments: it starts afresh and says why,
# instead of resuming the other run's state (an iteration count of 200 in a run of 150).
scratch=$(mktemp -d)
run -C "$scratch" env RESUME_CRASH_AT=120 RESUME_EXPECT=fresh "${MPIRUN[@]}" -n 2 "$exe" 200
run -C "$scratch" env RESUME_EXPECT=fresh "${MPIRUN[@]}" -n 2 "$exe" 150 2>"$scratch/err"
cat "$scratch/err"
echo "== the run with other arguments says why it starts afresh"
if grep -q "^shoal: checkpoint in ./shoal-ckpt/test_resume was written by other arguments (200); starting afresh$" "$scratch/err"; then
	echo "1 passed, 0 failed"
else
	echo "0 passed, 1 failed"
	failures=$((failures + 1))
fi
rm -rf "$scratch"

# Every send call once, on MPI_COMM_WORLD and on other communicators: the traffic files
# must hold exactly what was sent, and nothing with SHOAL_TRAFFIC=0.
scratch=$(mktemp -d)
exe=$(realpath "$T/test_traffic")
run -C "$scratch" env SHOAL_CKPT_INTERVAL=0 "${MPIRUN[@]}" -n 4 "$exe"
rm -rf "$scratch/shoal-ckpt"
run -C "$scratch" env SHOAL_CKPT_INTERVAL=0 SHOAL_TRAFFIC=0 TRAFFIC_EXPECT=off "${MPIRUN[@]}" -n 4 "$exe"
rm -rf "$scratch"

scratch=$(mktemp -d)
exe=$(realpath "$T/test_cxx")
run -C "$scratch" env SHOAL_CKPT_INTERVAL=0 "${MPIRUN[@]}" -n 1 "$exe"
rm -rf "$scratch"

# same NAME WANT GOT: one check that GOT is WANT, printing both if not.
same() {
	if [ "$2" = "$3" ]; then
		echo "1 passed, 0 failed"
		return
	fi
	echo "want:" $2
	echo "got: " $3
	echo "0 passed, 1 failed: $1"
	failures=$((failures + 1))
}

# shoal.h's functions, and the MPI calls the traffic counting intercepts.
echo "== exported symbols of $BUILD/lib/libshoal.so"
api=$(grep -o 'SHOAL_EXPORT [^(]*(' lib/include/shoal.h | grep -o 'shoal_[a-z_]*' | sort)
want=$({
	echo "$api"
	grep -o '^MPI_[A-Za-z_]*' lib/src/pmpi.list
} | sort)
got=$(nm -D --defined-only "$BUILD/lib/libshoal.so" | awk '$2 == "T" { print $3 }' | sort)
same "exported symbols" "$want" "$got"

# The layers (docs/libshoal.md, "Inside the library"), read from the objects: what each
# defines (nm: T, D, B, R) and what it uses of the others' (U). shoal.c defines the
# public functions and nothing another file could use, and no file uses, directly or
# through others, a file that uses it.
obj=$BUILD/lib/obj
echo "== the public functions are shoal.c's, and all it defines"
got=$(nm --defined-only "$obj/shoal.o" | awk '$2 ~ /^[TDBR]$/ { print $3 }' | sort)
same "shoal.o's symbols" "$api" "$got"

echo "== the calls between lib/src files form no circle"
edges=$(for o in "$obj"/*.o; do
	nm "$o" | awk -v file="$(basename "$o" .o).c" \
		'NF == 3 && $2 ~ /^[TDBR]$/ { print "def", $3, file } $1 == "U" { print "use", $2, file }'
done | awk '$1 == "def" { def[$2] = $3; next } { use[NR] = $2; user[NR] = $3 }
	END { for (i in use) if ((use[i] in def) && def[use[i]] != user[i]) print user[i], def[use[i]] }' |
	sort -u)
loop=$(tsort <<<"$edges" 2>&1 >/dev/null)
[ -n "$edges" ] || loop="no uses between the objects of $obj"
same "a circle of calls (tsort names the files in it)" "" "$loop"

echo "== lib/src/pmpi_wrappers.inc is what lib/src/pmpi_generate.py writes"
if lib/src/pmpi_generate.py | diff -u lib/src/pmpi_wrappers.inc -; then
	echo "1 passed, 0 failed"
else
	echo "0 passed, 1 failed: run lib/src/pmpi_generate.py > lib/src/pmpi_wrappers.inc"
	failures=$((failures + 1))
fi

if [ "$failures" -ne 0 ]; then
	echo "test-c: $failures test program(s) failed"
	exit 1
fi
echo "test-c: all passed"
