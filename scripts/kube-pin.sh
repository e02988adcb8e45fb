#!/usr/bin/env bash
# Pins a Kubernetes release for scripts/kube-api.sh: writes
# tools/kube-VERSION/go.mod (k8s.io/kubernetes at vVERSION, every staging
# module it points at its own repository replaced by the published one of
# the same release) and go.sum (go mod tidy).
#
#   scripts/kube-pin.sh 1.36.3
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
[ $# -eq 1 ] || { echo "usage: scripts/kube-pin.sh VERSION (e.g. 1.37.2)" >&2; exit 1; }
v=${1#v}
dir=$root/tools/kube-$v
gomod=$(go mod download -json "k8s.io/kubernetes@v$v" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')
[ -f "$gomod" ] || { echo "kube-pin.sh: no go.mod for k8s.io/kubernetes@v$v" >&2; exit 1; }
mkdir -p "$dir"
{
    echo "module holdfast.dev/kube-api"
    echo
    grep -m1 '^go ' "$gomod"
    echo
    echo "tool ("
    echo "	k8s.io/kubernetes/cmd/kube-apiserver"
    echo "	go.etcd.io/etcd/server/v3"
    echo ")"
    echo
    echo "require k8s.io/kubernetes v$v"
    echo
    echo "replace ("
    grep '=> ./staging' "$gomod" | awk -v staged="v0.${v#1.}" '{ print "\t" $1 " => " $1 " " staged }'
    echo ")"
} >"$dir/go.mod"
(cd "$dir" && go mod tidy)
echo "pinned: $dir (build and run: HOLDFAST_KUBE_VERSION=$v scripts/kube-api.sh DIR)"
