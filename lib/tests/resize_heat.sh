#!/usr/bin/env bash
# lib/tests/resize_heat.sh N:M... -- PROGRAM [ARGS...]
#
# A heat (C, Fortran or Python: PROGRAM and its arguments before heat's own) stopped
# after a checkpoint on N ranks and resumed with plain mpirun on M ranks in the same
# directory prints the checksum of an uninterrupted run, bit for bit, for each N:M
# given. The first run is stopped (SIGTERM to mpirun) once the manifest lists an epoch;
# the second must say it restarts from that epoch written by N ranks on M ranks, and
# that heat resumed mid-run. Used by make test-c (C), make test-fortran (Fortran) and
# the Python tests (python/tests/test_elastic.py), so that the three languages are held
# to the same runs. HEAT_ARGS adds arguments to heat's (the C heat's --table, whose
# "table: ... intact" line must then follow). Prints "N passed, M failed"; exits 1 if
# any failed.
set -u
pairs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	pairs+=("$1")
	shift
done
shift
[ $# -gt 0 ] || { echo "usage: $0 N:M... -- PROGRAM [ARGS...]" >&2; exit 2; }
prog=("$@")
MPIRUN=(${MPIRUN:-mpirun.openmpi})
case ${MPIRUN[0]} in
*openmpi*)
	MPIRUN+=(--oversubscribe)
	if [ "$(id -u)" = 0 ]; then MPIRUN+=(--allow-run-as-root); fi
	;;
esac
# 1500 steps of at least 1 ms: the first run lasts 1.5 s or more, its first checkpoint
# (every 0.2 s) comes well before its end. The same arguments in both runs: a
# standalone checkpoint belongs to its program's arguments.
args=(--size 48 --steps 1500 --pace 1000 ${HEAT_ARGS:-})
passed=0
failed=0
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && SHOAL_CKPT_INTERVAL=0 SHOAL_DIR="$scratch/reference" \
	"${MPIRUN[@]}" -n 2 "${prog[@]}" "${args[@]}" >"$scratch/reference.out" 2>&1)
want=$(sed -n 's/^checksum: //p' "$scratch/reference.out")
[ -n "$want" ] || { cat "$scratch/reference.out"; fail "the uninterrupted run printed no checksum"; }

for pair in "${pairs[@]}"; do
	n=${pair%%:*} m=${pair#*:}
	dir=$scratch/$n-$m
	mkdir -p "$dir"
	echo "== ${prog[*]##*/}: stopped on $n ranks after a checkpoint, resumed on $m"
	(cd "$dir" && exec env SHOAL_JOB=heat SHOAL_CKPT_INTERVAL=0.2 "${MPIRUN[@]}" -n "$n" "${prog[@]}" "${args[@]}") \
		>"$dir/first.out" 2>&1 &
	pid=$!
	manifest=$dir/shoal-ckpt/heat/manifest
	for _ in $(seq 600); do
		grep -q '^epoch ' "$manifest" 2>/dev/null && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -TERM "$pid" 2>/dev/null
	wait "$pid"
	epoch=$(sed -n 's/^epoch \([0-9]*\) nranks '"$n"' .*/\1/p' "$manifest" 2>/dev/null | tail -1)
	if [ -z "$epoch" ] || [ -e "$dir/shoal-ckpt/heat/finished" ]; then
		cat "$dir/first.out"
		fail "$n:$m: the first run left no epoch of $n ranks before it ended"
		continue
	fi
	(cd "$dir" && SHOAL_JOB=heat SHOAL_CKPT_INTERVAL=0.2 "${MPIRUN[@]}" -n "$m" "${prog[@]}" "${args[@]}") >"$dir/second.out" 2>&1
	out=$dir/second.out
	got=$(sed -n 's/^checksum: //p' "$out")
	if ! grep -qE "^shoal: restarting from epoch [0-9]+, written by $n ranks, on $m ranks$" "$out"; then
		cat "$out"
		fail "$n:$m: no line saying the run restarts from an epoch of $n ranks on $m"
	elif ! grep -qE '^heat: resumed at step [1-9]' "$out"; then
		cat "$out"
		fail "$n:$m: heat did not resume mid-run"
	elif [ "$got" != "$want" ]; then
		fail "$n:$m: checksum $got, want $want (uninterrupted)"
	elif grep -q '^table: ' "$out" && ! grep -qE '^table: [0-9]+ MB per rank intact$' "$out"; then
		grep '^table: ' "$out"
		fail "$n:$m: the table is not intact"
	else
		echo "checksum $got, as uninterrupted"
		passed=$((passed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
