# bench/lib.sh - the harness every bench script sources, from the repository's root:
#
#   set -euo pipefail
#   cd "$(dirname "$0")/.."
#   source bench/lib.sh
#
# What it gives (bench/README.md lists the benches and their result lines):
#   BENCH_NAME              the bench's name: the script's file name without ".sh"
#   bench_fail MSG          "bench/NAME: MSG" on stderr, exit 1; bench_usage MSG: exit 2
#   bench_need PATH...      each file must be there (`make build` makes them), else fail
#   bench_need_cmd CMD HOW  the command must be installed (HOW: how to install it)
#   bench_on_exit CMD       CMD runs when the script exits, for whatever reason; the last
#                           registered runs first, and a failing one stops no other
#   bench_tmpdir VAR [DIR]  a new directory (in DIR, default $TMPDIR or /tmp) in VAR,
#                           removed on exit
#   bench_testbed INST      the testbed instance `tb` works on, brought down on exit
#   tb SUB ARGS...          `shoal testbed SUB --instance INST ARGS` with $BENCH_SHOAL
#                           (default bin/shoal)
#   pin_hosts, two_hosts    one-core testbed hosts bound to one CPU each
#   agents_cpu, aes_speed   the agents' CPU time; the machine's AES-GCM speed now
#   median, spread          of the numbers on stdin, one a line
#   bench_shoalbench VAR    builds bench/cmd/shoalbench (the benches' Go parts), its path
#                           in VAR
#   bench_result K=V...     the bench's result: its JSON line, then its RESULT line
#   bench_relay             copies stdin to stdout, except its RESULT lines, whose pairs
#                           it prints with bench_result at the end
#
# Every bench ends with one RESULT line and prints one JSON line before it, both made
# by bench_result from the same pairs, so the two never disagree. BENCH_JSON=FILE also
# appends the JSON line to FILE: a history of runs, one JSON object a line.

BENCH_NAME=${BENCH_NAME:-$(basename "$0" .sh)}
BENCH_SHOAL=${BENCH_SHOAL:-$PWD/bin/shoal}
# The script's arguments (a sourced file sees its caller's), for the JSON line.
BENCH_ARGS=("$@")

bench_fail() {
    echo "bench/$BENCH_NAME: $*" >&2
    exit 1
}

bench_usage() {
    echo "bench/$BENCH_NAME: $*" >&2
    exit 2
}

# bench_need PATH...: each path must exist; the message names the first missing one.
bench_need() {
    local p
    for p in "$@"; do
        [ -e "$p" ] || bench_fail "$p is missing: run 'make build' first"
    done
}

bench_need_cmd() {
    command -v "$1" >/dev/null || bench_fail "needs $1 ($2)"
}

# BENCH_LOGIN_LIMIT runs a baseline command, plain mpirun, with a login shell's soft
# limit on open files (1024), as a user starts it: Open MPI's mpirun closes every
# descriptor below its limit in each daemon it forks, and this machine's 20,000 made
# the baseline spend 0.7 s of a 128-host launch closing nothing, which Shoal's
# launcher (engine.LauncherOpenFiles) does not.
BENCH_LOGIN_LIMIT=(prlimit --nofile=1024:)

