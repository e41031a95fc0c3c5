#!/usr/bin/env bash
# Regenerates deepcopy code and CRD manifests from api/ with the pinned
# controller-gen, and the Helm chart's copies of what deploy/ holds (its
# CRDs, the alerting rules and the dashboard). hack/lint.sh fails when the
# checked-in output is stale.
set -euo pipefail
cd "$(dirname "$0")/tools"
go tool controller-gen object:headerFile=../boilerplate.go.txt paths=../../api/... \
  crd:crdVersions=v1 output:crd:dir=../../deploy/crds

cd ../..
chart=charts/groundcloud
# Helm installs crds/ as they are (never templated); the controller manager
# upgrades them at start (internal/crdinstall All).
rm -f "$chart"/crds/*.yaml
cp deploy/crds/*.yaml "$chart/crds/"
cp deploy/monitoring/groundcloud.rules.yaml deploy/monitoring/groundcloud-dashboard.json "$chart/files/"
