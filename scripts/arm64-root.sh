#!/usr/bin/env bash
# Builds the Debian bookworm arm64 root file system that the testbed's arm64 hosts run
# in (shoal testbed up --arch ...,arm64), from Debian's packages with mmdebstrap, under
# qemu-aarch64 through binfmt_misc. The root is cached at ROOT (default
# /var/cache/shoal/arm64-root) in two steps, each with a stamp of its inputs beside it:
#
#   base    ROOT.stamp: suite, mirror, PACKAGES and RECIPE. Rebuilt from nothing (about
#           25 minutes) only when one of those changes.
#   extras  ROOT.extras.stamp: EXTRAS, installed into the base with the root's own
#           apt-get in a chroot, so that a cached root gains a package in minutes.
#
# When both stamps match, this does nothing but make sure binfmt_misc knows
# qemu-aarch64. The base holds its own Open MPI and MPICH, build-essential and
# libxxhash-dev, which is what libshoal and the examples build against; the extras are
# what Python programs need there (numpy, Debian's mpi4py built against the root's Open
# MPI, xxhash). Needs root.
set -euo pipefail

ROOT=${ROOT:-/var/cache/shoal/arm64-root}
SUITE=bookworm
MIRROR=${MIRROR:-http://deb.debian.org/debian}
PACKAGES=(openmpi-bin libopenmpi-dev mpich libmpich-dev build-essential libxxhash-dev make pkg-config)
# RECIPE changes when the base is to be built another way with the same packages (the
# mmdebstrap options below): a new number rebuilds every cached root.
RECIPE=1
EXTRAS=(python3 python3-numpy python3-mpi4py python3-xxhash)

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

# The base stamp. A root whose stamp names the script's sha256 (script=) instead of a
# recipe was built by the recipe numbered 1, and is accepted as such.
stamp_want=$(printf '%s\n' "suite=$SUITE" "mirror=$MIRROR" "packages=${PACKAGES[*]}" "recipe=$RECIPE")
base_built() {
	[ -d "$ROOT" ] && [ -e "$ROOT.stamp" ] || return 1
	local have
	have=$(sed 's/^script=.*/recipe=1/' "$ROOT.stamp")
	[ "$have" = "$stamp_want" ]
}

if ! base_built; then
	echo "arm64-root: building $ROOT (Debian $SUITE arm64: ${PACKAGES[*]})"
	mkdir -p "$(dirname "$ROOT")"
	tmp="$ROOT.tmp"
	rm -rf "$tmp" "$ROOT.stamp" "$ROOT.extras.stamp"
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
fi

extras_want="extras=${EXTRAS[*]}"
if [ "$(cat "$ROOT.extras.stamp" 2>/dev/null)" = "$extras_want" ]; then
	exit 0
fi

# The extras, with the root's apt-get under qemu in a chroot: /proc for the packages'
# scripts, the machine's resolv.conf for the mirror's name. Both are undone however this
# exits, so that the cache holds nothing of the machine. The testbed's arm64 hosts
# mount the cache as the lower layer of an overlay: do this with no testbed up.
echo "arm64-root: installing ${EXTRAS[*]} into $ROOT"
start=$(date +%s)
rm -f "$ROOT.extras.stamp"
resolv_saved=""
cleanup() {
	if mountpoint -q "$ROOT/proc"; then umount "$ROOT/proc"; fi
	if [ -n "$resolv_saved" ]; then mv -f "$resolv_saved" "$ROOT/etc/resolv.conf"; fi
}
trap cleanup EXIT
mount -t proc proc "$ROOT/proc"
if [ -e "$ROOT/etc/resolv.conf" ] || [ -L "$ROOT/etc/resolv.conf" ]; then
	resolv_saved="$ROOT/etc/resolv.conf.arm64-root"
	mv -f "$ROOT/etc/resolv.conf" "$resolv_saved"
fi
cp -L /etc/resolv.conf "$ROOT/etc/resolv.conf"
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive "$@"; }
in_root apt-get update -qq
in_root apt-get install -y -qq --no-install-recommends "${EXTRAS[@]}" >/dev/null
in_root apt-get clean
rm -rf "$ROOT"/var/lib/apt/lists/*
if [ -z "$resolv_saved" ]; then rm -f "$ROOT/etc/resolv.conf"; fi
cleanup
trap - EXIT
printf '%s\n' "$extras_want" >"$ROOT.extras.stamp"
echo "arm64-root: extras installed in $(($(date +%s) - start)) s"
