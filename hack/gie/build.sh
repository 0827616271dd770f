#!/usr/bin/env bash
# Builds, from the Go module pinned in this directory's go.mod, into $1
# (default bin/gie):
#   - epp, the Gateway API Inference Extension's endpoint picker
#     (sigs.k8s.io/gateway-api-inference-extension/cmd/epp);
#   - crd/, the module's InferencePool CRD (inference.networking.k8s.io, v1),
#     which the picker watches.
# The module requires the main module's versions of the dependencies they
# share (k8s.io, controller-runtime, gRPC, Prometheus, ...), and the picker
# is built with the programs' flags (CGO_ENABLED=0, -trimpath), so a cold
# `make test` compiles those packages once, not twice.
# No release binary or image is downloaded. A stamp of go.mod, go.sum and
# this script skips the build when nothing changed; the Go build cache makes
# a rebuild after a version bump faster than the first.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=$(mkdir -p "${1:-$here/../../bin/gie}" && cd "${1:-$here/../../bin/gie}" && pwd)
stamp="$out/.stamp"
crd=inference.networking.k8s.io_inferencepools.yaml
want=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -d' ' -f1)

if [[ -x "$out/epp" && -f "$out/crd/$crd" && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  exit 0
fi

cd "$here"
mod=sigs.k8s.io/gateway-api-inference-extension
version=$(go list -m -f '{{.Version}}' "$mod")
echo "building the endpoint picker $version into $out (slow the first time)"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X $mod/version.BuildRef=$version" -o "$out/epp" "$mod/cmd/epp"
dir=$(go list -m -f '{{.Dir}}' "$mod")
mkdir -p "$out/crd"
install -m 0644 "$dir/config/crd/bases/$crd" "$out/crd/$crd"
echo "$want" > "$stamp"
