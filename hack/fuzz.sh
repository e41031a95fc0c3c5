#!/usr/bin/env bash
# Runs every fuzz target for FUZZTIME each (default 30s).
set -euo pipefail
cd "$(dirname "$0")/.."
t=${FUZZTIME:-30s}
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzzing $pkg $target for $t"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg"
  done
done
