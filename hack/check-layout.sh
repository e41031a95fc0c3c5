#!/usr/bin/env bash
# Fails when the tree's two rooms mix: every package under internal/ must be
# linked by a shipped binary, and no shipped binary may link a package
# under test/ (the test framework, test servers and their images).
set -euo pipefail
cd "$(dirname "$0")/.."

shipped=(./cmd/groundcloud-controller-manager ./cmd/groundcloud-agent ./cmd/groundcloud-router)
module=$(go list -m)
linked=$(go list -deps "${shipped[@]}" | grep "^$module/" | sort -u)
fail=0
for pkg in $(go list ./internal/...); do
  if ! grep -qxF "$pkg" <<<"$linked"; then
    echo "layout: $pkg is under internal/ but no shipped binary (${shipped[*]#./cmd/}) links it; move it under test/ or link it"
    fail=1
  fi
done
for bin in "${shipped[@]}"; do
  for pkg in $(go list -deps "$bin" | grep "^$module/test/" || true); do
    echo "layout: shipped binary ${bin#./cmd/} links $pkg, a package under test/"
    fail=1
  done
done
exit $fail
