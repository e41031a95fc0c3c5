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
  regression-issue-74839=k8s.io/kubernetes/test/images/regression-issue-74839
)
# Files copied beside them from a module, by name and path in it: what the
# images built from the tools carry besides (agnhost's porter serves TLS with
# this certificate and key, test/framework/realcluster BuildAgnhost).
files=(
  localhost.crt=k8s.io/kubernetes/test/images/agnhost/porter/localhost.crt
  localhost.key=k8s.io/kubernetes/test/images/agnhost/porter/localhost.key
)
key=$( (cat "$here/go.mod" "$here/go.sum" "$here"/cmd/*/*.go; printf '%s\n' "${tools[@]}" "${files[@]}") | sha256sum | cut -c1-16)
bin=$root/$key

built() {
  local t
  for t in "${tools[@]}" "${files[@]}"; do
    [ -e "$bin/${t%%=*}" ] || return 1
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
k8s_dir=$(go list -m -f '{{.Dir}}' k8s.io/kubernetes)
for f in "${files[@]}"; do
  src=${f#*=}
  install -m 0644 "$k8s_dir/${src#k8s.io/kubernetes/}" "$bin.tmp/${f%%=*}"
done
rm -rf "$bin"
mv "$bin.tmp" "$bin"
echo "$bin"
