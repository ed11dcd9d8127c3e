#!/usr/bin/env bash
# bench/kernels.sh - what checkpointing with Shoal costs the benchmark kernels.
#
#   bench/kernels.sh [--class S|W|A] [--ranks N] [--interval SECONDS] [--repeat R] [KERNEL...]
#
# Runs each kernel (default: cg mg ft is ep) at class W on 4 ranks, in this one invocation,
# twice: with Shoal, checkpointing every 10 s, and its -plain build (Shoal compiled out) under
# mpirun. "With Shoal" means `bin/shoal run`; when bin/shoal is missing or cannot run a job,
# mpirun with libshoal in standalone mode (SHOAL_DIR in a temporary directory).
#
# Times are the kernels' own timers (their iterations; start-up and verification excluded),
# the best of R repeats (default 3; other work on the machine only ever slows a run down).
# The checkpoint columns come from the line libshoal appends to $SHOAL_STATS at
# shoal_finalize: checkpoints taken, bytes per rank per checkpoint, and the mean time a
# checkpoint blocked the ranks. Target: with / without <= 1.03. The last line is
# RESULT cg_ratio=R cg_pairs=P … for each kernel: best against best, and the median of
# the pairs' ratios.
#
# Each repeat is also a pair (with Shoal first in odd repeats, plain first in even ones),
# and the row gives the median of the pairs' ratios with their lowest and highest: a
# machine that drifts over minutes moves both runs of a pair, so the median of pairs
# is steadier than one best against another when the spread is wide.
#
# On a shared machine two runs of one binary may differ by 10 % or more, more than the
# target, so each kernel's row also gives what checkpointing took of the run by the
# libshoal's own accounting ("by accounting"): the time the checkpoints blocked the ranks
# (checkpoints × the worst rank's mean), the agreements' own cost (their number × the
# least one took; the time ranks wait there for late ones their next collective would
# wait anyway), and the CPU time of the ranks' background threads (hashing and writing
# shards, summed over the ranks) spread over the cores the ranks share, all over the
# kernel's time with Shoal. The last counts in full even where the threads ran while
# the ranks waited for each other, so it is an upper bound there; the whole leaves out
# what Shoal costs beside checkpoints (counting traffic, the snapshot calls between
# agreements), which the ratio holds.
#
# On a virtual machine that hands the memory its guest frees back to the host at once
# (free page reporting; /sys/module/page_reporting/parameters/ on such a guest), every
# page of a new shard file faults in from the host: ft's single checkpoint of 128 MiB a
# rank then costs its writers 1.5 to 1.8 CPU-s, against 0.22 s where freed memory stays
# with the guest (measured on one such machine with the reporting delayed a minute).
# KERNELS_LAUNCHER=shoal|mpirun forces the launcher of the runs with Shoal.
#
# Needs `make kernels` (and `make go-build` for bin/shoal). Exits non-zero when a run fails
# or does not verify; a ratio above the target is reported, not failed, since timings on a
# shared machine are noisy.
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh

BUILD=${BUILD:-build}
class=W ranks=4 interval=10 repeat=3
usage() {
    sed -n '4p' "$0" | sed 's/^# *//' >&2
    exit 2
}
while [ $# -gt 0 ]; do
    case $1 in
    --class) class=${2:?}; shift 2 ;;
    --ranks) ranks=${2:?}; shift 2 ;;
    --interval) interval=${2:?}; shift 2 ;;
    --repeat) repeat=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    -*) echo "kernels.sh: unknown flag $1" >&2; usage ;;
    *) break ;;
    esac
