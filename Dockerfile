# syntax=docker/dockerfile:1
#
# One Dockerfile for every sluice image. The build stage compiles the
# manager, the router, the engine simulator and the qualification command
# once, statically; each final stage is BASE_IMAGE with one of them and
# nothing else:
#
#   docker build --target router    -t sluice-router    .
#   docker build --target manager   -t sluice-manager   .
#   docker build --target enginesim -t sluice-enginesim .
#   docker build --target qualify   -t sluice-qualify   .
#
# `make docker-build` passes every argument below (docs/INSTALL.md#images).
# Releases keep the defaults: the golang image to build and distroless
# static (nonroot) to run. A machine without registry access builds with
# BASE_IMAGE=scratch and a Go image of its own (hack/images/go-image.sh).

# GO_IMAGE compiles; its Go must be the go.mod's or newer.
ARG GO_IMAGE=docker.io/library/golang:1.26
# BASE_IMAGE runs the binary; it needs no shell, libc or CA bundle.
ARG BASE_IMAGE=gcr.io/distroless/static:nonroot

FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS=linux
ARG TARGETARCH
ARG VERSION=devel
ARG REVISION=unknown
WORKDIR /src
# Fixed cache locations, whatever the build image's HOME and GOPATH: a
# builder may mount a warm Go build cache and module cache there.
ENV CGO_ENABLED=0 GOFLAGS=-buildvcs=false GOCACHE=/cache/go-build GOMODCACHE=/cache/go-mod
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY bench/ bench/
COPY cmd/ cmd/
COPY internal/ internal/
# -trimpath also keeps the source location out of the build cache keys, so
# a builder that mounts a warm Go cache at /cache (`make docker-build` does
# so with podman) compiles only what changed.
RUN GOOS=$TARGETOS GOARCH=${TARGETARCH:-$(go env GOARCH)} go build -trimpath \
      -ldflags "-s -w -X github.com/sluice-dev/sluice/internal/version.version=$VERSION -X github.com/sluice-dev/sluice/internal/version.revision=$REVISION" \
      -o /out/ ./cmd/manager ./cmd/router ./cmd/enginesim ./cmd/sluice-qualify

# The run stages share everything but the binary.
FROM ${BASE_IMAGE} AS base
ARG SOURCE=https://github.com/sluice-dev/sluice
LABEL org.opencontainers.image.source=$SOURCE \
      org.opencontainers.image.vendor=sluice
# 47813 is sluice's own uid and gid (docs/INSTALL.md#the-images-user): not
# distroless' generic nonroot 65532, which many images share, since the
# kernel lets any socket of the router's uid join its ports and connect to
# its handover channel. Neither base image needs a user database for a
# numeric user.
USER 47813:47813

# Each run stage labels its version after copying its binary: the copy
# changes with every version and revision, so no builder can reuse a cached
# label of another build (podman 4.3 does, for a label before it).
FROM base AS manager
COPY --from=build /out/manager /manager
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.title=sluice-manager \
      org.opencontainers.image.description="sluice manager: validates ReplicaTiers and writes their admission intent" \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION
ENTRYPOINT ["/manager"]

FROM base AS router
COPY --from=build /out/router /router
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.title=sluice-router \
      org.opencontainers.image.description="sluice router: admits and proxies OpenAI-compatible requests across one node's replicas" \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION
ENTRYPOINT ["/router"]

FROM base AS enginesim
COPY --from=build /out/enginesim /enginesim
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.title=sluice-enginesim \
      org.opencontainers.image.description="sluice enginesim: an OpenAI-compatible engine simulator for trying sluice without GPUs" \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION
ENTRYPOINT ["/enginesim"]

FROM base AS qualify
COPY --from=build /out/sluice-qualify /sluice-qualify
ARG VERSION=devel
ARG REVISION=unknown
LABEL org.opencontainers.image.title=sluice-qualify \
      org.opencontainers.image.description="sluice-qualify: qualifies a ReplicaTier on its node's real engines" \
      org.opencontainers.image.version=$VERSION \
      org.opencontainers.image.revision=$REVISION
ENTRYPOINT ["/sluice-qualify"]
