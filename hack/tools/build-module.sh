#!/usr/bin/env bash
# Builds the tool of one small pinned module beside the control-plane tools
# (hack/tools/<name>: helm, promcheck, helm-docs) once, into a directory
# keyed by that module's go.mod, go.sum and Go files, and prints the
# binary's path. A second call with nothing changed only prints it.
#
#   hack/tools/build-module.sh helm|promcheck|helm-docs
#
#   GROUNDCLOUD_TOOLS_DIR  where bin directories live (default: <repo>/.cache/tools)
#
# Each module names its binary in a `tool` directive (a command of a pinned
# dependency: helm, helm-docs) or is itself a main package (promcheck).
set -euo pipefail

name=${1:?usage: build-module.sh <module directory under hack/tools>}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
mod=$here/$name
[ -f "$mod/go.mod" ] || { echo "no module hack/tools/$name" >&2; exit 1; }
root=${GROUNDCLOUD_TOOLS_DIR:-$repo/.cache/tools}
key=$(cd "$mod" && cat go.mod go.sum $(find . -name '*.go' | sort) | sha256sum | cut -c1-16)
bin=$root/$name-$key/$name

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$root"
exec 9>"$root/.lock-$name"
flock 9
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

cd "$mod"
pkg=$(go list tool 2>/dev/null | head -1)
pkg=${pkg:-.}
echo "building $name ($pkg) into $(dirname "$bin")" >&2
mkdir -p "$(dirname "$bin")"
rm -f "$bin.tmp"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" "$pkg"
mv "$bin.tmp" "$bin"
echo "$bin"