done
kernels=("$@")
[ ${#kernels[@]} -gt 0 ] || kernels=(cg mg ft is ep)
for k in "${kernels[@]}"; do
    for bin in "$BUILD/bench/kernels/$k" "$BUILD/bench/kernels/$k-plain"; do
        [ -x "$bin" ] || { echo "kernels.sh: $bin is missing; run 'make kernels'" >&2; exit 1; }
    done
done

bench_tmpdir work

# The plain runs get the flags `shoal run` gives mpirun: when ranks outnumber cores,
# oversubscribe, bind to nothing and yield when idle; otherwise mpirun's defaults (a rank
# bound to a core, polling while it waits).
mpirun_flags=(-n "$ranks")
[ "$ranks" -gt "$(nproc)" ] && mpirun_flags+=(--oversubscribe --bind-to none --mca mpi_yield_when_idle 1)
[ "$(id -u)" = 0 ] && mpirun_flags+=(--allow-run-as-root)

launcher=${KERNELS_LAUNCHER:-}
if [ -z "$launcher" ]; then
    if [ -x bin/shoal ] && bin/shoal run -n 1 --quiet -- /bin/true >/dev/null 2>&1; then
        launcher=shoal
    else
        launcher=mpirun
    fi
fi

# run_with_shoal KERNEL OUT STATS
run_with_shoal() {
    local prog=$BUILD/bench/kernels/$1
    if [ $launcher = shoal ]; then
        SHOAL_STATS=$3 bin/shoal run -n "$ranks" --quiet --ckpt-interval "${interval}s" \
            -- "$prog" --class "$class" >"$2" 2>&1
    else
        local dir
        dir=$(mktemp -d "$work/ckpt.XXXXXX")
        SHOAL_DIR=$dir SHOAL_CKPT_INTERVAL=$interval SHOAL_STATS=$3 \
            mpirun "${mpirun_flags[@]}" -x SHOAL_DIR -x SHOAL_CKPT_INTERVAL -x SHOAL_STATS \
            "$prog" --class "$class" >"$2" 2>&1
        rm -rf "$dir"
    fi
}

# run_plain KERNEL OUT
run_plain() {
    mpirun "${mpirun_flags[@]}" "$BUILD/bench/kernels/$1-plain" --class "$class" >"$2" 2>&1
}

# seconds OUT: the kernel's `time:` line (shoal run prefixes rank output with "[0] ").
seconds() { sed -nE 's/^(\[[0-9]+\] )?time: ([0-9.]+) s$/\2/p' "$1" | tail -1; }
verified() { grep -qE '^(\[[0-9]+\] )?verification: passed' "$1"; }
stat_field() { sed -nE "s/.*\"$2\":([0-9.eE+-]+).*/\1/p" "$1" | tail -1; }
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (a == "" || b + 0 < a + 0) ? b : a }'; }

echo "kernels at class $class on $ranks ranks; with Shoal: $launcher, checkpoint every ${interval} s;" \
    "best of $repeat"
cores=$(( ranks < $(nproc) ? ranks : $(nproc) ))
printf '%-6s %10s %12s %7s %20s %12s %15s %18s %15s %15s\n' kernel "with (s)" "without (s)" ratio \
    "pairs: median (range)" \
    checkpoints "MiB/ckpt/rank" "blocking mean (s)" "writer CPU (s)" "by accounting"
status=0 over=() over_pairs=() result=()
for k in "${kernels[@]}"; do
    with="" without="" stats_best="" pairs=()
    for ((r = 1; r <= repeat; r++)) do
        out=$work/$k.$r
        # Odd repeats run with Shoal first, even ones plain first, so that a machine
        # slowing down or speeding up through a pair does not favour either side.
        for side in $( ((r % 2)) && echo with plain || echo plain with); do
            if [ $side = with ]; then
                run_with_shoal "$k" "$out.with" "$out.stats" && verified "$out.with" && continue
                echo "$k with Shoal failed or did not verify; its output:" >&2
            else
                run_plain "$k" "$out.plain" && verified "$out.plain" && continue
                echo "$k-plain failed or did not verify; its output:" >&2
            fi
            tail -5 "$out.$side" >&2
            status=1
            continue 3
        done
        t=$(seconds "$out.with") u=$(seconds "$out.plain")
        [ "$(min "$with" "$t")" = "$t" ] && { with=$t; stats_best=$out.stats; }
        without=$(min "$without" "$u")
        pairs+=("$(awk -v a="$t" -v b="$u" 'BEGIN { printf "%.3f", a / b }')")
    done
    # The pairs' ratios: their median, and the lowest and highest (the machine's spread).
    pmed=$(printf %.3f "$(printf '%s\n' "${pairs[@]}" | median)")
    read -r plo phi < <(printf '%s\n' "${pairs[@]}" | spread)
    ckpts=n/a mib=n/a block=n/a wcpu=n/a acct=n/a
    if [ -s "$stats_best" ]; then
        ckpts=$(stat_field "$stats_best" checkpoints)
        mib=$(awk -v b="$(stat_field "$stats_best" bytes_per_rank)" 'BEGIN { printf "%.1f", b / 1048576 }')
        block=$(awk -v s="$(stat_field "$stats_best" blocking_mean_s)" 'BEGIN { printf "%.4f", s }')
        wcpu=$(awk -v s="$(stat_field "$stats_best" writer_cpu_s)" 'BEGIN { printf "%.3f", s }')
        acct=$(awk -v n="$ckpts" -v b="$(stat_field "$stats_best" blocking_mean_s)" \
            -v na="$(stat_field "$stats_best" agreements)" -v a="$(stat_field "$stats_best" agreement_cost_s)" \
            -v w="$wcpu" -v c="$cores" -v t="$with" \
            'BEGIN { printf "%.3f", 1 + (n * b + na * a + w / c) / t }')
    fi
    ratio=$(awk -v a="$with" -v b="$without" 'BEGIN { printf "%.3f", a / b }')
    awk -v r="$ratio" 'BEGIN { exit !(r > 1.03) }' && over+=("$k")
    awk -v r="$pmed" 'BEGIN { exit !(r > 1.03) }' && over_pairs+=("$k")
    printf '%-6s %10.3f %12.3f %7s %20s %12s %15s %18s %15s %15s\n' "$k" "$with" "$without" "$ratio" \
        "$pmed ($plo-$phi)" "$ckpts" \
        "$mib" "$block" "$wcpu" "$acct"
    result+=("${k}_ratio=$ratio" "${k}_pairs=$pmed")
done
if [ ${#over[@]} -gt 0 ] || [ ${#over_pairs[@]} -gt 0 ]; then
    echo "above the target ratio of 1.03: best against best: ${over[*]:-none};" \
        "the pairs' median: ${over_pairs[*]:-none}"
else
    echo "every ratio within the target of 1.03"
fi
if [ ${#result[@]} -gt 0 ]; then bench_result "${result[@]}"; fi
exit $status
