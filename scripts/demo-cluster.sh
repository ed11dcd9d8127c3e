#!/usr/bin/env bash
# The cluster demo (make demo as root): four hosts made of network namespaces on
# this machine; a heat-diffusion job is submitted from n1, which coordinates it;
# midway n1 is killed with everything on it. Another node takes the job over and
# it finishes on the three that remain with exactly the uninterrupted result, as
# seen from n2.
set -euo pipefail
cd "$(dirname "$0")/.."

SHOAL=$PWD/bin/shoal
HEAT=$PWD/build/examples/heat
ARGS=(--size 800 --steps 3000)
# Paced so that the run takes about 10 s on any machine: time to lose n1 after
# epoch 2 with work left to do.
PACE=(--pace 3000)
export SHOAL_TESTBED_INSTANCE=${SHOAL_TESTBED_INSTANCE:-60}
unset SHOAL_AGENT
tmp=$(mktemp -d /tmp/shoal-demo.XXXXXX)
cleanup() {
	"$SHOAL" testbed down >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

say() { printf '\n\033[1mdemo: %s\033[0m\n' "$*"; }
on() { local host=$1; shift; "$SHOAL" testbed exec "$host" -- "$@"; }

say "1/4 uninterrupted reference run: heat on 6 ranks, on this machine alone"
ref=$(SHOAL_DATA_DIR=$tmp/ref "$SHOAL" run -n 6 --quiet -- "$HEAT" "${ARGS[@]}" | sed -n 's/.*checksum: //p')
echo "checksum: $ref"

say "2/4 four hosts (n1..n4, 2 cores each), each running a Shoal agent"
"$SHOAL" testbed up --nodes 4 --cores 2 >/dev/null
# Settled: one leader and two more voters (the fourth node keeps a copy of the jobs).
until [ "$(on n1 "$SHOAL" nodes --json | grep -c -E '"role": "(leader|voter)"')" -ge 3 ]; do sleep 0.2; done
on n1 "$SHOAL" nodes

say "3/4 heat submitted from n1 (detached), checkpointing every second; n1 coordinates it"
job=$(cd "$tmp" && on n1 "$SHOAL" run --detach -n 6 --ckpt-interval 1s -- "$HEAT" "${ARGS[@]}" "${PACE[@]}" | tail -1)
echo "job id: $job"
until on n2 "$SHOAL" events "$job" 2>/dev/null | grep -q "epoch 2 complete"; do sleep 0.2; done
say "epoch 2 is complete: killing n1, the coordinating host, with everything on it"
"$SHOAL" testbed kill n1

say "4/4 following the job from n2"
status=0
on n2 "$SHOAL" wait "$job" || status=$?
on n2 "$SHOAL" events "$job" | grep -v -E ' output(-err)? ' | grep -E 'coordinator|lost|restart|launch|finished' || true
got=$(on n2 "$SHOAL" logs "$job" | sed -n 's/.*checksum: //p')

say "reference checksum: $ref"
say "after losing n1:    $got (shoal wait: exit status $status)"
if [ "$status" -eq 0 ] && [ -n "$ref" ] && [ "$ref" = "$got" ]; then
	say "the job outlived its coordinator and computed exactly the uninterrupted result"
else
	say "FAILED: results differ or the job did not finish"
	exit 1
fi
