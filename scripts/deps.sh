#!/usr/bin/env bash
# Installs what building and testing Shoal needs, only when it is missing:
# Open MPI and xxHash from Debian's packages, Go modules from the module proxy.
set -euo pipefail

need=()
command -v mpicc >/dev/null || need+=(openmpi-bin libopenmpi-dev)
[ -e /usr/include/xxhash.h ] || need+=(libxxhash-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v ip >/dev/null || need+=(iproute2)
command -v tc >/dev/null || need+=(iproute2)
command -v unshare >/dev/null || need+=(util-linux)
command -v ping >/dev/null || need+=(iputils-ping)

if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "deps: missing ${need[*]}: install them as root (apt-get install ${need[*]})" >&2
		exit 1
	fi
	echo "deps: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if ! command -v go >/dev/null; then
	echo "deps: Go is not installed (https://go.dev/doc/install, 1.24 or newer)" >&2
	exit 1
fi
go mod download
