# argocd-agent-addon. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT := $(CURDIR)
BIN := $(ROOT)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
GIT_COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X github.com/argocd-agent-addon/argocd-agent-addon/pkg/version.Version=$(VERSION) -X github.com/argocd-agent-addon/argocd-agent-addon/pkg/version.GitCommit=$(GIT_COMMIT)
# The image reference every image target builds, loads or pushes.
IMAGE ?= argocd-agent-addon:$(VERSION)
# The platforms of the image index, each a static binary cross-compiled into bin/<os>_<arch>/.
PLATFORMS ?= linux/amd64 linux/arm64

# Pinned tools, built from the Go module proxy into the cache that hack/lib/binary-cache.sh
# shares between the clones of this machine (a checkout's own bin/tools when it has them).
BINARY_CACHE ?= $(or $(ARGOCD_AGENT_ADDON_CACHE),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/argocd-agent-addon)
CONTROLLER_GEN_VERSION := v0.21.0
STATICCHECK_VERSION := v0.8.2
TOOLS := $(if $(wildcard $(BIN)/tools/controller-gen-$(CONTROLLER_GEN_VERSION)),$(BIN)/tools,$(BINARY_CACHE)/tools)
CONTROLLER_GEN := $(TOOLS)/controller-gen-$(CONTROLLER_GEN_VERSION)
STATICCHECK := $(TOOLS)/staticcheck-$(STATICCHECK_VERSION)

GO_TEST_FLAGS ?= -count=1
# How many test packages run at once: the cores, and at least 4. The long packages spend much of
# their time waiting for controllers and API servers (on 2 cores, three at once kept 1.4 cores
# busy on average), so a third and a fourth keep the cores busy.
TEST_PACKAGES_AT_ONCE ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 4 ? 4 : n )))
TEST_TIMEOUT ?= 45m
# How many of a package's parallel tests run at once (go test's default is the cores). Those of
# pkg/gitopscluster mostly wait for its controller's settle periods and requeues, not the CPU.
TEST_PARALLEL ?= 4

.PHONY: help
help: ## List the targets, by section.
	@awk 'BEGIN{FS=":.*## "} /^##@ /{printf "\n%s\n", substr($$0, 5); next} /^[a-zA-Z0-9_.-]+:.*## /{printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Build
.PHONY: build
build: ## Build bin/argocd-agent-addon for this machine.
	CGO_ENABLED=0 go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/argocd-agent-addon ./cmd/argocd-agent-addon

.PHONY: binaries
binaries: ## Cross-compile the static binary for each of PLATFORMS into bin/<os>_<arch>/argocd-agent-addon.
	for p in $(PLATFORMS); do \
	  CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} go build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/$${p%/*}_$${p#*/}/argocd-agent-addon ./cmd/argocd-agent-addon; \
	done

.PHONY: image
image: binaries ## Build the image index for PLATFORMS without a container engine (bin/image; bin/argocd-agent-addon-image.tar holds this machine's platform); PUSH=1 pushes it to IMAGE.
	SOURCE_DATE_EPOCH=$${SOURCE_DATE_EPOCH:-$$(git log -1 --format=%ct 2>/dev/null || echo 0)} \
	go run ./hack/image $(foreach p,$(PLATFORMS),--platform-binary $(p)=$(BIN)/$(subst /,_,$(p))/argocd-agent-addon) \
	  --out $(BIN)/image --tar $(BIN)/argocd-agent-addon-image.tar \
	  --version $(VERSION) --revision $(GIT_COMMIT) --tag $(IMAGE) $(if $(PUSH),--push $(IMAGE))

# docker-build loads the image `make image` builds instead of building another one from the
# Dockerfile: one version, one image (the same layer and digest), whichever target made it.
.PHONY: docker-build
docker-build: image ## Build the image as make image does and load it into a Docker engine as IMAGE.
	docker load --input $(BIN)/argocd-agent-addon-image.tar

##@ Release
.PHONY: release
release: ## From a clean tree, VERSION=vX.Y.Z: the image index tagged VERSION (IMAGE; PUSH=1 pushes it) and the chart packaged as that version, with its CHANGELOG section, in bin/release/VERSION.
	go run ./hack/release check --version '$(VERSION)' --image '$(IMAGE)'
	$(MAKE) image VERSION='$(VERSION)' IMAGE='$(IMAGE)'
	rm -rf $(BIN)/release/$(VERSION) && mkdir -p $(BIN)/release/$(VERSION)
	cp -R $(BIN)/image $(BIN)/release/$(VERSION)/image
	go run ./hack/release package --version '$(VERSION)' --image '$(IMAGE)' --out $(BIN)/release/$(VERSION)

##@ Code generation
.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./apis/...

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Regenerate CRDs into manifests/crds and the spoke's Argo CD objects into pkg/spoke/upstream.
	$(CONTROLLER_GEN) crd paths=./apis/... output:crd:artifacts:config=manifests/crds
	go run ./hack/spoke-manifests --out pkg/spoke/upstream
	hack/sync-generated.sh
	go run ./hack/render-chart --out manifests/install.yaml

