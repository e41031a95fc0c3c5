#!/usr/bin/env bash
# Runs tests without -short: unit tests, kernel tests in network namespaces
# of their own, and end-to-end tests against a real kube-apiserver and etcd.
# Kernel and end-to-end tests need root, nft and ip (CI installs them).
#   hack/test.sh [packages]   (default ./...)
set -euo pipefail
cd "$(dirname "$0")/.."
# Kernel and end-to-end tests skip themselves without root; here that would
# hide them, so refuse instead.
if [ "$(id -u)" != 0 ]; then
  echo "make test needs root (network namespaces); run make test-unit for the tests that do not" >&2
  exit 1
fi
GROUNDCLOUD_TOOLS_BIN=$(hack/tools/build.sh)
export GROUNDCLOUD_TOOLS_BIN
# Built here, before the tests' timeouts start; the tests then only look
# them up (controlplane.ModuleTool).
hack/tools/build-module.sh helm >/dev/null
hack/tools/build-module.sh promcheck >/dev/null
# -p 1: end-to-end and kernel tests each start processes and namespaces;
# running packages one at a time keeps a 2-core machine responsive.
run() { go test -count=1 -p 1 -timeout 25m ${TEST_FLAGS:-} "$@"; }
if [ "$#" -gt 0 ] && [ "$*" != "./..." ]; then
  run "$@"
  exit
fi
# Everything: the real-cluster tests (test/cluster, and Kubernetes' own
# LoadBalancer specs in test/conformance on the default lane, without the
# two rolling-update specs: make conformance runs those) mostly wait
# for kubelets, Pods and failovers, so they run beside the other packages,
# with their output shown when they end. Their clusters take turns (one
# real cluster at a time on a machine); they change nothing the others look
# at (their hygiene check ignores other test beds' namespaces).
clusterlog=$(mktemp)
conformancelog=$(mktemp)
trap 'rm -f "$clusterlog" "$conformancelog"' EXIT
# Its clusters wait for the conformance lane's: a longer timeout.
go test -count=1 -p 1 -timeout 50m ${TEST_FLAGS:-} ./test/cluster/ >"$clusterlog" 2>&1 &
cluster=$!
GROUNDCLOUD_CONFORMANCE=quick go test -count=1 -timeout 60m ${TEST_FLAGS:-} ./test/conformance/ >"$conformancelog" 2>&1 &
conformance=$!
rc=0
run $(go list ./... | grep -v -e '/test/cluster$' -e '/test/conformance$') || rc=$?
crc=0
wait "$cluster" || crc=$?
cat "$clusterlog"
xrc=0
wait "$conformance" || xrc=$?
cat "$conformancelog"
if [ "$rc" != 0 ] || [ "$crc" != 0 ] || [ "$xrc" != 0 ]; then
  exit 1
fi
