#!/usr/bin/env bash
# Builds libshoal and the examples for arm64 natively inside the arm64 root file system
# (make arm64-root), under qemu-aarch64, with that root's own Open MPI: make lib examples
# with BUILD=OUT, so OUT has the layout of build/ (OUT/lib/libshoal.so,
# OUT/examples/heat, …). The root is seen through an overlay in a mount namespace of
# this script's own, with the repository bound at its own path inside, so the programs'
# rpath (OUT/lib) is the same path on the machine and in the testbed's arm64 hosts, and
# the cached root stays as built. Needs root.
set -euo pipefail

ROOT=${ROOT:-/var/cache/shoal/arm64-root}
OUT=${OUT:?OUT: the absolute build directory, e.g. \$PWD/build/arm64}
repo=$(pwd -P)

case $OUT in
"$repo"/*) ;;
*) echo "build-arm64: OUT=$OUT is not under the repository $repo, which is all the root sees" >&2; exit 1 ;;
esac
if [ ! -e "$ROOT.stamp" ]; then
	echo "build-arm64: no arm64 root at $ROOT (make arm64-root builds it)" >&2
	exit 1
fi
mkdir -p "$OUT"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unshare --mount --propagation private -- /bin/sh -c '
	set -e
	mkdir -p "$1/upper" "$1/work" "$1/root"
	mount -t overlay overlay -o "lowerdir=$2,upperdir=$1/upper,workdir=$1/work" "$1/root"
	for d in /proc /dev "$3"; do
		mkdir -p "$1/root$d"
		mount --rbind "$d" "$1/root$d"
	done
	exec chroot "$1/root" /usr/bin/make -C "$3" -j"$(nproc)" --no-print-directory BUILD="$4" MPICC=mpicc.openmpi lib examples
' arm64-build "$work" "$ROOT" "$repo" "$OUT"
