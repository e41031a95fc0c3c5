#!/usr/bin/env bash
# Builds the pinned control-plane tools (kube-apiserver, kubectl, etcd) once
# into a bin directory keyed by this module's go.sum, and prints that
# directory. A second call with nothing changed only prints it.
#
#   GROUNDCLOUD_TOOLS_DIR  where bin directories live (default: <repo>/.cache/tools)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
root=${GROUNDCLOUD_TOOLS_DIR:-$repo/.cache/tools}
key=$(cat "$here/go.mod" "$here/go.sum" "$here"/cmd/*/*.go | sha256sum | cut -c1-16)
bin=$root/$key

if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kubectl" ] && [ -x "$bin/etcd" ]; then
  echo "$bin"
  exit 0
fi

# One build at a time: parallel test packages and scripts may all ask.
mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
if [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kubectl" ] && [ -x "$bin/etcd" ]; then
  echo "$bin"
  exit 0
fi

k8s_version=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"

mkdir -p "$bin.tmp"
echo "building kube-apiserver, kubectl and etcd ($k8s_version) into $bin; takes a few minutes the first time" >&2
cd "$here"
go build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kubectl \
  ./cmd/etcd
rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "$bin"
