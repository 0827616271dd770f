#!/usr/bin/env bash
# Builds the node half of the real-node end-to-end cluster — kubelet,
# kube-scheduler and kube-controller-manager — from the Go modules pinned in
# hack/envtest/go.mod (the release of the envtest API server) into $1
# (default bin/k8s). No release binaries are downloaded. A stamp of go.mod,
# go.sum and this script skips the build when nothing changed; the kubelet
# takes about ten minutes cold on a 2-core machine.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mod="$here/../envtest"
out=$(mkdir -p "${1:-$here/../../bin/k8s}" && cd "${1:-$here/../../bin/k8s}" && pwd)
stamp="$out/.stamp-node"
want=$(cat "$mod/go.mod" "$mod/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)

bins=(kubelet kube-scheduler kube-controller-manager)
fresh=1
for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || fresh=0; done
if [[ $fresh == 1 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

cd "$mod"
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${version#v}; major=${major%%.*}
minor=${version#v"$major".}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
for b in "${bins[@]}"; do
  echo "building $b $version into $out (slow the first time)"
  go build -trimpath -ldflags "$ldflags" -o "$out/$b" "./$b"
done
echo "$want" > "$stamp"
