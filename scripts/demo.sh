#!/usr/bin/env bash
# make demo: the cluster demo on hosts made of network namespaces when this machine
# allows it (root, iproute2), else the single-machine demo.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && command -v nsenter >/dev/null; then
	exec scripts/demo-cluster.sh
fi
echo "demo: not root (network namespaces need it): the single-machine demo instead"
exec scripts/demo-local.sh
