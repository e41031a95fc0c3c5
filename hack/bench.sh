#!/usr/bin/env bash
# Runs the benchmarks (test/bench), which measure rather than pass or fail:
# each prints one machine-readable "BENCH ..." line per scenario and
# rewrites its own section of docs/benchmarks.md. Needs root (network
# namespaces); installs from Debian's packages what the benchmarks compare
# against or load with, when missing: keepalived (failover), wrk and
# haproxy (data plane, BGP); the BGP benchmark's router, FRR, comes with
# make deps (hack/install-deps.sh), which make bench runs first.
#   hack/bench.sh [go test -run pattern]   (default: every benchmark)
#   GROUNDCLOUD_BENCH_TRIALS=n             failover trials per scenario (default 10; BGP 5)
#   GROUNDCLOUD_BENCH_ROUNDS=n             data-plane rounds (default 3)
#   GROUNDCLOUD_BENCH_DURATION=5s          length of one data-plane measurement
#   GROUNDCLOUD_BENCH_PAIRS=n              counters' cost: slices per setting (default 500)
#   GROUNDCLOUD_BENCH_SLICE=200ms          counters' cost: length of one slice
#   GROUNDCLOUD_BENCH_STABILITY=10m        time under CPU load and packet loss per
#                                          implementation (failover stability)
set -euo pipefail
cd "$(dirname "$0")/.."

# install_missing installs the Debian packages whose commands are missing.
# Debian's haproxy and keepalived packages enable and start a system
# service in the root namespace; the benchmarks run their own copies in
# the lab's namespaces only, so a policy-rc.d that denies every start
# keeps the packages from starting theirs (while apt runs; the file is
# removed afterwards, and one that was there already is left as it was).
install_missing() {
  local pkgs=() cmd pkg
  for pair in keepalived:keepalived wrk:wrk haproxy:haproxy; do
    cmd=${pair%%:*} pkg=${pair##*:}
    command -v "$cmd" >/dev/null || pkgs+=("$pkg")
  done
  [ ${#pkgs[@]} -eq 0 ] && return 0
  if [ "$(id -u)" != 0 ]; then
    echo "missing ${pkgs[*]}: install them (apt-get install ${pkgs[*]}) or run as root" >&2
    exit 1
  fi
  echo "installing ${pkgs[*]}" >&2
  local policy=/usr/sbin/policy-rc.d ours=
  if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# hack/bench.sh: no service starts while it installs packages\nexit 101\n' >"$policy"
    chmod +x "$policy"
    ours=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local rc=0
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null; } || rc=$?
  [ -n "$ours" ] && rm -f "$policy"
  [ $rc -eq 0 ] || exit $rc
}
install_missing

# A haproxy that listens in the root namespace (a system service, started
# before or by another installation) is not ours to stop; say so, since it
# shares the cores the benchmarks measure on.
if command -v pgrep >/dev/null; then
  for pid in $(pgrep -x haproxy || true); do
    if [ "$(readlink "/proc/$pid/ns/net")" = "$(readlink /proc/self/ns/net)" ]; then
      echo "note: haproxy (pid $pid) runs in the root network namespace; not started by the benchmarks, left alone" >&2
    fi
  done
fi

GROUNDCLOUD_TOOLS_BIN=$(hack/tools/build.sh)
export GROUNDCLOUD_TOOLS_BIN GROUNDCLOUD_BENCH=1 GROUNDCLOUD_BENCH_DOCS="$PWD/docs/benchmarks.md"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
go test -count=1 -p 1 -timeout 180m -v -run "${1:-.}" ./test/bench/ >"$log" 2>&1 || { cat "$log"; exit 1; }
# The traffic counters' cost in network namespaces (internal/dataplane):
# many short slices side by side, finer than the real cluster's rows.
if [[ TestKernelTrafficCountersCost =~ ${1:-.} ]]; then
  go test -count=1 -timeout 30m -v -run '^TestKernelTrafficCountersCost$' ./internal/dataplane/ >>"$log" 2>&1 || { cat "$log"; exit 1; }
fi
grep '^BENCH ' "$log"
