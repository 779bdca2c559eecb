#!/usr/bin/env bash
# Builds the Vitess commands the real-Vitess tests run (vtctld, vtctldclient, vttablet,
# mysqlctl, vtgate) from the module proxy with `go build`, into a cache directory outside the
# tree, and prints that directory (export it as LOAM_VITESS_BIN). The first build takes about
# 18 minutes on a loaded 2-core machine; later runs reuse Go's build cache and take seconds.
# Usage: build.sh [dir]
# The default dir is /var/cache/loam/vitess-v0.24.4 as root (the tests run the programs as
# nobody, who cannot reach into /root), else ${XDG_CACHE_HOME:-$HOME/.cache}/loam/vitess-v0.24.4.
set -euo pipefail
cd "$(dirname "$0")"
if [ "$(id -u)" = 0 ]; then
  default=/var/cache/loam/vitess-v0.24.4
else
  default=${XDG_CACHE_HOME:-$HOME/.cache}/loam/vitess-v0.24.4
fi
out=${1:-$default}
mkdir -p -m 0755 "$out"
# GOWORK=off: this module stands alone; -mod=mod lets go.sum gain a hash a newer Go asks for.
GOWORK=off GOFLAGS=-mod=mod go build -trimpath -o "$out/" tool >&2
# The processes run as nobody (they refuse uid 0), so the binaries must be readable by it.
chmod 0755 "$out" "$out"/*
echo "$out"
