#!/usr/bin/env bash
# The single-machine demo (make demo without root): a 4-rank heat-diffusion job on this machine checkpoints while it runs;
# midway one rank is killed with SIGKILL; Shoal relaunches the job from its newest
# complete checkpoint, and the result equals an uninterrupted run's.
set -euo pipefail
cd "$(dirname "$0")/.."

SHOAL=bin/shoal
HEAT=build/examples/heat
ARGS=(--size 1200 --steps 1500)
# The interrupted run is paced (each step lasts at least 4 ms) so that it takes about 6 s on
# any machine: long enough to watch, and to kill a rank after epoch 2 while it still runs.
PACE=(--pace 4000)
export SHOAL_DATA_DIR="${SHOAL_DATA_DIR:-$(mktemp -d /tmp/shoal-demo.XXXXXX)}"
trap 'rm -rf "$SHOAL_DATA_DIR"' EXIT

say() { printf '\n\033[1mdemo: %s\033[0m\n' "$*"; }

say "1/2 uninterrupted reference run: heat on 4 ranks"
ref=$("$SHOAL" run -n 4 --quiet -- "$HEAT" "${ARGS[@]}" | tee /dev/stderr | sed -n 's/.*checksum: //p')

say "2/2 the same job, checkpointing every second; a rank will be killed after epoch 2"
out="$SHOAL_DATA_DIR/run.out"
"$SHOAL" run -n 4 --ckpt-interval 1s -- "$HEAT" "${ARGS[@]}" "${PACE[@]}" >"$out" 2>&1 &
run=$!
tail -f "$out" --pid=$run &
tailer=$!
until grep -q "epoch 2 complete" "$out"; do
	kill -0 $run 2>/dev/null || { echo "demo: the job ended before epoch 2"; exit 1; }
	sleep 0.2
done
job=$(sed -n 's/^shoal: job \([^:]*\):.*/\1/p' "$out" | head -1)
pid=$(sed -n 's/.*pid=\([0-9]*\) state=running.*/\1/p' "$SHOAL_DATA_DIR/jobs/$job/ranks/r000002")
say "killing rank 2 (pid $pid) with SIGKILL"
kill -9 "$pid"
status=0
wait $run || status=$?
kill $tailer 2>/dev/null || true
wait $tailer 2>/dev/null || true
got=$(sed -n 's/.*checksum: //p' "$out")

say "reference checksum: $ref"
say "after the kill:     $got (exit status $status)"
if [ "$status" -eq 0 ] && [ -n "$ref" ] && [ "$ref" = "$got" ] && grep -q "restarting from epoch" "$out"; then
	say "the job survived the lost rank and computed exactly the uninterrupted result"
else
	say "FAILED: results differ or the job did not restart"
	exit 1
fi
