# Xila Guard. Every target builds or installs what it needs; see README.md.
# Versions are pinned in hack/versions.env.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -o errexit -o nounset -o pipefail -c
.DEFAULT_GOAL := help

include hack/versions.env

BIN := $(CURDIR)/_output/bin
ENVTEST_ASSETS := $(CURDIR)/_output/envtest
KIND_KUBECONFIG ?= $(CURDIR)/_output/kubeconfig
# One version for every image and binary of this run.
# Computed once, so a commit made while images build cannot change the tag the
# tests then look for.
ifeq ($(origin XG_VERSION),undefined)
XG_VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
endif
export KIND_KUBECONFIG XG_VERSION
# Go modules of the workspace (go.work), and the GOWORK=off tool module.
MODULES := $(shell go work edit -json | sed -n 's/.*"DiskPath": "\.\/\(.*\)".*/\1/p')
GO_PACKAGES := $(addsuffix /...,$(addprefix ./,$(MODULES)))
# The Terraform provider is its own module outside go.work (GOWORK=off): it
# brings Helm, kind and the Terraform plugin libraries, which no component
# needs. hack/update-pins.sh gives it the same Kubernetes pins.
TF_PROVIDER := terraform/provider
TF_CLI_CONFIG := $(CURDIR)/_output/terraform/terraform.rc

##@ Main

help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ {printf "  %-14s %s\n", $$1, $$2} /^##@/ {printf "\n%s\n", substr($$0, 5)}' $(MAKEFILE_LIST)

demo: build images kind-up ## Build everything offline, bring up the lab cluster, install the chart and run the six phases.
	go run ./e2e/cmd/demo --kubeconfig $(KIND_KUBECONFIG) --bin $(BIN) --repo-root $(CURDIR) \
	  --cluster "$${CLUSTER_NAME:-xila-guard}" --image-tag $(XG_VERSION) --agnhost $(AGNHOST_IMAGE)

test: ## The whole suite: generated code, lint, unit, integration, end-to-end, Terraform; each phase timed.
	hack/run-phases.sh verify lint unit integration e2e terraform-test

##@ Build

packages: ## Install missing Debian build packages (clang, llvm, libbpf-dev, iproute2, debootstrap).
	hack/ensure-packages.sh

tools: packages ## Build Kubernetes, etcd, CoreDNS, crictl, helm, kind and linters from Go modules.
	hack/build-tools.sh

build: tools plugin ## Compile every module and binary.
	go build $(GO_PACKAGES)
	cd $(TF_PROVIDER) && GOWORK=off go build ./...
	cd hack/tools && GOWORK=off go build ./runcwrap ./pause

plugin: ## Build the kubectl plugin into _output/bin/kubectl-xila_guard (put it on PATH: kubectl xila-guard).
	go build -o $(BIN)/kubectl-xila_guard ./components/cli/cmd/kubectl-xila_guard

images: ## Build one FROM-scratch image per component, tagged with git describe.
	hack/build-images.sh

kind-image: ## Build the offline kind node image $(NODE_IMAGE).
	hack/ensure-docker.sh
	hack/build-node-image.sh

terraform-provider: images kind-image ## Build the xilaguard Terraform provider into a local mirror the examples find, with the images the lab loads.
	hack/build-terraform-provider.sh

envtest: tools ## Assemble the envtest asset directory (kube-apiserver, etcd, kubectl).
	mkdir -p $(ENVTEST_ASSETS)
	for b in kube-apiserver etcd kubectl; do ln -sfn "$$(readlink -f $(BIN)/$$b)" $(ENVTEST_ASSETS)/$$b; done

##@ Cluster

kind-up: ## Create (or reuse) the 3-node lab cluster; KIND_NODE_IMAGE overrides the node image.
	hack/kind-up.sh

kind-down: ## Delete the lab cluster.
	hack/kind-down.sh

##@ Test

# The chart's tests render templates and compile CEL, none of it code of
# ours that runs concurrently; under the race detector they took a minute
# of the phase (docs/benchmarks/build.md), so they run without it.
UNIT_NORACE := ./charts/...

unit: ## Unit tests (race detector on, but for the chart's).
	go test -race -count=1 $(filter-out $(UNIT_NORACE),$(GO_PACKAGES))
	go test -count=1 $(UNIT_NORACE)
	cd hack/tools && GOWORK=off go test -race -count=1 ./runcwrap/...
	cd $(TF_PROVIDER) && GOWORK=off go test -race -count=1 ./...

integration: envtest ## Integration tests against a real kube-apiserver and etcd.
	KUBEBUILDER_ASSETS=$(ENVTEST_ASSETS) go test -tags integration -count=1 -run Integration $(GO_PACKAGES)

