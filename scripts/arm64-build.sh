#!/usr/bin/env bash
# Builds libshoal (C and Fortran) and the examples for arm64 with Debian's cross
# compilers (gcc-aarch64-linux-gnu, gfortran-aarch64-linux-gnu) against the arm64 root file
# system of make arm64-root, whose headers, modules and libraries (its own Open MPI,
# xxHash, C library) are the sysroot: make lib examples fortran with BUILD=OUT, so OUT has
# the layout of build/ (OUT/lib/libshoal.so, OUT/lib/libshoalf.so, OUT/examples/heat, …). The programs' rpath is OUT/lib, the same path on the machine and
# in the testbed's arm64 hosts, which see the repository at its own path. A cross
# compiler takes seconds where the root's own compiler under qemu took about 14 minutes.
# The shoal Python package goes to OUT/python, for the root's python3.
set -euo pipefail

ROOT=${ROOT:-/var/cache/shoal/arm64-root}
OUT=${OUT:?OUT: the absolute build directory, e.g. \$PWD/build/arm64}
repo=$(pwd -P)

case $OUT in
"$repo"/*) ;;
*) echo "build-arm64: OUT=$OUT is not under the repository $repo, which is all an arm64 host sees" >&2; exit 1 ;;
esac
if [ ! -e "$ROOT.stamp" ]; then
	echo "build-arm64: no arm64 root at $ROOT (make arm64-root builds it)" >&2
	exit 1
fi
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
command -v aarch64-linux-gnu-gfortran >/dev/null || need+=(gfortran-aarch64-linux-gnu)
if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "build-arm64: no cross compiler: install it as root (apt-get install ${need[*]})" >&2
		exit 1
	fi
	echo "build-arm64: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

mkdir -p "$OUT"
export SHOAL_ARM64_ROOT=$ROOT
mpicc="$repo/scripts/arm64-mpicc"
make -C "$repo" -j"$(nproc)" --no-print-directory BUILD="$OUT" \
	MPICC="$mpicc" MPIFC="$repo/scripts/arm64-mpifort" CC="aarch64-linux-gnu-gcc --sysroot=$ROOT" \
	AR=aarch64-linux-gnu-ar lib examples fortran

# The Python package for the root's python3 (python3-numpy, python3-mpi4py and
# python3-xxhash are among the root's extras): PYTHONPATH=OUT/python, with the path of
# this libshoal recorded as make build records the machine's in its venv.
rm -rf "$OUT/python"
mkdir -p "$OUT/python"
cp -r "$repo/python/src/shoal" "$OUT/python/"
rm -rf "$OUT/python/shoal/__pycache__"
printf "PATH = '%s'\n" "$OUT/lib/libshoal.so" >"$OUT/python/shoal/_libshoal.py"
