#!/usr/bin/env bash
# The machine-written shard vectors (docs/shard-format.md, "Portability"): lib/tests/abi_shard
# built for amd64 (BUILD/lib/tests/abi_shard) and for arm64 (against BUILD/arm64, the
# libshoal of make build-arm64, run under qemu-aarch64 with the arm64 root's libraries).
#   scripts/abi-shards.sh write   writes testdata/shards/abi-amd64.shard and abi-arm64.shard
#                                 anew (make abi-vectors; commit them as written)
#   scripts/abi-shards.sh check   restores each committed one on both machines: every region
#                                 bit for bit, the long double ones refused where the two
#                                 machines' long double differ (make test-arm64)
set -euo pipefail
cmd=${1:?usage: scripts/abi-shards.sh write|check}
ROOT=${ROOT:-/var/cache/shoal/arm64-root}
BUILD=${BUILD:-build}
repo=$(pwd -P)
build=$(cd "$BUILD" && pwd -P)
amd64=$build/lib/tests/abi_shard
arm64=$build/arm64/lib/tests/abi_shard
[ -x "$amd64" ] || { echo "abi-shards: no $amd64 (make $BUILD/lib/tests/abi_shard)" >&2; exit 1; }
[ -e "$build/arm64/lib/libshoal.so" ] || { echo "abi-shards: no arm64 libshoal in $build/arm64 (make build-arm64)" >&2; exit 1; }
mkdir -p "$(dirname "$arm64")"
SHOAL_ARM64_ROOT=$ROOT "$repo/scripts/arm64-mpicc" -std=c99 -Wall -Wextra -O1 -g \
	-D_POSIX_C_SOURCE=200809L -I"$repo/lib/include" -o "$arm64" "$repo/lib/tests/abi_shard.c" \
	-L"$build/arm64/lib" -lshoal -Wl,-rpath,"$build/arm64/lib"

run() { # run ISA ARGS...
	local isa=$1
	shift
	if [ "$isa" = arm64 ]; then
		qemu-aarch64-static -L "$ROOT" "$arm64" "$@"
	else
		"$amd64" "$@"
	fi
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
case $cmd in
write)
	for isa in amd64 arm64; do
		run "$isa" write "$tmp/$isa" >/dev/null
		cp "$tmp/$isa/abi-$isa/e00000001/r000000.shard" "$repo/testdata/shards/abi-$isa.shard"
		echo "testdata/shards/abi-$isa.shard written on $isa"
	done
	;;
check)
	failed=0
	declare -A ld=([amd64]="x87 80-bit" [arm64]="IEEE binary128")
	for from in amd64 arm64; do
		for on in amd64 arm64; do
			dir=$tmp/$from-on-$on
			mkdir -p "$dir/abi-$from/e00000001"
			cp "$repo/testdata/shards/abi-$from.shard" "$dir/abi-$from/e00000001/r000000.shard"
			echo "== abi-$from.shard restored on $on"
			if ! run "$on" restore "$dir" "abi-$from" >"$dir.out" 2>&1; then
				failed=1
			fi
			grep -v '^ok: region' "$dir.out" || true
			echo "$(grep -c '^ok: region' "$dir.out") regions bit for bit"
			if [ "$from" != "$on" ]; then
				want="region 15 holds MPI_LONG_DOUBLE written on $from (${ld[$from]}); this $on machine's long double is ${ld[$on]}: not portable; so is region 28"
				if grep -qF "shoal: $want" "$dir.out"; then
					echo "ok: the refusal names both machines"
				else
					echo "FAIL: no line \"$want\""
					failed=1
				fi
			fi
		done
	done
	[ $failed = 0 ] && echo "PASS: abi shards" || { echo "FAIL: abi shards"; exit 1; }
	;;
*)
	echo "usage: scripts/abi-shards.sh write|check" >&2
	exit 2
	;;
esac
