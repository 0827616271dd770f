#!/usr/bin/env bash
# Builds the envtest control plane (kube-apiserver and etcd) and the kubectl
# the envtest suites drive from the Go modules pinned in this directory's
# go.mod into $1 (default bin/k8s). No release binaries are downloaded. A stamp of go.mod, go.sum and this script
# skips the build when nothing changed; the Go build cache makes a rebuild
# after a version bump much faster than the first (about 10 minutes for the
# API server on a 2-core machine).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/../../bin/k8s}" && cd "${1:-$here/../../bin/k8s}" && pwd)
stamp="$out/.stamp"
want=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)

if [[ -x "$out/kube-apiserver" && -x "$out/etcd" && -x "$out/kubectl" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

cd "$here"
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${version#v}; major=${major%%.*}
minor=${version#v"$major".}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"

echo "building etcd into $out"
go build -trimpath -ldflags "-s -w" -o "$out/etcd" ./etcd
echo "building kube-apiserver $version into $out (slow the first time)"
go build -trimpath -ldflags "$ldflags" -o "$out/kube-apiserver" ./kube-apiserver
echo "building kubectl $version into $out"
go build -trimpath -ldflags "$ldflags" -o "$out/kubectl" ./kubectl
echo "$want" > "$stamp"