.PHONY: verify
verify: ## Fail when generated files are stale.
	hack/verify-generated.sh

$(CONTROLLER_GEN):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS)/.gobin-cg go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS)/.gobin-cg/controller-gen $@

$(STATICCHECK):
	@mkdir -p $(TOOLS)
	GOBIN=$(TOOLS)/.gobin-sc go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
	mv $(TOOLS)/.gobin-sc/staticcheck $@

##@ Checks and tests
.PHONY: lint
lint: $(STATICCHECK) ## gofmt, go vet and staticcheck.
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	  if [[ -n "$$out" ]]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	go vet ./...
	$(STATICCHECK) ./...

.PHONY: test-binaries
test-binaries: ## Build or locate kube-apiserver, etcd and kube-controller-manager.
	hack/test-binaries.sh

.PHONY: ocm-binaries
ocm-binaries: ## Build or locate the OCM hub controllers and klusterlet agent for the local fleet (test/fleet).
	hack/ocm-binaries.sh

.PHONY: argocd-binaries
argocd-binaries: ## Build or locate Argo CD (one binary for every component) and its CRDs for the local fleet.
	hack/argocd-binaries.sh

# The packages that start the local fleet (its control planes and OCM as processes; test/e2e
# and the fleet's own real-node tests on real nodes).
E2E_PACKAGES := ./test/e2e/ ./test/fleet/

# The e2e package runs last and alone: its fleets of real nodes keep 2 cores busy by
# themselves, and beside the other packages their API servers stopped answering in time (TLS
# handshake timeouts, envtest start timeouts) under a load average of 40 to 80. Run beside them
# at a lower CPU priority (nice) for the others, it took 1,003 s instead of 609 and the suite
# 47 CPU-minutes instead of 33: the fleets cost about a core as long as they are up. The test
# binaries link without DWARF (-ldflags=-w): about a third less link time, and stack traces do
# not need it.
TEST_LDFLAGS ?= -w
# The e2e package's lanes (test/e2e/main_test.go), each on its own fleet: all start at once.
E2E_LANES := 3
.PHONY: test
test: verify lint ## The whole suite: generated-files check, lint, unit, integration and e2e tests (the fuzz seeds run as tests; make fuzz fuzzes).
	$(TEST_ENV) $(TEST_PROCESS_ENV) \
	before="$$(hack/leftovers.sh list)"; \
	rc=0; go test $(GO_TEST_FLAGS) -ldflags='$(TEST_LDFLAGS)' -p $(TEST_PACKAGES_AT_ONCE) -parallel $(TEST_PARALLEL) -timeout $(TEST_TIMEOUT) $$(hack/test-packages.sh) || rc=$$?; \
	go test $(GO_TEST_FLAGS) -ldflags='$(TEST_LDFLAGS)' -parallel $(E2E_LANES) -timeout $(TEST_TIMEOUT) ./test/e2e/ || rc=$$?; \
	hack/leftovers.sh check "$$before" || rc=1; exit $$rc

# The test binaries: built once per machine into the shared cache, then only looked up. The
# four scripts run at once (each builds alone under its own lock). The real nodes' Debian
# packages are installed first (root); FLEET_REAL_NODES=0 leaves the real-node tests out.
# The tests build as the shipped binary does, without cgo: with it, every test binary is linked
# by the system linker (a dependency imports plugin), which took twice as long.
FLEET_REAL_NODES ?= 1
TEST_ENV = mkdir -p $(BIN); \
	if [[ "$(FLEET_REAL_NODES)" == 1 ]]; then hack/node-packages.sh; fi; \
	hack/test-binaries.sh >$(BIN)/.k8s-dir & k8s=$$!; \
	hack/ocm-binaries.sh >$(BIN)/.ocm-dir & ocm=$$!; \
	hack/argocd-binaries.sh >$(BIN)/.argocd-dir & argocd=$$!; \
	hack/node-binaries.sh >$(BIN)/.node-dir & nodes=$$!; \
	wait $$k8s; wait $$ocm; wait $$argocd; wait $$nodes; \
	export KUBEBUILDER_ASSETS="$$(cat $(BIN)/.k8s-dir)" OCM_BINARIES_DIR="$$(cat $(BIN)/.ocm-dir)" ARGOCD_BINARIES_DIR="$$(cat $(BIN)/.argocd-dir)" \
		NODE_BINARIES_DIR="$$(cat $(BIN)/.node-dir)" FLEET_REAL_NODES="$(FLEET_REAL_NODES)" CGO_ENABLED=0;

