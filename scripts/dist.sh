#!/usr/bin/env bash
# make dist: what to put on machines that have no build tools, in OUT (dist/):
#
#   shoal-V-linux-amd64.tar.gz    the agent and CLI (static, no cgo), shoal-rank and
#   shoal-V-linux-arm64.tar.gz    shoal-rsh (static C), deploy/ (systemd unit, example
#                                 configuration, logrotate) and README.md
#   shoal-V-android-arm64.tar.gz  the agent and CLI for Android (Termux), docs/phones.md
#   libshoal-V-openmpi-linux-amd64.tar.gz, libshoal-V-mpich-linux-amd64.tar.gz
#                                 make install's tree (PREFIX /usr/local) of each MPI's build
#   shoal-V-src.tar.gz            the source at this commit, to build libshoal where it
#                                 runs (a phone: against Termux's MPI and C library)
#   SHA256SUMS
#
# libshoal is not shipped built for arm64 or Android: it must be built against the MPI the
# programs use there, which a Debian cross build is not (Termux's Open MPI links Android's
# C library and libandroid-shmem). make builds bin/ and build/ first.
set -euo pipefail
cd "$(dirname "$0")/.."

V=${SHOAL_VERSION:?SHOAL_VERSION is not set (make dist sets it)}
OUT=${OUT:-dist}
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
ldflags="-X main.version=$V -X main.commit=$commit"
mkdir -p "$OUT"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT

if ! command -v aarch64-linux-gnu-gcc >/dev/null; then
	echo "dist: no aarch64-linux-gnu-gcc: install gcc-aarch64-linux-gnu" >&2
	exit 1
fi

# agent GOOS GOARCH CC: the agent's tarball; CC builds the C helpers, statically ("" for
# none: the agent falls back to shoal exec-rank and shoal rsh).
agent() {
	local name=shoal-$V-$1-$2
	local d=$stage/$name
	mkdir -p "$d/bin" "$d/deploy"
	CGO_ENABLED=0 GOOS=$1 GOARCH=$2 go build -trimpath -ldflags "$ldflags" -o "$d/bin/shoal" ./cmd/shoal
	if [ -n "$3" ]; then
		$3 -static -std=c11 -O2 -Wall -Wextra -o "$d/bin/shoal-rank" cmd/shoal-rank/shoal-rank.c
		$3 -static -std=c11 -O2 -Wall -Wextra -o "$d/bin/shoal-rsh" cmd/shoal-rsh/shoal-rsh.c
	fi
	cp deploy/* "$d/deploy/"
	cp README.md docs/phones.md "$d/"
	tar -C "$stage" --owner=0 --group=0 -czf "$OUT/$name.tar.gz" "$name"
}
agent linux amd64 gcc
agent linux arm64 aarch64-linux-gnu-gcc
agent android arm64 ""

# lib NAME BUILD MPICC MPIFC: make install's tree of one MPI's build.
lib() {
	local d=$stage/$1
	BUILD=$2 PREFIX=/usr/local DESTDIR=$d/root MPICC=$3 MPIFC=$4 PIP_PYTHON= \
		SYSCONFDIR=/usr/local/etc SYSTEMDUNITDIR=/usr/local/lib/systemd/system scripts/install.sh install >/dev/null
	mv "$d/root/usr/local" "$d/$1"
	tar -C "$d" --owner=0 --group=0 -czf "$OUT/$1.tar.gz" "$1"
}
lib "libshoal-$V-openmpi-linux-amd64" build mpicc.openmpi mpifort.openmpi
lib "libshoal-$V-mpich-linux-amd64" build/mpich mpicc.mpich mpifort.mpich

git archive --format=tar.gz --prefix="shoal-$V/" -o "$OUT/shoal-$V-src.tar.gz" HEAD
(cd "$OUT" && sha256sum ./*-"$V"-*.tar.gz >SHA256SUMS)
ls -l "$OUT"
