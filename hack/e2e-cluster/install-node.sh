#!/usr/bin/env bash
# Installs the container runtime of the real-node end-to-end cluster when it
# is missing: containerd (with its ctr client) from Debian's packages, on top
# of what the offline image build needs (hack/images/install-runtime.sh:
# podman, runc, busybox). As root; anywhere else it says what is missing and
# stops.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
"$here/../images/install-runtime.sh"
command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 && exit 0

if [[ $(id -u) -ne 0 ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "install-node.sh: missing containerd; install it (Debian: apt-get install -y containerd) and retry" >&2
  exit 1
fi
echo "installing containerd" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq containerd >/dev/null
