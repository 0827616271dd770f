# sluice — build, generate, verify and test.
#
# Every tool is built from Go modules pinned in this repository:
#   hack/tools/go.mod    controller-gen, golangci-lint (tool directives)
#   hack/envtest/go.mod  kube-apiserver, etcd and kubectl for the envtest suites
#                        (built from source when setup-envtest cannot
#                        download them)
#   hack/tools/setup-envtest/go.mod
#                        controller-runtime's setup-envtest (tool directive),
#                        which downloads that control plane when it can
#   hack/helm/go.mod     helm (tool directive), for the chart's lint, render and
#                        equivalence tests (charts/sluice, docs/HELM.md)
#   hack/tools/promtool/go.mod
#                        promtool (tool directive), for the monitoring bundle's
#                        rule tests (config/prometheus, docs/OPERATIONS.md)
#   hack/gie/go.mod      the Gateway API Inference Extension's endpoint picker
#                        (tool directive) and its InferencePool CRD, for the
#                        cluster-picker test (test/gie, docs/BENCHMARKS.md)

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN        := $(CURDIR)/bin
ENVTEST_BIN := $(BIN)/k8s
GIE_BIN     := $(BIN)/gie
CONTROLLER_GEN := $(BIN)/controller-gen
SETUP_ENVTEST  := $(BIN)/setup-envtest
GOLANGCI_LINT  := $(BIN)/golangci-lint
HELM           := $(BIN)/helm
PROMTOOL       := $(BIN)/promtool
# MONITORING_OUT holds the rule file extracted from the PrometheusRule for
# promtool (config/prometheus/tests name it).
MONITORING_OUT := $(CURDIR)/out/monitoring
GO_TEST_FLAGS ?= -race -count=1
# FUZZ_TARGETS lists package:Target:executions triples run by `make fuzz`
# (part of `make test`). Each target runs for its count of executions, sized
# to a few seconds here, not for a duration: a duration-bound run can fail
# with a bare "context deadline exceeded" and no failing input when the
# deadline fires while a starved worker is still mid-call (a race in Go's
# fuzzing coordinator on loaded machines), and a count has no deadline.
# FUZZTIME, when set (FUZZTIME=10m or FUZZTIME=5000000x), replaces every count.
FUZZTIME ?=
FUZZ_TARGETS := \
	./internal/scheduler:FuzzRank:300000 \
	./internal/scheduler:FuzzNormalize:500000 \
	./internal/scheduler:FuzzMalformedRank:300000 \
	./internal/pressure:FuzzParse:200000 \
	./internal/admission:FuzzQueue:10000 \
	./internal/reqbody:FuzzModelField:20000 \
	./internal/reqbody:FuzzRewriteModel:20000 \
	./internal/sse:FuzzScanner:200000

# VERSION and REVISION are stamped into every program (--version) and image
# (OCI labels). A checkout without a release tag is v0.1.0-dev.
VERSION  ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.1.0-dev)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
VERSION_PKG := github.com/sluice-dev/sluice/internal/version
# GO_BUILD builds static programs with the flags the Dockerfile uses, so an
# image build that mounts this machine's Go cache reuses what it compiled.
GO_BUILD := CGO_ENABLED=0 go build -trimpath \
	-ldflags "-X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).revision=$(REVISION)"
# go-build builds the packages $(1) into bin/ with GO_BUILD. It is the one
# recipe of every program a target runs (build, demo, run-manager): a target
# builds exactly the programs it needs, with the flags of `make build`, so
# Go's build cache holds each package once and no program is compiled twice
# whichever target runs first.
go-build = mkdir -p $(BIN) && $(GO_BUILD) -o $(BIN)/ $(1)

