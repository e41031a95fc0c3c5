#!/usr/bin/env bash
# Regenerates deepcopy code and CRD manifests from api/ with the pinned
# controller-gen. hack/lint.sh fails when the checked-in output is stale.
set -euo pipefail
cd "$(dirname "$0")/tools"
go tool controller-gen object:headerFile=../boilerplate.go.txt paths=../../api/... \
  crd:crdVersions=v1 output:crd:dir=../../deploy/crds