# One package (./e2e; e2e/lab's own tests run in unit), so that go test
# streams each feature's output as it runs instead of buffering the suite.
e2e: tools plugin images kind-image dependency-images ## End-to-end suite on a kind cluster (KEEP_CLUSTER=1 keeps it; E2E_RUN=<regexp> picks tests).
	XG_BIN=$(BIN) XG_IMAGE_TAG=$(XG_VERSION) NODE_IMAGE=$(NODE_IMAGE) AGNHOST_IMAGE=$(AGNHOST_IMAGE) \
	  VOLCANO_MANIFEST="$$(cd hack/tools/volcano && GOWORK=off go list -m -f '{{.Dir}}' volcano.sh/volcano)/installer/volcano-development.yaml" \
	  VOLCANO_IMAGES=$(VOLCANO_IMAGES) \
	  DRA_EXAMPLE_CHART="$$(cd hack/tools/dra-example && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/dra-example-driver)/deployments/helm/dra-example-driver" \
	  DRA_EXAMPLE_IMAGE=xila-guard/dra-example-driver:$(DRA_EXAMPLE_VERSION) \
	  go test -tags e2e -count=1 -timeout 60m -v $(if $(E2E_RUN),-run '$(E2E_RUN)') ./e2e

# Volcano's images (hack/build-dependency-images.sh), by the binary they run.
comma := ,
empty :=
space := $(empty) $(empty)
VOLCANO_IMAGES := $(subst $(space),$(comma),$(foreach b,vc-scheduler vc-controller-manager vc-webhook-manager,$(b)=xila-guard/volcano-$(b):$(VOLCANO_VERSION)))

dependency-images: ## Build Volcano (VOLCANO_VERSION) and the DRA example driver (DRA_EXAMPLE_VERSION) from their Go modules into local images for the e2e suite.
	hack/build-dependency-images.sh

terraform-test: tools terraform-provider images kind-image ## Terraform: apply the lab example on its own kind cluster, plan, upgrade, destroy.
	XG_BIN=$(BIN) XG_IMAGE_TAG=$(XG_VERSION) NODE_IMAGE=$(NODE_IMAGE) TF_CLI_CONFIG_FILE=$(TF_CLI_CONFIG) REPO_ROOT=$(CURDIR) \
	  bash -c 'cd $(TF_PROVIDER) && GOWORK=off go test -tags e2e -count=1 -timeout 30m -v -run Terraform ./test/...'

test-kind-lab: tools kind-image ## Create the lab cluster KIND_LAB_RUNS times (default 3) through hack/kind-up.sh and through the Terraform provider's code; every node Ready each time.
	hack/test-kind-lab.sh
	cd $(TF_PROVIDER) && NODE_IMAGE=$(NODE_IMAGE) GOWORK=off go test -tags e2e -count=1 -timeout 30m -v -run TestLabCreateRepeatedly ./internal/kindlab/

e2e-volcano: ## Volcano scenarios against real Volcano (VOLCANO_VERSION) from its release manifest; needs a registry.
	hack/e2e-volcano.sh

##@ Code health

lint: tools ## gofmt, go vet and staticcheck on every module; helm lint --strict on the chart.
	@unformatted=$$(gofmt -l components bench e2e charts terraform hack); \
	  if [ -n "$$unformatted" ]; then echo "gofmt -w these files:"; echo "$$unformatted"; exit 1; fi
	go vet -tags integration,e2e $(GO_PACKAGES)
	$(BIN)/staticcheck -tags integration,e2e $(GO_PACKAGES)
	cd hack/tools && GOWORK=off go vet ./runcwrap ./pause
	cd $(TF_PROVIDER) && GOWORK=off go vet -tags e2e ./... && GOWORK=off $(BIN)/staticcheck -tags e2e ./...
	$(BIN)/helm lint --strict charts/xila-guard
	for v in charts/testdata/values/*.yaml; do \
	  $(BIN)/helm lint --strict --quiet charts/xila-guard -f "$$v" --set-file webhook.tls.caBundle=charts/testdata/test-ca.crt; \
	done

generate: tools ## Regenerate pins, deepcopy, CRDs and eBPF objects.
	hack/update-pins.sh
	hack/update-codegen.sh
	hack/update-bpf.sh

verify: tools ## Fail when generated code or pins are stale.
	hack/verify.sh

clean: ## Remove build output (not the version cache in ~/.cache/xila-guard).
	rm -rf _output

.PHONY: help demo test packages tools build plugin images kind-image envtest kind-up kind-down unit integration e2e test-kind-lab e2e-volcano dependency-images lint generate verify clean terraform-provider terraform-test
