# promscaler Makefile. Every target means what it says; scripts live in hack/.
SHELL := /usr/bin/env bash
GO ?= go
OUT := $(CURDIR)/_output
BIN := $(OUT)/bin
# Real third-party binaries (kube-apiserver, etcd, prometheus, ...) built by
# hack/tools.sh from the separate tools module in hack/tools/.
PROMSCALER_TOOLS_DIR ?= $(CURDIR)/.cache/tools
export PROMSCALER_TOOLS_DIR
export PROMSCALER_BIN_DIR := $(BIN)
# What the binaries report in --version and promscaler_build_info.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X github.com/promscaler/promscaler/internal/version.version=$(VERSION) -X github.com/promscaler/promscaler/internal/version.revision=$(REVISION)
export VERSION REVISION

.PHONY: all build unit test e2e e2e-keda e2e-engines tools verify fuzz bench chaos soak demo up down manifests image clean diff-upstream

all: build

## build: build the adapter and autoscaler binaries into _output/bin
build:
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/ ./cmd/...

## unit: unit tests (fakes, httptest) with the race detector
unit:
	$(GO) test -race -count=1 ./...

## tools: build (once, cached) the real Kubernetes, etcd and Prometheus binaries
tools:
	hack/tools.sh

## e2e: integration and end-to-end tests against real Prometheus, etcd, kube-apiserver
e2e: tools build image
	$(GO) test -tags e2e -count=1 -timeout 40m -p 1 ./test/...

## e2e-keda: promscaler beside KEDA's operator and metrics server (TestDownstreamKEDA, build tags e2e,keda).
## Not part of test: KEDA's cold build (hack/tools.sh keda) is longer than the rest of test together (docs/downstream.md)
e2e-keda: build
	hack/tools.sh etcd prometheus kubernetes keda
	$(GO) vet -tags e2e,keda ./test/e2e/
	$(GO) test -tags e2e,keda -count=1 -timeout 30m -p 1 -run '^TestDownstreamKEDA$$' ./test/e2e/

## e2e-engines: the end-to-end suite against Thanos, VictoriaMetrics and Cortex (test/engines,
## build tag e2eengines), each built from the Go module proxy by hack/tools.sh (cold builds take
## long enough that this is not part of test: docs/e2e.md)
e2e-engines: build
	hack/tools.sh etcd prometheus kubernetes engines
	$(GO) vet -tags e2eengines ./test/engines/
	$(GO) test -tags e2eengines -count=1 -timeout 60m -p 1 -v ./test/engines/

## test: everything a change must pass: unit, the upstream differential tests, then e2e
test: unit diff-upstream e2e

## diff-upstream: run the decision core beside kube-controller-manager 1.37's own code on random inputs
## (a separate module: it needs k8s.io/kubernetes, which never enters the main go.mod)
diff-upstream:
	cd pkg/autoscaler/upstreamdiff && GOWORK=off $(GO) test -count=1 .

## verify: gofmt, go vet, function length (hack/funclen), staticcheck, go mod tidy
verify:
	hack/verify.sh

## fuzz: run every fuzzer for FUZZTIME (default 60s) each
fuzz:
	hack/fuzz.sh

## bench: benchmarks and load harnesses (slow; not part of test)
bench: tools build
	hack/bench.sh

## chaos: the fault suite on the real stack, one row per fault in _output/chaos (not part of test; docs/reliability.md)
chaos: tools build
	hack/chaos.sh faults

## soak: one hour of steady load with series and pod churn; adapter RSS and goroutines must stay flat
soak: tools build
	hack/chaos.sh soak

## demo: build what is missing, start a local cluster + Prometheus + adapter, scale a demo app
demo: tools build
	hack/demo.sh

## up / down: start / stop the local environment (see README)
up: tools build
	hack/up.sh
down:
	hack/down.sh

## manifests: render the kustomize overlays in deploy/ into _output/manifests
manifests:
	hack/manifests.sh

## image: the multi-arch (linux/amd64, linux/arm64) OCI image, built without a
## container engine, into _output/image (OCI layout) and _output/image.oci.tar
image:
	hack/image.sh

clean:
	rm -rf $(OUT)
