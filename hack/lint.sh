#!/usr/bin/env bash
# Fails when formatting, vet, module tidiness or generated files are off.
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' | grep -v '^hack/tools/' ; find hack/tools -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
go vet ./...
(cd hack/tools && go vet ./...)

for dir in . hack/tools; do
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
if [ -n "$(git status --porcelain -- api deploy/crds)" ]; then
  echo "generated files are stale; run hack/generate.sh and commit:"; git status --porcelain -- api deploy/crds; exit 1
fi
echo "lint: ok"
