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
