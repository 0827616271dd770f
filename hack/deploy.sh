#!/usr/bin/env bash
# `make deploy`: installs config/default with the given images and creates
# the router's two Secrets when they do not exist (docs/INSTALL.md).
#
# usage: deploy.sh MANAGER_IMAGE ROUTER_IMAGE
#   KUBECTL   the kubectl to use (default kubectl)
#   DRY_RUN   passed to kubectl apply as --dry-run=$DRY_RUN (e.g. server);
#             with it nothing is created, the Secrets included.
set -euo pipefail

manager=${1:?usage: deploy.sh MANAGER_IMAGE ROUTER_IMAGE}
router=${2:?usage: deploy.sh MANAGER_IMAGE ROUTER_IMAGE}
kubectl=${KUBECTL:-kubectl}
root=$(cd "$(dirname "$0")/.." && pwd)
overlay="$root/out/deploy"

# image_fields REF prints the kustomize newName/newTag (or digest) of REF.
image_fields() {
  local ref=$1 name tag=""
  if [[ $ref == *@* ]]; then
    printf '  newName: %s\n  digest: %s\n' "${ref%%@*}" "${ref#*@}"
    return
  fi
  name=$ref
  # A tag follows the last colon, unless that colon is a registry port.
  if [[ ${ref##*/} == *:* ]]; then
    name=${ref%:*}
    tag=${ref##*:}
  fi
  printf '  newName: %s\n' "$name"
  [[ -n $tag ]] && printf '  newTag: %s\n' "$tag"
  return 0
}

# The overlay names the images config/default sets, and replaces them.
mkdir -p "$overlay"
{
  echo "# Written by hack/deploy.sh; config/default with the images to deploy."
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "- ../../config/default"
  echo "images:"
  echo "- name: ghcr.io/sluice-dev/sluice-manager"
  image_fields "$manager"
  echo "- name: ghcr.io/sluice-dev/sluice-router"
  image_fields "$router"
} >"$overlay/kustomization.yaml"

dry=()
[[ -n ${DRY_RUN:-} ]] && dry=(--dry-run="$DRY_RUN")
"$kubectl" apply --server-side "${dry[@]}" -k "$overlay"
[[ -n ${DRY_RUN:-} ]] && exit 0

# random_token prints 48 random URL-safe characters.
random_token() { head -c 36 /dev/urandom | base64 | tr '+/' '-_'; }

# The router reads its API keys and admin token from these Secrets
# (config/router/daemonset.yaml); existing ones are left alone.
ns=sluice-router
if ! "$kubectl" -n "$ns" get secret sluice-router-api-keys >/dev/null 2>&1; then
  "$kubectl" -n "$ns" create secret generic sluice-router-api-keys --from-literal=keys="$(random_token)"
fi
if ! "$kubectl" -n "$ns" get secret sluice-router-admin-token >/dev/null 2>&1; then
  "$kubectl" -n "$ns" create secret generic sluice-router-admin-token --from-literal=token="$(random_token)"
fi
echo "sluice deployed; the router's API key: $kubectl -n $ns get secret sluice-router-api-keys -o jsonpath='{.data.keys}' | base64 -d"
