#!/usr/bin/env bash
# Builds the pinned Kubernetes tools once into a bin directory keyed by this
# module's go.mod, go.sum, its own mains and the list below, and prints that
# directory. A second call with nothing changed only prints it. All of them
# come from one go build, so the packages they share compile once.
#
#   GROUNDCLOUD_TOOLS_DIR  where bin directories live (default: <repo>/.cache/tools)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
root=${GROUNDCLOUD_TOOLS_DIR:-$repo/.cache/tools}
# The binaries, by name, and the packages they are built from.
tools=(
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler
  kube-proxy=k8s.io/kubernetes/cmd/kube-proxy
  kubelet=k8s.io/kubernetes/cmd/kubelet
  kubectl=k8s.io/kubernetes/cmd/kubectl
  etcd=./cmd/etcd
  pause=./cmd/pause
  coredns=./cmd/coredns
  e2e=./cmd/e2e
  ginkgo=github.com/onsi/ginkgo/v2/ginkgo
  agnhost=k8s.io/kubernetes/test/images/agnhost
)
key=$( (cat "$here/go.mod" "$here/go.sum" "$here"/cmd/*/*.go; printf '%s\n' "${tools[@]}") | sha256sum | cut -c1-16)
bin=$root/$key

built() {
  local t
  for t in "${tools[@]}"; do
    [ -x "$bin/${t%%=*}" ] || return 1
  done
}

if built; then
  echo "$bin"
  exit 0
fi

# One build at a time: parallel test packages and scripts may all ask.
mkdir -p "$root"
exec 9>"$root/.lock"
flock 9
if built; then
  echo "$bin"
  exit 0
fi

k8s_version=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"

mkdir -p "$bin.tmp"
echo "building ${tools[*]%%=*} ($k8s_version) into $bin; takes several minutes the first time" >&2
cd "$here"
go build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" "${tools[@]#*=}"
rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "$bin"