# Images (docs/INSTALL.md#images). CONTAINER_TOOL is podman when installed,
# else docker.
CONTAINER_TOOL ?= $(shell command -v podman >/dev/null 2>&1 && echo podman || echo docker)
TAG           ?= $(VERSION)
IMG_REGISTRY  ?= ghcr.io/sluice-dev
IMG_MANAGER   ?= $(IMG_REGISTRY)/sluice-manager:$(TAG)
IMG_ROUTER    ?= $(IMG_REGISTRY)/sluice-router:$(TAG)
IMG_ENGINESIM ?= $(IMG_REGISTRY)/sluice-enginesim:$(TAG)
IMG_QUALIFY   ?= $(IMG_REGISTRY)/sluice-qualify:$(TAG)
# The Dockerfile's stages and the image each one makes.
IMAGES = manager=$(IMG_MANAGER) router=$(IMG_ROUTER) enginesim=$(IMG_ENGINESIM) qualify=$(IMG_QUALIFY)
GO_IMAGE   ?= docker.io/library/golang:1.26
BASE_IMAGE ?= gcr.io/distroless/static:nonroot
PLATFORMS  ?= linux/amd64,linux/arm64
# CONTAINER_BUILD_FLAGS and CONTAINER_RUN_FLAGS are added to every build and
# run (e.g. a podman runtime); images-offline sets them for podman.
CONTAINER_BUILD_FLAGS ?=
CONTAINER_RUN_FLAGS   ?=
IMAGE_BUILD_ARGS = --build-arg GO_IMAGE=$(GO_IMAGE) --build-arg BASE_IMAGE=$(BASE_IMAGE) \
	--build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION)
# Without registry access (images-offline, test-images): podman with runc and
# bounded ulimits (crun and the default ulimits fail on hybrid-cgroup hosts),
# host networking for the Go module proxy, and the host's Go caches mounted
# where the Dockerfile looks for them.
OFFLINE_RUNTIME_FLAGS ?= --runtime /usr/sbin/runc --ulimit nofile=1024:1024 --ulimit nproc=1024:1024
OFFLINE_BUILD_FLAGS = $(OFFLINE_RUNTIME_FLAGS) --network host \
	-v $$(go env GOCACHE):/cache/go-build -v $$(go env GOMODCACHE):/cache/go-mod
OUT_IMAGES := $(CURDIR)/out/images

# Install (docs/INSTALL.md). KUBECTL is the kubectl that talks to the cluster.
KUBECTL ?= kubectl
# MANAGER_PROBE_ADDRESS is where `make run-manager` serves /healthz and
# /readyz.
MANAGER_PROBE_ADDRESS ?= 127.0.0.1:8081

.PHONY: all
all: build

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC manifests.
	$(CONTROLLER_GEN) crd rbac:roleName=sluice-manager \
		paths=./api/... paths=./internal/controller/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	cp config/crd/bases/sluice.dev_replicatiers.yaml charts/sluice/crds/
	cp config/prometheus/prometheusrule.yaml charts/sluice/files/

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object paths=./api/...

.PHONY: fmt
fmt: ## Format the Go code.
	gofmt -w $$(git ls-files '*.go' ; git ls-files --others --exclude-standard '*.go')

.PHONY: helm-lint
helm-lint: $(HELM) ## Lint the Helm chart (charts/sluice) strictly.
	$(HELM) lint --strict charts/sluice

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: lint
lint: $(GOLANGCI_LINT) ## Run golangci-lint.
	$(GOLANGCI_LINT) run ./...

.PHONY: verify
verify: generate manifests vet lint ## Fail when generated files are stale or code is unformatted.
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	@if ! git diff --quiet -- api config charts/sluice/crds charts/sluice/files; then \
		echo "generated files are stale; run 'make generate manifests' and commit:"; git diff --stat -- api config charts/sluice/crds charts/sluice/files; exit 1; fi
	@new=$$(git ls-files --others --exclude-standard -- api config charts/sluice/crds charts/sluice/files); if [ -n "$$new" ]; then \
		echo "generated files are not committed:"; echo "$$new"; exit 1; fi

##@ Build

.PHONY: build
build: ## Build every program (and bin/devcluster) into bin/: static, stamped with VERSION and REVISION.
	$(call go-build,./cmd/... ./hack/devcluster)

.PHONY: demo
demo: ## Run the one-command demo in files mode: RoundRobin vs Capacity over three engines (docs/DEMO.md).
	$(call go-build,./cmd/router ./cmd/enginesim ./bench/demo)
	$(BIN)/demo --bin $(BIN) --samples config/samples/demo --out out

