#!/usr/bin/env bash
# Downloads the envtest control plane (kube-apiserver, etcd and kubectl) of
# the Kubernetes version pinned in this directory's go.mod into $1 (default
# bin/k8s) with controller-runtime's setup-envtest, as a kubebuilder project
# gets it; $SETUP_ENVTEST is the setup-envtest binary (the Makefile builds it
# from hack/tools/setup-envtest). `make envtest-bins` runs this first and
# build.sh, the build from source, when it fails; so it fails fast: when the
# release index does not answer within ENVTEST_PROBE_TIMEOUT seconds
# (default 5) it exits 1 at once. ENVTEST_INDEX is the index (default
# controller-tools' release index); ENVTEST_DOWNLOAD_TIMEOUT (seconds,
# default 600) bounds the download.
#
# The stamp is build.sh's (the same hash of go.mod, go.sum and build.sh), so
# a control plane either script installed counts as up to date for both,
# and nothing is fetched when it is.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/../../bin/k8s}" && cd "${1:-$here/../../bin/k8s}" && pwd)
bins=(etcd kube-apiserver kubectl)
stamp="$out/.stamp"
want=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)

fresh=1
for b in "${bins[@]}"; do [[ -x "$out/$b" ]] || fresh=0; done
if [[ $fresh == 1 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

setup=${SETUP_ENVTEST:?SETUP_ENVTEST names the setup-envtest binary}
index=${ENVTEST_INDEX:-https://raw.githubusercontent.com/kubernetes-sigs/controller-tools/HEAD/envtest-releases.yaml}
probe=${ENVTEST_PROBE_TIMEOUT:-5}
limit=${ENVTEST_DOWNLOAD_TIMEOUT:-600}
if ! curl -sf -o /dev/null --max-time "$probe" "$index"; then
  echo "envtest: the release index does not answer within ${probe}s; building from source instead" >&2
  exit 1
fi
version=$(cd "$here" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
store=$(mktemp -d)
trap 'chmod -R u+w "$store"; rm -rf "$store"' EXIT
echo "downloading the envtest control plane ${version} with setup-envtest"
path=$(timeout "$limit" "$setup" use --bin-dir "$store" --index "$index" -p path "${version#v}")
for b in "${bins[@]}"; do
  install -m 0755 "$path/$b" "$out/$b"
done
echo "$want" > "$stamp"
echo "installed ${bins[*]} ${version} into $out"
