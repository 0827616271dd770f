#!/usr/bin/env bash
# Makes a Go build image from this machine's Go toolchain, for building
# sluice's images where no registry is reachable (the Dockerfile's GO_IMAGE;
# releases use the golang image instead). The image holds GOROOT, a static
# busybox as /bin/sh (the Dockerfile's RUN steps need a shell) and the CA
# bundle (for the Go module proxy), and nothing else.
#
# usage: go-image.sh CONTAINER_TOOL   prints the image reference on stdout.
# The image is tagged with the Go version and reused when it exists.
set -euo pipefail

tool=${1:?usage: go-image.sh CONTAINER_TOOL}
goroot=$(go env GOROOT)
gover=$(go env GOVERSION)
image="localhost/sluice-go:${gover#go}"

if "$tool" image exists "$image" 2>/dev/null || "$tool" image inspect "$image" >/dev/null 2>&1; then
  echo "$image"
  exit 0
fi

busybox=/bin/busybox
# ldd fails on a static executable.
if [[ ! -x "$busybox" ]] || ldd "$busybox" >/dev/null 2>&1; then
  echo "go-image.sh: a static $busybox is needed (Debian: apt-get install busybox-static)" >&2
  exit 1
fi
ca=/etc/ssl/certs/ca-certificates.crt
[[ -f "$ca" ]] || { echo "go-image.sh: no CA bundle at $ca (Debian: apt-get install ca-certificates)" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,etc/ssl/certs,tmp,root/go,usr/local}
chmod 1777 "$root/tmp"
cp "$busybox" "$root/bin/busybox"
ln -s busybox "$root/bin/sh"
cp "$ca" "$root/etc/ssl/certs/"
cp -a "$goroot" "$root/usr/local/go"

echo "making $image from $goroot" >&2
tar -C "$root" -cf - . | "$tool" import \
  --change 'ENV PATH=/usr/local/go/bin:/root/go/bin:/bin' \
  --change 'ENV GOPATH=/root/go' \
  --change 'ENV GOTOOLCHAIN=local' \
  --change "ENV GOPROXY=$(go env GOPROXY)" \
  --change 'WORKDIR /src' \
  - "$image" >&2
echo "$image"