.PHONY: run-manager
run-manager: manifests generate ## Run the manager against the cluster of the current kubeconfig.
	$(call go-build,./cmd/manager)
	$(BIN)/manager --metrics-bind-address=0 --health-probe-bind-address=$(MANAGER_PROBE_ADDRESS)

##@ Images

.PHONY: docker-build
docker-build: ## Build the manager, router, enginesim and qualify images (CONTAINER_TOOL, IMG_*, TAG, BASE_IMAGE, GO_IMAGE).
	for pair in $(IMAGES); do \
		$(CONTAINER_TOOL) build $(CONTAINER_BUILD_FLAGS) $(IMAGE_BUILD_ARGS) --target $${pair%%=*} -t $${pair#*=} . ; \
	done

.PHONY: docker-save
docker-save: ## Write each image as an OCI archive into out/images/ (for clusters without a registry).
	@mkdir -p $(OUT_IMAGES)
	for pair in $(IMAGES); do \
		$(CONTAINER_TOOL) save $(if $(filter podman,$(notdir $(CONTAINER_TOOL))),--format oci-archive) \
			-o $(OUT_IMAGES)/sluice-$${pair%%=*}.tar $${pair#*=} ; \
	done

.PHONY: docker-push
docker-push: ## Push the images.
	for pair in $(IMAGES); do $(CONTAINER_TOOL) push $${pair#*=}; done

.PHONY: docker-buildx
docker-buildx: ## Build and push multi-arch images for PLATFORMS with docker buildx.
	for pair in $(IMAGES); do \
		docker buildx build --platform=$(PLATFORMS) --push $(IMAGE_BUILD_ARGS) --target $${pair%%=*} -t $${pair#*=} . ; \
	done

.PHONY: container-runtime
container-runtime: ## Install podman, runc and a static busybox when missing (Debian, as root).
	hack/images/install-runtime.sh

.PHONY: images-offline
images-offline: container-runtime build ## Build the images without registry access: scratch base, this machine's Go, podman.
	$(MAKE) docker-build CONTAINER_TOOL=podman BASE_IMAGE=scratch \
		GO_IMAGE=$$(hack/images/go-image.sh podman) CONTAINER_BUILD_FLAGS="$(OFFLINE_BUILD_FLAGS)"

##@ Install

.PHONY: install
install: ## Install the CRD into the cluster of the current kubeconfig.
	$(KUBECTL) apply --server-side -k config/crd

.PHONY: uninstall
uninstall: ## Remove the CRD (and with it every ReplicaTier).
	$(KUBECTL) delete --ignore-not-found -k config/crd

.PHONY: deploy
deploy: ## Install sluice (config/default) with IMG_MANAGER and IMG_ROUTER; creates the router's Secrets when absent.
	KUBECTL="$(KUBECTL)" hack/deploy.sh "$(IMG_MANAGER)" "$(IMG_ROUTER)"

.PHONY: undeploy
undeploy: ## Remove everything deploy installed, the CRD and the router's Secrets included (namespaces finish terminating in the background).
	$(KUBECTL) delete --ignore-not-found --wait=false -k config/default
	$(KUBECTL) -n sluice-router delete --ignore-not-found secret sluice-router-api-keys sluice-router-admin-token

##@ Test

.PHONY: test
test: envtest-bins verify test-monitoring test-go test-images e2e-cluster test-gie test-quickstart test-soak fuzz ## Verify, test the monitoring rules, run every test with -race (envtest included), test the images, install them on a real node, run GIE's picker in front of three routers, test the README's quick starts, run the 30 s chaos soak, then fuzz briefly.

.PHONY: test-go
test-go: envtest-bins $(HELM) ## Run the unit and envtest suites with -race.
	KUBEBUILDER_ASSETS=$(ENVTEST_BIN) go test $(GO_TEST_FLAGS) ./...

.PHONY: test-monitoring
test-monitoring: $(PROMTOOL) ## Check the PrometheusRule's rules and run their unit tests (config/prometheus/tests) with promtool; test the PodMonitor's relabelling.
	@mkdir -p $(MONITORING_OUT)
	go run ./hack/promrules config/prometheus/prometheusrule.yaml $(MONITORING_OUT)/rules.yaml
	$(PROMTOOL) check rules $(MONITORING_OUT)/rules.yaml
	$(PROMTOOL) test rules config/prometheus/tests/*.yaml
	cd hack/tools/promtool && go test -count=1 ./...

.PHONY: test-images
test-images: envtest-bins images-offline ## Build the images offline, then run them: router against enginesim, manager against an API server.
	KUBEBUILDER_ASSETS=$(ENVTEST_BIN) IMG_MANAGER=$(IMG_MANAGER) IMG_ROUTER=$(IMG_ROUTER) \
	IMG_ENGINESIM=$(IMG_ENGINESIM) IMG_QUALIFY=$(IMG_QUALIFY) VERSION=$(VERSION) REVISION=$(REVISION) \
	CONTAINER_TOOL=podman CONTAINER_RUN_FLAGS="$(OFFLINE_RUNTIME_FLAGS)" \
		go test $(GO_TEST_FLAGS) -tags images ./test/images

.PHONY: e2e-cluster
e2e-cluster: e2e-cluster-bins images-offline ## Install sluice on a real single-node cluster (kubelet, containerd, the project's images) and run the operator's scenarios (root; docs/INSTALL.md).
	hack/images/install-runtime.sh --node
	$(MAKE) docker-save CONTAINER_TOOL=podman
	KUBEBUILDER_ASSETS=$(ENVTEST_BIN) SLUICE_E2E_IMAGES=$(OUT_IMAGES) \
		SLUICE_E2E_IMAGE_MANAGER=$(IMG_MANAGER) SLUICE_E2E_IMAGE_ROUTER=$(IMG_ROUTER) SLUICE_E2E_IMAGE_ENGINESIM=$(IMG_ENGINESIM) \
		go test -race -count=1 -timeout 30m -v -tags cluster ./test/cluster

.PHONY: test-gie
test-gie: envtest-bins gie-bins ## Run GIE's endpoint picker in front of three routers, with an ext-proc client as the gateway, in a network namespace of its own (root; docs/BENCHMARKS.md).
	KUBEBUILDER_ASSETS=$(ENVTEST_BIN) SLUICE_GIE_BIN=$(GIE_BIN) \
		go test -race -count=1 -timeout 15m -v -tags gie ./test/gie

.PHONY: test-quickstart
test-quickstart: envtest-bins ## Run the README's quick starts as written (the demo, the manager, the router in files mode).
	go test -count=1 -timeout 30m -tags quickstart ./test/quickstart

# SOAK_DURATION is how long `make soak` injects faults under load; SOAK_FLAGS
# are further flags of bench/soak (docs/RELIABILITY.md#running-it). The soak
# builds its own binaries into out/soak/bin.
# SOAK_CHECKS are the invariants' strictest settings, which the router meets:
# no request over a ceiling without excuse (the router closes an abandoned
# member connection before releasing its lease), and no failure after an
# engine kill beyond the requests in flight on it and those dispatched in the
# millisecond its death showed (passive ejection). SOAK_FLAGS come after them
# and can relax them. The soak's binaries are built with GO_BUILD, the flags
# of `make build`, into their own directory (a soak never replaces bin/).
SOAK_DURATION ?= 3m
SOAK_CHECKS   := --strict-overshoot --kill-excess-max 0
SOAK_FLAGS    ?=
SOAK_OUT      := $(CURDIR)/out/soak

.PHONY: soak
soak: ## Run the chaos soak for SOAK_DURATION (default 3m): real router, enginesims, faults, invariants (docs/RELIABILITY.md).
	@mkdir -p $(SOAK_OUT)/bin
	$(GO_BUILD) -o $(SOAK_OUT)/bin/ ./cmd/router ./cmd/enginesim ./bench/soak
	$(SOAK_OUT)/bin/soak --bin $(SOAK_OUT)/bin --work $(SOAK_OUT) --report $(SOAK_OUT)/report.json \
		--duration $(SOAK_DURATION) $(SOAK_CHECKS) $(SOAK_FLAGS)

.PHONY: test-soak
test-soak: ## Run the chaos soak for 30 s with thresholds scaled to it (part of `make test`).
	$(MAKE) soak SOAK_DURATION=30s SOAK_OUT=$(CURDIR)/out/soak-test

.PHONY: fuzz
fuzz: ## Run each fuzz target for its count of executions (or for FUZZTIME when set); a target missing from its package, or failing, fails it.
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; n=$${rest#*:}; \
		grep -qs "^func $$name(" $$pkg/*_test.go || { echo "fuzz: no $$name in $$pkg"; exit 1; }; \
		go test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(if $(FUZZTIME),$(FUZZTIME),$${n}x) $$pkg || exit 1; \
	done

# BENCH_FLAGS are passed to the end-to-end harness by `make bench`
# (e.g. BENCH_FLAGS=-quick, or -scenarios=overhead; see bench/scripts/bench.sh -h).
BENCH_FLAGS ?=

.PHONY: bench
bench: ## Run the end-to-end benchmarks (router vs direct vs HAProxy; docs/BENCHMARKS.md) into bench/results/.
	bench/scripts/bench.sh $(BENCH_FLAGS)

.PHONY: bench-go
bench-go: ## Run the Go micro-benchmarks of the cores and of the router's proxy path.
	go test -run='^$$' -bench=. -benchmem -count=5 ./internal/scheduler ./internal/admission ./internal/pressure
	go test -run='^$$' -bench=BenchmarkProxy -benchmem -benchtime=2s -count=5 ./internal/router

##@ Tools

.PHONY: envtest-bins
envtest-bins: $(SETUP_ENVTEST) ## Download kube-apiserver, etcd and kubectl into bin/k8s with setup-envtest, or build them from source when that cannot (skipped when up to date).
	SETUP_ENVTEST=$(SETUP_ENVTEST) hack/envtest/download.sh $(ENVTEST_BIN) || hack/envtest/build.sh $(ENVTEST_BIN)

.PHONY: gie-bins
gie-bins: ## Build the Gateway API Inference Extension's endpoint picker from hack/gie into bin/gie, with its InferencePool CRD (skipped when up to date).
	hack/gie/build.sh $(GIE_BIN)

.PHONY: e2e-cluster-bins
e2e-cluster-bins: envtest-bins ## Build kubelet, kube-scheduler and kube-controller-manager from source into bin/k8s (skipped when up to date).
	hack/envtest/build.sh $(ENVTEST_BIN) node

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(SETUP_ENVTEST): hack/tools/setup-envtest/go.mod hack/tools/setup-envtest/go.sum
	cd hack/tools/setup-envtest && go build -o $@ sigs.k8s.io/controller-runtime/tools/setup-envtest

$(GOLANGCI_LINT): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# The -X flag gives `helm version` the pinned version, as helm's own build does.
$(HELM): hack/helm/go.mod hack/helm/go.sum
	cd hack/helm && go build -o $@ \
		-ldflags "-X helm.sh/helm/v4/internal/version.version=$$(go list -m -f '{{.Version}}' helm.sh/helm/v4)" \
		helm.sh/helm/v4/cmd/helm

# `make bin/helm`, the name the chart tests print when helm is missing.
bin/helm: $(HELM)

# promtool without the cloud providers' service discoveries and their SDKs
# (remove_all_sd; promtool itself still imports Kubernetes' discovery), which
# the rule tests never use; the -X flag gives `promtool --version` the pinned
# version.
$(PROMTOOL): hack/tools/promtool/go.mod hack/tools/promtool/go.sum
	cd hack/tools/promtool && go build -tags remove_all_sd -o $@ \
		-ldflags "-X github.com/prometheus/common/version.Version=$$(go list -m -f '{{.Version}}' github.com/prometheus/prometheus)" \
		github.com/prometheus/prometheus/cmd/promtool

bin/promtool: $(PROMTOOL)

.PHONY: clean
clean: ## Remove built binaries (the envtest control plane included).
	rm -rf $(BIN) out

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
