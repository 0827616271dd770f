# sluice — build, generate, verify and test.
#
# Every tool is built from Go modules pinned in this repository:
#   hack/tools/go.mod    controller-gen, golangci-lint (tool directives)
#   hack/envtest/go.mod  kube-apiserver, etcd and kubectl for the envtest suites
#   hack/helm/go.mod     helm (tool directive), for the chart's lint, render and
#                        equivalence tests (charts/sluice, docs/HELM.md)

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN        := $(CURDIR)/bin
ENVTEST_BIN := $(BIN)/k8s
CONTROLLER_GEN := $(BIN)/controller-gen
GOLANGCI_LINT  := $(BIN)/golangci-lint
HELM           := $(BIN)/helm
GO_TEST_FLAGS ?= -race -count=1
# FUZZTIME is how long each fuzz target runs in `make test`.
FUZZTIME ?= 10s
# FUZZ_TARGETS lists package:Target pairs run by `make fuzz`.
FUZZ_TARGETS := \
	./internal/scheduler:FuzzRank \
	./internal/scheduler:FuzzNormalize \
	./internal/scheduler:FuzzMalformedRank \
	./internal/pressure:FuzzParse \
	./internal/router:FuzzRewriteModel

.PHONY: all
all: build

##@ Development

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate the CRD and RBAC manifests.
	$(CONTROLLER_GEN) crd rbac:roleName=sluice-manager \
		paths=./api/... paths=./internal/controller/... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	cp config/crd/bases/sluice.dev_replicatiers.yaml charts/sluice/crds/

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
	@if ! git diff --quiet -- api config charts/sluice/crds; then \
		echo "generated files are stale; run 'make generate manifests' and commit:"; git diff --stat -- api config charts/sluice/crds; exit 1; fi
	@new=$$(git ls-files --others --exclude-standard -- api config charts/sluice/crds); if [ -n "$$new" ]; then \
		echo "generated files are not committed:"; echo "$$new"; exit 1; fi

##@ Build

.PHONY: build
build: ## Build every binary into bin/.
	@mkdir -p $(BIN)
	for dir in cmd/*/; do go build -o $(BIN)/$$(basename $$dir) ./$$dir; done

.PHONY: demo
demo: ## Run the one-command demo in files mode: RoundRobin vs Capacity over three engines (docs/DEMO.md).
	@mkdir -p $(BIN)
	go build -o $(BIN)/ ./cmd/router ./cmd/enginesim ./bench/demo
	$(BIN)/demo --bin $(BIN) --samples config/samples/demo --out out

.PHONY: run-manager
run-manager: manifests generate ## Run the manager against the cluster of the current kubeconfig.
	go run ./cmd/manager --metrics-bind-address=0 --health-probe-bind-address=:8081

##@ Test

.PHONY: test
test: envtest-bins verify test-go fuzz ## Verify, run every test with -race (envtest included), then fuzz briefly.

.PHONY: test-go
test-go: envtest-bins $(HELM) ## Run the unit and envtest suites with -race.
	KUBEBUILDER_ASSETS=$(ENVTEST_BIN) go test $(GO_TEST_FLAGS) ./...

.PHONY: fuzz
fuzz: ## Run each fuzz target for FUZZTIME.
	for t in $(FUZZ_TARGETS); do \
		pkg=$${t%%:*}; name=$${t##*:}; \
		if [ -d "$$pkg" ]; then go test -run='^$$' -fuzz="^$$name\$$" -fuzztime=$(FUZZTIME) $$pkg; fi; \
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
envtest-bins: ## Build kube-apiserver, etcd and kubectl from source into bin/k8s (skipped when up to date).
	hack/envtest/build.sh $(ENVTEST_BIN)

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $@ sigs.k8s.io/controller-tools/cmd/controller-gen

$(GOLANGCI_LINT): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $@ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

# The -X flag gives `helm version` the pinned version, as helm's own build does.
$(HELM): hack/helm/go.mod hack/helm/go.sum
	cd hack/helm && go build -o $@ \
		-ldflags "-X helm.sh/helm/v4/internal/version.version=$$(go list -m -f '{{.Version}}' helm.sh/helm/v4)" \
		helm.sh/helm/v4/cmd/helm

# `make bin/helm`, the name the chart tests print when helm is missing.
bin/helm: $(HELM)

.PHONY: clean
clean: ## Remove built binaries (the envtest control plane included).
	rm -rf $(BIN) out

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  %-14s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
