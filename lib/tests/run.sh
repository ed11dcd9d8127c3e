#!/usr/bin/env bash
# Runs libshoal's C tests (make test-c): the shard format and test vectors, the names of
# a job directory's files, the automatic interval and its variables, and the layouts of
# distributed regions (no MPI), the API on 1 and 2 ranks, checkpoints of N ranks
# restored onto M (4 ranks), a standalone crash-and-resume on 2 ranks, the traffic files (the
# writer against the test vectors, then a known pattern of sends on 4 ranks), the
# library's exported symbols and its layers (the public functions all in shoal.c, no
# circle of calls between its files), a program linked with the libshoal of the other MPI
# refused by shoal_init, and that the generated MPI wrappers are current.
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
run "$T/test_layout"

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

# Checkpoints of N ranks restored onto M, for every N and M up to 4, from one directory
# and from two (as two nodes: half the pieces through MPI, in rounds of 4 KiB); then
# the refusals, whose lines must name what failed. The checkpoint whose header says it
# was written on the other instruction set has its long double region refused.
case $(uname -m) in
aarch64) other_machine="region 11 holds MPI_LONG_DOUBLE written on amd64 (x87 80-bit); this arm64 machine's long double is IEEE binary128: not portable; so are regions 13, 14" ;;
*) other_machine="region 11 holds MPI_LONG_DOUBLE written on arm64 (IEEE binary128); this amd64 machine's long double is x87 80-bit: not portable; so are regions 13, 14" ;;
esac
for split in 0 1; do
	scratch=$(mktemp -d)
	run env RESIZE_SPLIT=$split "${MPIRUN[@]}" -n 4 "$T/test_resize" 2>"$scratch/err"
	grep -v '^shoal: restarting from epoch 1, written by [1-4] ranks, on [1-4] ranks$' "$scratch/err"
	echo "== test_resize (split $split): each refusal in one line naming what failed"
	missing=0
	for want in \
		"shoal: epoch 1 from SHOAL_RESTART_EPOCH unusable (old shard e00000001/r000001.shard of 4 ranks: checksum mismatch)" \
		"shoal: epoch 1 from SHOAL_RESTART_EPOCH unusable (old shard e00000001/r000003.shard of 4 ranks: missing)" \
		"shoal: epoch 1 from SHOAL_RESTART_EPOCH unusable (checkpoint written by 4 ranks; this run has 3; region 9 is per-rank)" \
		"shoal: region 9 is per-rank (shoal_protect): it cannot be restored on 3 ranks from a checkpoint of 4; protect it with shoal_protect_block, shoal_protect_subarray or shoal_protect_replicated" \
		"shoal: region 4 is replicated, but old ranks 0 and 3 saved different values of it" \
		"shoal: shoal_protect(1): the job is elastic (SHOAL_ELASTIC=1) and a per-rank region cannot follow a change of its rank count; protect it with shoal_protect_block, shoal_protect_subarray or shoal_protect_replicated" \
		"shoal: checkpoint written by 4 ranks; this run has 3; region 9 is per-rank; starting afresh" \
		"shoal: SHOAL_RESTART_NRANKS=3 without SHOAL_RESTART_EPOCH: it says how many ranks wrote that epoch" \
		"shoal: $other_machine"; do
		grep -qxF "$want" "$scratch/err" || { echo "missing: $want"; missing=$((missing + 1)); }
	done
	if [ "$missing" -eq 0 ]; then
		echo "1 passed, 0 failed"
	else
		echo "0 passed, 1 failed"
		failures=$((failures + 1))
	fi
	rm -rf "$scratch"
done

# heat stopped after a checkpoint and resumed with mpirun on another number of ranks (N/2,
# N-1, N+1, 2N) prints the uninterrupted checksum, its table intact.
run env HEAT_ARGS="--table 1" MPIRUN="${MPIRUN[0]}" lib/tests/resize_heat.sh 4:2 4:3 3:4 2:4 -- \
	"$(realpath "$BUILD/examples/heat")"

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

# docs/libshoal.md compiles with $(pkg-config --variable=mpicc shoal): the build tree's
# .pc files name the compiler wrappers of the MPI the build is for, the one MPIRUN runs.
echo "== the build tree's shoal.pc and shoal-fortran.pc name their MPI's compiler wrappers"
family=$(basename "${MPIRUN[0]}" | sed 's/^[a-z]*\.//')
for v in "shoal mpicc" "shoal-fortran mpifort" "shoal mpifort"; do
	set -- $v
	if [ -e "$BUILD/lib/pkgconfig/$1.pc" ]; then
		w=$(PKG_CONFIG_PATH=$BUILD/lib/pkgconfig pkg-config --variable="$2" "$1")
		same "$1.pc's $2, an executable of the $family build" "$2.$family" "$([ -x "$w" ] && basename "$w")"
	fi
done

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

run env BUILD="$BUILD" lib/tests/mpi_mismatch.sh

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
