#!/usr/bin/env bash
# Builds, from the Go modules pinned in this directory's go.mod, into $1
# (default bin/k8s):
#   - by default the envtest control plane (kube-apiserver and etcd) and the
#     kubectl the envtest suites drive;
#   - with "node" as $2, the node half of the real-node end-to-end cluster
#     (make e2e-cluster): kubelet, kube-scheduler and kube-controller-manager.
# No release binaries are downloaded. A stamp per set, of go.mod, go.sum and
# this script, skips the build when nothing changed; the Go build cache makes
# a rebuild after a version bump much faster than the first (about 10 minutes
# for the API server, and for the kubelet, on a 2-core machine).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/../../bin/k8s}" && cd "${1:-$here/../../bin/k8s}" && pwd)
case "${2:-}" in
  "") bins=(etcd kube-apiserver kubectl); stamp="$out/.stamp" ;;
  node) bins=(kubelet kube-scheduler kube-controller-manager); stamp="$out/.stamp-node" ;;
  *) echo "build.sh: unknown set ${2}; want none or node" >&2; exit 2 ;;
esac
want=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)

fresh=1
for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || fresh=0; done
if [[ $fresh == 1 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

cd "$here"
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
major=${version#v}; major=${major%%.*}
minor=${version#v"$major".}; minor=${minor%%.*}
pkg=k8s.io/component-base/version
ldflags="-s -w -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
for b in "${bins[@]}"; do
  if [[ $b == etcd ]]; then
    echo "building etcd into $out"
    go build -trimpath -ldflags "-s -w" -o "$out/etcd" ./etcd
    continue
  fi
  echo "building $b $version into $out (slow the first time)"
  go build -trimpath -ldflags "$ldflags" -o "$out/$b" "./$b"
done
echo "$want" > "$stamp"