_bench_exit=()
bench_on_exit() { _bench_exit+=("$1"); }
_bench_cleanup() {
    local i
    for ((i = ${#_bench_exit[@]} - 1; i >= 0; i--)); do
        eval "${_bench_exit[i]}" || true
    done
}
trap _bench_cleanup EXIT

# bench_tmpdir VAR [PARENT]: sets VAR to a new directory, removed when the script exits.
bench_tmpdir() {
    local _bench_d
    _bench_d=$(mktemp -d "${2:-${TMPDIR:-/tmp}}/shoal-$BENCH_NAME.XXXXXX")
    bench_on_exit "rm -rf '$_bench_d'"
    printf -v "$1" '%s' "$_bench_d"
}

# bench_testbed INST: the instance tb works on; whatever testbed it holds is brought down
# when the script exits.
bench_testbed() {
    [[ $1 =~ ^[0-9]+$ ]] || bench_usage "testbed instance '$1': want a number"
    BENCH_INST=$1
    if [ -z "${_bench_testbed_down:-}" ]; then
        bench_on_exit 'tb down >/dev/null 2>&1'
        _bench_testbed_down=1
    fi
}

tb() {
    local sub=$1
    shift
    "$BENCH_SHOAL" testbed "$sub" --instance "${BENCH_INST:?bench_testbed first}" "$@"
}

# agents_cpu INSTANCE: the CPU seconds (utime + stime) of the agents of testbed INSTANCE so
# far.
agents_cpu() {
    local sum=0 pid
    for pid in $(pgrep -f "shoal-testbed-$1/n[0-9]*/data" || true); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = shoal ] || continue
        sum=$((sum + $(awk '{ print $14 + $15 }' "/proc/$pid/stat" 2>/dev/null || echo 0)))
    done
    awk -v t="$sum" -v hz="$(getconf CLK_TCK)" 'BEGIN { print t / hz }'
}

# pin_hosts INSTANCE: binds each agent of testbed INSTANCE, with what it starts later (its
# ranks), to one CPU of the machine, host nK to CPU K-1 modulo the CPUs: a one-core host
# then has one core, as a phone or a small VM has, instead of sharing all the machine's.
# On two one-core hosts unbound, the agents' Go runtimes (one P each) handed their P to
# another thread that ran on the other CPU during each long read or write of a copy, and
# spent 13 % more CPU than bound (bench/copy-cost, 1.151 s against 1.020).
pin_hosts() {
    local pid host cpus
    cpus=$(nproc)
    for pid in $(pgrep -f "shoal-testbed-$1/n[0-9]*/data" || true); do
        [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = shoal ] || continue
        host=$(tr '\0' '\n' <"/proc/$pid/cmdline" | grep -o "shoal-testbed-$1/n[0-9]*" | head -1)
        host=${host##*/n}
        taskset -a -cp $(((host - 1) % cpus)) "$pid" >/dev/null
    done
}

# two_hosts SHOAL INSTANCE CORES: brings up testbed INSTANCE with SHOAL, two hosts of CORES
# cores (1 or 2): one-core hosts bound to a CPU each (pin_hosts), two-core hosts unbound,
# sharing the machine's two CPUs (two nodes of two cores each would need four).
two_hosts() {
    "$1" testbed up --instance "$2" --nodes 2 --cores "$3,$3" >/dev/null
    [ "$3" = 2 ] || pin_hosts "$2"
}

# aes_speed: this machine's AES-128-GCM speed now, in GB/s of one core (OpenSSL, 16 KiB
# pieces, as TLS 1.3 seals a record), or "unknown" without openssl. The virtual CPUs of
# this kind of machine do not run at one speed: 2.5 to 3.8 GB/s within a minute of one
# day, 4.46 on another, and the copies' cost follows; a bench that prints CPU time
# prints this beside it.
aes_speed() {
    command -v openssl >/dev/null || { echo unknown; return; }
    openssl speed -evp aes-128-gcm -bytes 16384 -seconds 1 2>/dev/null |
        awk '$1 == "AES-128-GCM" { sub(/k$/, "", $2); printf "%.2f\n", $2 * 1000 / 1e9; found = 1 } END { if (!found) print "unknown" }'
}

# median: the median of the numbers on stdin, one a line; "nan" when there are none.
median() {
    sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else printf "%.10g\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# spread: "MIN MAX" of the numbers on stdin, one a line; "nan nan" when there are none.
spread() {
    sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { if (NR == 0) print "nan nan"; else print lo, hi }'
}

# bench_shoalbench VAR: builds the benches' Go program (bench/cmd/shoalbench) into a
# directory removed on exit and sets VAR to its path.
bench_shoalbench() {
    local _bench_gobin
    bench_tmpdir _bench_gobin
    go build -o "$_bench_gobin/shoalbench" ./bench/cmd/shoalbench || bench_fail "go build ./bench/cmd/shoalbench failed"
    printf -v "$1" '%s' "$_bench_gobin/shoalbench"
}

# _bench_json_string S: S as a JSON string.
_bench_json_string() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\r'/\\r}
    s=${s//$'\t'/\\t}
    printf '"%s"' "$s"
}

# _bench_json_value V: V as a JSON number when it is written as one, null for a figure
# not measured (empty, nan, inf), else a JSON string ("3/4", "all").
_bench_json_value() {
    local v=$1
    if [[ $v =~ ^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$ ]]; then
        printf '%s' "$v"
    elif [[ -z $v || ${v,,} =~ ^[+-]?(nan|inf|infinity)$ ]]; then
        printf 'null'
    else
        _bench_json_string "$v"
    fi
}

# bench_result KEY=VALUE...: prints the bench's JSON line, then its RESULT line, from the
# same pairs (bench/README.md, "Result lines"). A key is letters, digits and _ . : + -
# and not one of the JSON line's own (bench, time, commit, args); a value has no space.
bench_result() {
    local pair key value json="" result="" seen=" " commit arg args=""
    [ $# -gt 0 ] || bench_fail "bench_result: no KEY=VALUE pair"
    for pair in "$@"; do
        key=${pair%%=*}
        value=${pair#*=}
        if [[ $pair != *=* || ! $key =~ ^[A-Za-z_][A-Za-z0-9_.:+-]*$ || $value =~ [[:space:][:cntrl:]] ]]; then
            bench_fail "result '$pair': want KEY=VALUE, KEY of letters, digits and _ . : + -, VALUE without spaces"
        fi
        case $key in bench | time | commit | args) bench_fail "result key '$key' is the JSON line's own: name it otherwise" ;; esac
        [[ $seen != *" $key "* ]] || bench_fail "result key '$key' given twice"
        seen+="$key "
        json+=",$(_bench_json_string "$key"):$(_bench_json_value "$value")"
        result+=" $pair"
    done
    commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
    for arg in "${BENCH_ARGS[@]}"; do
        args+=${args:+,}$(_bench_json_string "$arg")
    done
    json="{\"bench\":$(_bench_json_string "$BENCH_NAME"),\"time\":\"$(date -u +%Y-%m-%dT%H:%M:%SZ)\",\"commit\":$(_bench_json_string "$commit"),\"args\":[$args]$json}"
    printf '%s\n' "$json"
    if [ -n "${BENCH_JSON:-}" ]; then printf '%s\n' "$json" >>"$BENCH_JSON"; fi
    printf 'RESULT%s\n' "$result"
}

# bench_relay: copies stdin to stdout as it comes, except lines that start "RESULT ": their
# pairs, from every such line, are printed with bench_result once stdin ends (nothing when
# there was none). For a report made by another program (shoalbench, a Python block).
# It ignores SIGINT, so that a program that reports when interrupted (shoalbench) is
# heard to its end.
bench_relay() (
    trap '' INT
    line= pairs=() more=()
    while IFS= read -r line || [ -n "$line" ]; do
        if [[ $line == "RESULT "* ]]; then
            read -ra more <<<"${line#RESULT }"
            pairs+=("${more[@]}")
        else
            printf '%s\n' "$line"
        fi
    done
    if [ ${#pairs[@]} -gt 0 ]; then bench_result "${pairs[@]}"; fi
)
