#!/usr/bin/env bash
# Installs what building and running sluice's images without a registry
# needs, when it is missing: podman, runc (this machine kind's cgroup setup
# needs runc; crun refuses it) and a static busybox (the shell of the
# offline Go build image, hack/images/go-image.sh); with --node also
# containerd, the container runtime of the real-node cluster
# (make e2e-cluster), the CNI plugins of its pod network and iproute2. Debian packages, as root; anywhere else it says what
# is missing and stops.
set -euo pipefail

missing=()
command -v podman >/dev/null 2>&1 || missing+=(podman)
if [[ ${1:-} == --node ]]; then
  command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 || missing+=(containerd)
  [[ -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local && -x /usr/lib/cni/loopback ]] || missing+=(containernetworking-plugins)
  command -v ip >/dev/null 2>&1 || missing+=(iproute2)
fi
[[ -x /usr/sbin/runc ]] || missing+=(runc)
# ldd fails on a static executable.
[[ -x /bin/busybox ]] && ! ldd /bin/busybox >/dev/null 2>&1 || missing+=(busybox-static)
((${#missing[@]} == 0)) && exit 0

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-runtime.sh: missing ${missing[*]}; install them (Debian: apt-get install -y ${missing[*]}) and retry" >&2
  exit 1
fi
echo "installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${missing[@]}" >/dev/null
