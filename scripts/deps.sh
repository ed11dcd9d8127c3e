#!/usr/bin/env bash
# Installs what building and testing Shoal needs, only when it is missing:
# Open MPI, MPICH, gfortran, xxHash, CMake, Slurm (for the testbed's Slurm cluster, test/slurm),
# zsh and ksh (login shells test/jobs runs jobs under), prometheus (promtool, test/metrics)
# from Debian's packages; Go and the Go modules from the module proxy.
set -euo pipefail

need=()
command -v mpicc.openmpi >/dev/null || need+=(openmpi-bin libopenmpi-dev)
command -v gfortran >/dev/null || need+=(gfortran)
command -v mpicc.mpich >/dev/null || need+=(mpich libmpich-dev)
[ -e /usr/include/xxhash.h ] || need+=(libxxhash-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v cmake >/dev/null || need+=(cmake) # examples/cmake, built against make install
command -v ip >/dev/null || need+=(iproute2)
command -v tc >/dev/null || need+=(iproute2)
command -v unshare >/dev/null || need+=(util-linux)
command -v ping >/dev/null || need+=(iputils-ping)
# shoal testbed block drops a host's incoming connection openings with nftables (the
# kernel's tc has no drop action built in here).
command -v nft >/dev/null || need+=(nftables)
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3 python3-venv)
# test/metrics checks an agent's /metrics with promtool, and docs/metrics.md's scrape
# config was run with Debian's prometheus.
command -v promtool >/dev/null || need+=(prometheus)
# shoal testbed up --slurm: Debian's Slurm 22.05 and munge. The testbed runs daemons of
# its own, with its own key and configuration; on a machine with systemd the packages
# also enable their services, which the testbed neither needs nor touches.
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sbatch >/dev/null || need+=(slurm-client)
command -v munged >/dev/null || need+=(munge)
# test/jobs runs jobs as users whose login shell is each of these (Open MPI words its
# remote command by the launching user's shell).
command -v zsh >/dev/null || need+=(zsh)
command -v ksh >/dev/null || need+=(ksh)
# test/ui drives the dashboard (shoal ui) in a real browser, headless.
command -v chromium >/dev/null || need+=(chromium)

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

# Go: at least the version go.mod names. Debian's golang-go is older, so when this machine
# has no Go or an older one, the toolchain comes from the Go module proxy (the module
# golang.org/toolchain, which is what `go` itself downloads when it switches toolchains).
want=$(awk '$1 == "go" { print $2; exit }' go.mod)
have=$(go env GOVERSION 2>/dev/null | sed 's/^go//' || true)
older() { [ "$1" != "$2" ] && [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -1)" = "$1" ]; }
if [ -z "$have" ] || older "$have" "$want"; then
	prefix=${SHOAL_GO_PREFIX:-/usr/local}
	if [ ! -w "$prefix" ]; then
		echo "deps: Go ${have:-is missing}; need $want or newer: run as root, or install it (https://go.dev/doc/install)" >&2
		exit 1
	fi
	case $(uname -m) in
	x86_64) arch=amd64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) echo "deps: no Go toolchain download for $(uname -m); install Go $want or newer" >&2; exit 1 ;;
	esac
	tools=()
	for tool in curl unzip; do command -v $tool >/dev/null || tools+=($tool); done
	if [ ${#tools[@]} -gt 0 ]; then
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${tools[@]}" ca-certificates >/dev/null
	fi
	proxy=${GOPROXY:-https://proxy.golang.org}
	proxy=${proxy%%[,|]*}
	mod=v0.0.1-go$want.linux-$arch
	echo "deps: installing Go $want from $proxy into $prefix/lib/shoal-go"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	curl -fsSL -o "$tmp/go.zip" "$proxy/golang.org/toolchain/@v/$mod.zip"
	unzip -q "$tmp/go.zip" -d "$tmp"
	rm -rf "$prefix/lib/shoal-go"
	mkdir -p "$prefix/lib" "$prefix/bin"
	mv "$tmp/golang.org/toolchain@$mod" "$prefix/lib/shoal-go"
	# Module zips keep no file modes.
	chmod +x "$prefix"/lib/shoal-go/bin/* "$prefix"/lib/shoal-go/pkg/tool/*/*
	ln -sf "$prefix/lib/shoal-go/bin/go" "$prefix/lib/shoal-go/bin/gofmt" "$prefix/bin/"
	hash -r
	if [ "$(command -v go)" != "$prefix/bin/go" ]; then
		echo "deps: Go $want is in $prefix/bin, but $(command -v go || echo 'nothing') comes first on PATH" >&2
		exit 1
	fi
fi
go mod download
