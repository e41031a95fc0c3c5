#!/usr/bin/env bash
# Fails when formatting, vet, module tidiness or generated files are off.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^hack/tools/' ; find hack/tools -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
# The tool modules beside the control-plane tools (hack/tools/build-module.sh).
tool_modules=$(cd hack/tools && for m in */go.mod; do echo "hack/tools/${m%/go.mod}"; done)
go vet ./...
hack/check-layout.sh
for dir in hack/tools $tool_modules; do
  # A module that only pins a tool (helm) has no packages of its own. The
  # mains of the e2e suite and CoreDNS are a few lines each that
  # hack/tools/build.sh compiles; vet would analyse the whole Kubernetes e2e
  # and CoreDNS trees they import (about 9 minutes on 2 cores), so they are
  # left to the compiler.
  (cd "$dir" && pkgs=$(go list ./... 2>/dev/null | grep -v -e '/cmd/e2e$' -e '/cmd/coredns$' || true) &&
    if [ -n "$pkgs" ]; then go vet $pkgs; fi)
done

for dir in . hack/tools $tool_modules; do
  (
    cd "$dir"
    cp go.mod /tmp/groundcloud-go.mod.$$; cp go.sum /tmp/groundcloud-go.sum.$$
    go mod tidy
    if ! git diff --quiet -- go.mod go.sum; then
      echo "go mod tidy changes $dir/go.mod or go.sum:"; git diff -- go.mod go.sum | head -40
      cp /tmp/groundcloud-go.mod.$$ go.mod; cp /tmp/groundcloud-go.sum.$$ go.sum
      exit 1
    fi
  )
done
hack/generate.sh
generated="api deploy/crds charts/groundcloud/crds charts/groundcloud/files"
if [ -n "$(git status --porcelain -- $generated)" ]; then
  echo "generated files are stale; run hack/generate.sh and commit:"; git status --porcelain -- $generated; exit 1
fi
echo "lint: ok"
