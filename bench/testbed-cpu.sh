# bench/testbed-cpu.sh - sourced by bench scripts that read a testbed's CPU time.

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

# middle: the median of the numbers on stdin, "nan" when there are none.
middle() {
    sort -g |
        awk '{ v[NR] = $1 } END { if (NR == 0) print "nan"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
