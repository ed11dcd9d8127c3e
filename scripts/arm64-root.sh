#!/usr/bin/env bash
# Builds the Debian bookworm arm64 root file system that the testbed's arm64 hosts run
# in (shoal testbed up --arch ...,arm64), from Debian's packages with mmdebstrap, under
# qemu-aarch64 through binfmt_misc. The root is cached at ROOT (default
# /var/cache/shoal/arm64-root) with a stamp of its inputs beside it: when the stamp
# matches, this does nothing but make sure binfmt_misc knows qemu-aarch64.
#
# The root holds its own Open MPI and MPICH, build-essential and libxxhash-dev, which is
# what libshoal and the examples need to build natively inside it. Needs root.
set -euo pipefail

ROOT=${ROOT:-/var/cache/shoal/arm64-root}
SUITE=bookworm
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PACKAGES=(openmpi-bin libopenmpi-dev mpich libmpich-dev build-essential libxxhash-dev make pkg-config)

if [ "$(id -u)" -ne 0 ]; then
	echo "arm64-root: needs root (mmdebstrap, binfmt_misc)" >&2
	exit 1
fi

need=()
command -v mmdebstrap >/dev/null || need+=(mmdebstrap)
command -v arch-test >/dev/null || need+=(arch-test) # mmdebstrap's check of a foreign architecture
[ -x /usr/bin/qemu-aarch64-static ] || need+=(qemu-user-static)
command -v update-binfmts >/dev/null || need+=(binfmt-support)
if [ ${#need[@]} -gt 0 ]; then
	echo "arm64-root: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

# binfmt_misc: mounted when it is not, and qemu-aarch64 registered with the F flag
# (fix-binary), so that the kernel opens the interpreter now and an arm64 program runs in
# any mount namespace and chroot, where /usr/libexec/qemu-binfmt is not to be found.
bm=/proc/sys/fs/binfmt_misc
[ -e $bm/register ] || mount -t binfmt_misc binfmt_misc $bm
if [ -e $bm/qemu-aarch64 ] && ! grep -qx 'flags: .*F.*' $bm/qemu-aarch64; then
	echo -1 >$bm/qemu-aarch64
fi
if [ ! -e $bm/qemu-aarch64 ]; then
	# The rule Debian's qemu-user-static ships (its flags are OCF or OPF by version).
	rule=$(grep -h '^:qemu-aarch64:' /usr/lib/binfmt.d/qemu-aarch64.conf)
	printf '%s' "$rule" >$bm/register
fi
grep -q '^enabled' $bm/qemu-aarch64 || { echo "arm64-root: qemu-aarch64 is not enabled in $bm" >&2; exit 1; }

stamp_want=$(printf '%s\n' "suite=$SUITE" "mirror=$MIRROR" "packages=${PACKAGES[*]}" \
	"script=$(sha256sum "$0" | cut -d' ' -f1)")
if [ -d "$ROOT" ] && [ "$(cat "$ROOT.stamp" 2>/dev/null)" = "$stamp_want" ]; then
	exit 0
fi

echo "arm64-root: building $ROOT (Debian $SUITE arm64: ${PACKAGES[*]})"
mkdir -p "$(dirname "$ROOT")"
tmp="$ROOT.tmp"
rm -rf "$tmp" "$ROOT.stamp"
start=$(date +%s)
# Documentation and translations are left out: nothing in the root reads them.
mmdebstrap --quiet --mode=root --arch=arm64 --variant=apt \
	--aptopt='Apt::Install-Recommends "false"' \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias' \
	--include="$(IFS=,; echo "${PACKAGES[*]}")" \
	"$SUITE" "$tmp" "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main"
rm -rf "$ROOT"
mv "$tmp" "$ROOT"
printf '%s\n' "$stamp_want" >"$ROOT.stamp"
echo "arm64-root: built in $(($(date +%s) - start)) s, $(du -sh "$ROOT" | cut -f1)"
