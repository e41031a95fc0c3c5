#!/usr/bin/env bash
# Runs the benchmarks (test/bench), which measure rather than pass or fail:
# each prints one machine-readable "BENCH ..." line per scenario and
# rewrites its own section of docs/benchmarks.md. Needs root (network
# namespaces); installs keepalived, the failover benchmark's comparison,
# from Debian's packages when missing.
#   hack/bench.sh [go test -run pattern]   (default: every benchmark)
#   GROUNDCLOUD_BENCH_TRIALS=n             trials per scenario (default 10)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v keepalived >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "missing keepalived: install it (apt-get install keepalived) or run as root" >&2
    exit 1
  fi
  echo "installing keepalived" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends keepalived >/dev/null
fi
GROUNDCLOUD_TOOLS_BIN=$(hack/tools/build.sh)
export GROUNDCLOUD_TOOLS_BIN GROUNDCLOUD_BENCH=1 GROUNDCLOUD_BENCH_DOCS="$PWD/docs/benchmarks.md"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
go test -count=1 -p 1 -timeout 60m -v -run "${1:-.}" ./test/bench/ >"$log" 2>&1 || { cat "$log"; exit 1; }
grep '^BENCH ' "$log"
