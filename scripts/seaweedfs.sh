#!/usr/bin/env bash
# Builds SeaweedFS's weed, the S3-compatible server the tests and `shoal testbed s3 up`
# run, from the Go module proxy, once: it is cached at CACHE/VERSION/weed with a stamp
# beside it (CACHE/VERSION/stamp, naming the module and version), so the next run with the
# same VERSION does nothing. weed is a separate program (Apache-2.0) that Shoal only runs;
# nothing of it is linked into shoal. Prints the path of weed.
set -euo pipefail

MODULE=github.com/seaweedfs/seaweedfs
VERSION=${VERSION:-v0.0.0-20261109003541-7506e5f91cd6}
CACHE=${CACHE:-/var/cache/shoal/seaweedfs}
GO=${GO:-go}

dir=$CACHE/$VERSION
want="module=$MODULE version=$VERSION"
if [ -x "$dir/weed" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$want" ]; then
	echo "$dir/weed"
	exit 0
fi

mkdir -p "$CACHE"
tmp=$(mktemp -d "$CACHE/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "seaweedfs: building weed $VERSION from the module proxy (minutes, once)" >&2
start=$(date +%s)
# Not `go install weed@VERSION`: SeaweedFS's go.mod has replace directives, which go
# install refuses. The module's source comes from the proxy into the module cache and is
# built there as its own main module (the cache is read-only; the build writes nothing
# into it), with GOFLAGS cleared so that a caller's -mod or -tags are not the server's.
src=$(cd "$tmp" && GOFLAGS= "$GO" mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src/weed" ] || { echo "seaweedfs: $MODULE@$VERSION: no source from the module proxy" >&2; exit 1; }
(cd "$src" && GOFLAGS="-buildvcs=false -mod=readonly" CGO_ENABLED=0 "$GO" build -o "$tmp/bin/weed" ./weed)
echo "seaweedfs: built in $(($(date +%s) - start)) s" >&2
rm -rf "$dir"
mkdir -p "$dir"
mv "$tmp/bin/weed" "$dir/weed"
printf '%s\n' "$want" >"$dir/stamp"
echo "$dir/weed"