# The environment of the tests. They, and the project's own processes they start, run with
# client-go's cache mutation detector (test/testenv/mutation.go); the demo does not.
# The test binaries and the processes they start (API servers, etcds, the fleets' OCM and node
# components) collect garbage less often than Go's default: make test keeps 2 cores busy from
# start to end, and memory is not what runs short. pkg/gitopscluster alone took 238 CPU-seconds
# at GOGC=400 against 293 at the default, its peak process 2 GiB. The manager keeps the
# binary's own setting, as a pod (its environment is the pod spec's) and as a process a test
# starts (testenv.ProjectProcessEnv).
TEST_GOGC ?= 400
TEST_PROCESS_ENV = export KUBE_CACHE_MUTATION_DETECTOR=true GOGC=$(TEST_GOGC);

.PHONY: test-unit
test-unit: ## Unit tests only (no API server).
	go test $(GO_TEST_FLAGS) -short ./...

.PHONY: test-integration
test-integration: ## Tests against a real API server (envtest), without the local fleet's e2e.
	$(TEST_ENV) $(TEST_PROCESS_ENV) \
	go test $(GO_TEST_FLAGS) -timeout $(TEST_TIMEOUT) $$(go list ./... | grep -v -e /test/e2e -e /test/fleet)

.PHONY: test-node
test-node: ## The real-node tests alone (root): test/node's nodes and the fleet on real nodes (make test-e2e runs the e2e suite, on real nodes too); then nothing may be left.
	$(TEST_ENV) \
	before="$$(hack/leftovers.sh list)"; \
	rc=0; go test $(GO_TEST_FLAGS) -v -timeout 20m ./test/node/ || rc=$$?; \
	go test $(GO_TEST_FLAGS) -v -timeout 15m -run 'TestFleetRealNodes|TestArgoCDPods' ./test/fleet/ || rc=$$?; \
	hack/leftovers.sh check "$$before" || rc=1; exit $$rc

.PHONY: test-e2e
test-e2e: ## The e2e suite on the local fleet with real nodes (root), and the fleet's own tests.
	$(TEST_ENV) $(TEST_PROCESS_ENV) \
	go test $(GO_TEST_FLAGS) -parallel $(E2E_LANES) -timeout $(TEST_TIMEOUT) $(E2E_PACKAGES)

.PHONY: fault
FAULT_KILLS ?= 20
FAULT_CLUSTERS ?= 1000
fault: ## The fault suite with more kills and a bigger fleet (FAULT_KILLS, FAULT_CLUSTERS, FAULT_SEED).
	export KUBEBUILDER_ASSETS="$$(hack/test-binaries.sh)"; \
	FAULT_KILLS=$(FAULT_KILLS) FAULT_CLUSTERS=$(FAULT_CLUSTERS) go test -count=1 -timeout 60m -v ./test/fault/

.PHONY: fuzz
fuzz: ## Fuzz the signer's CSR checks for two minutes.
	go test ./pkg/signer/ -run '^$$' -fuzz FuzzCheckCSR -fuzztime 2m -fuzzminimizetime 200x

##@ Run
.PHONY: demo
demo: ## As root: a local OCM hub and two managed clusters with real nodes; helm install the chart, apply the example, Argo CD's pods deploy a guestbook; show the result.
	go build -o $(BIN)/demo ./test/demo
	$(BIN)/demo --preflight
	$(TEST_ENV) \
	exec $(BIN)/demo $(if $(DEMO_EXIT),--exit)

.PHONY: clean
clean: ## Remove build outputs (keeps the cached test binaries).
	rm -f $(BIN)/argocd-agent-addon

##@ Benchmarks
BENCH_CLUSTERS ?= 100,1000,5000
BENCH_IDLE ?= 2m
.PHONY: bench-fleet
bench-fleet: build ## Reconciler benchmark on a real API server (BENCH_CLUSTERS, BENCH_IDLE).
	export KUBEBUILDER_ASSETS="$$(hack/test-binaries.sh)"; \
	go run ./test/bench/fleet --manager $(BIN)/argocd-agent-addon --clusters $(BENCH_CLUSTERS) --idle $(BENCH_IDLE)

.PHONY: bench-components
bench-components: build ## Hub etcd per cluster for the Argo CD components, rendered by OCM's addon-manager (BENCH_COMPONENTS_CLUSTERS, default 200; both modes).
	go run ./test/bench/components --manager $(BIN)/argocd-agent-addon --clusters $(or $(BENCH_COMPONENTS_CLUSTERS),200) --mode managed
	go run ./test/bench/components --manager $(BIN)/argocd-agent-addon --clusters $(or $(BENCH_COMPONENTS_CLUSTERS),200) --mode autonomous

.PHONY: bench-pullmodel
bench-pullmodel: build ## Basic pull model benchmark: 5,000 Applications over 500 clusters on one API server.
	export KUBEBUILDER_ASSETS="$$(hack/test-binaries.sh)"; \
	export ARGOCD_BINARIES_DIR="$$(hack/argocd-binaries.sh)"; \
	go run ./test/bench/pullmodel --manager $(BIN)/argocd-agent-addon --clusters 500 --apps 5000
