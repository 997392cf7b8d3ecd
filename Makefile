# The executor's build. Every tool is built from the Go module proxy into bin/.
export GOTOOLCHAIN := local
SHELL := /usr/bin/env bash -o pipefail

BIN        := $(CURDIR)/bin
K8S_BIN    := $(BIN)/k8s
K8S_VERSION := v1.37.2
CONTROLLER_GEN := $(BIN)/controller-gen
K8S_LDFLAGS := -s -w -X k8s.io/component-base/version.gitVersion=$(K8S_VERSION) \
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37 \
	-X k8s.io/component-base/version.gitTreeState=clean
export KUBEBUILDER_ASSETS := $(K8S_BIN)
export KUBEBUILDER_CONTROLPLANE_START_TIMEOUT ?= 60s

.PHONY: all build generate manifests verify-generated test test-unit test-faults lint fmt vet envtest tools clean local bench-controller bench bench-tools

all: build

build: ## bin/executor
	go build -o $(BIN)/executor ./cmd/executor

$(CONTROLLER_GEN): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $(CONTROLLER_GEN) sigs.k8s.io/controller-tools/cmd/controller-gen

generate: $(CONTROLLER_GEN) ## deepcopy functions
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...

# crdbounds bounds every quantity of the CRD (pattern, length), which
# controller-gen's markers cannot reach in Kubernetes' own types.
manifests: $(CONTROLLER_GEN) ## CRD and RBAC YAML under config/
	$(CONTROLLER_GEN) crd:maxDescLen=512 rbac:roleName=manager-role \
		paths=./... \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac
	go run ./api/v1/crdbounds config/crd/bases/flyte.org_taskactions.yaml
	cp config/crd/bases/flyte.org_taskactions.yaml charts/executor/files/crds/

verify-generated: generate manifests ## fails when generated files are stale
	@git diff --exit-code -- api config charts/executor/files || { echo "generated files are stale: run 'make generate manifests' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- api config charts/executor/files)" || { echo "untracked generated files: run 'make generate manifests' and commit"; git status --porcelain -- api config charts/executor/files; exit 1; }

# envtest: kube-apiserver and etcd built from the Go module proxy; a no-op when the right versions are present.
envtest: $(K8S_BIN)/.version-$(K8S_VERSION)
$(K8S_BIN)/.version-$(K8S_VERSION): hack/k8s/go.mod hack/k8s/go.sum
	mkdir -p $(K8S_BIN)
	cd hack/k8s && go build -ldflags "$(K8S_LDFLAGS)" -o $(K8S_BIN)/ k8s.io/kubernetes/cmd/kube-apiserver go.etcd.io/etcd/server/v3
	mv -f $(K8S_BIN)/server $(K8S_BIN)/etcd
	rm -f $(K8S_BIN)/.version-*
	touch $@

test: envtest lint verify-generated ## unit and envtest suites, the image and chart modules, then each fuzz target briefly
	go test -count=1 -timeout 30m ./...
	$(MAKE) --no-print-directory test-modules
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_BRIEF)

# The modules of their own (kept out of go.mod): the image builder and the chart's tests.
MODULES := hack/image test/chart
.PHONY: test-modules image
test-modules: envtest
	cd hack/image && go test -count=1 -timeout 30m ./...
	cd test/chart && go test -count=1 -timeout 10m ./...

# image: bin/executor-image.tar, the commit's executor (HEAD; IMAGE_ARGS=-worktree for the work
# tree) on an empty base, built without a container engine: the same commit gives the same
# digest. `docker load -i`, `kind load image-archive` and `crane push` take it.
IMAGE_ARGS ?=
image:
	cd hack/image && go run . -o $(BIN)/executor-image.tar -binary-out $(BIN)/executor-linux-amd64 $(IMAGE_ARGS)

# fuzz: the fuzz targets of everything that parses what a client stores (the
# typed decode, Flyte's template, the pod build, the admission webhook and its
# AdmissionReview decode), one after the other for FUZZTIME each; `make test`
# runs each for FUZZTIME_BRIEF.
# Each input must be handled within a second (test/faults/badinput/hostile).
FUZZTIME ?= 2m
FUZZTIME_BRIEF ?= 5s
FUZZ_TARGETS := ./pkg/task:FuzzTaskActionJSON ./pkg/task:FuzzFlyteTemplate \
	./pkg/plugin/container:FuzzBuildPod ./pkg/webhook:FuzzAdmission ./pkg/webhook:FuzzReviewHandler
.PHONY: fuzz
fuzz: ## each fuzz target for FUZZTIME (default 2m)
	@set -e; for t in $(FUZZ_TARGETS); do pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$fn ($$pkg) for $(FUZZTIME)"; \
		go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) $$pkg; \
	done

test-unit:
	go test -count=1 -short ./...
	for m in $(MODULES); do (cd $$m && go test -count=1 -short ./...) || exit 1; done

# local: the whole system on this machine, in the foreground; ARGS=--demo runs the samples.
local: envtest build
	$(BIN)/executor local $(ARGS)

# bench: the executor against a floor controller on a kwok rig (docs/benchmark.md).
KWOK_VERSION := v0.8.0
BENCH_FLAGS ?=
bench: envtest build bench-tools
	go run ./bench $(BENCH_FLAGS)

bench-tools: $(BIN)/kwok $(K8S_BIN)/kube-scheduler
$(BIN)/kwok:
	GOBIN=$(BIN) go install sigs.k8s.io/kwok/cmd/kwok@$(KWOK_VERSION)
$(K8S_BIN)/kube-scheduler: hack/k8s/go.mod hack/k8s/go.sum
	mkdir -p $(K8S_BIN)
	cd hack/k8s && go build -ldflags "$(K8S_LDFLAGS)" -o $(K8S_BIN)/ k8s.io/kubernetes/cmd/kube-scheduler

# test-faults: the fault suites on the kwok rig (crash, service outage, API-server
# restart, leader failover, delete storm) and the bad-input matrix, one at a time,
# each audit's counts printed (docs/faults.md). FAULTS_N, FAULTS_K, FAULTS_SEED,
# FAULTS_STORM, FAULTS_OUTAGE and FAULTS_KEEP=1 tune them.
test-faults: envtest build bench-tools
	time FAULTS_KWOK=1 FAULTS_STRICT=1 go test -count=1 -p 1 -v -timeout 60m ./test/faults/... 2>&1 \
		| grep --line-buffered -v '^{"level"'

# bench-controller: API requests per TaskAction of the reconciler against envtest.
bench-controller: envtest
	go test -count=1 -run '^$$' -bench BenchmarkTaskActionLifecycle -benchtime 200x ./pkg/controller

lint: fmt vet
fmt:
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/') hack/image); test -z "$$out" || { echo "gofmt needed:"; echo "$$out"; exit 1; }
vet:
	go vet ./...
	for m in $(MODULES); do (cd $$m && go vet ./...) || exit 1; done

clean:
	rm -rf $(BIN)

# proto: Go and connect-go code under gen/ from proto/, with buf and both plugins built
# from hack/tools (the Go module proxy); the generated code is committed.
BUF                   := $(BIN)/buf
PROTOC_GEN_GO         := $(BIN)/protoc-gen-go
PROTOC_GEN_CONNECT_GO := $(BIN)/protoc-gen-connect-go
.PHONY: proto verify-proto
$(BUF): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $(BUF) github.com/bufbuild/buf/cmd/buf
$(PROTOC_GEN_GO): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $(PROTOC_GEN_GO) google.golang.org/protobuf/cmd/protoc-gen-go
$(PROTOC_GEN_CONNECT_GO): hack/tools/go.mod hack/tools/go.sum
	cd hack/tools && go build -o $(PROTOC_GEN_CONNECT_GO) connectrpc.com/connect/cmd/protoc-gen-connect-go

proto: $(BUF) $(PROTOC_GEN_GO) $(PROTOC_GEN_CONNECT_GO) ## gen/ from proto/
	cd proto && PATH="$(BIN):$$PATH" $(BUF) lint && PATH="$(BIN):$$PATH" $(BUF) generate

verify-proto: proto ## fails when gen/ is stale
	@git diff --exit-code -- gen || { echo "gen/ is stale: run 'make proto' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- gen)" || { echo "untracked generated files: run 'make proto' and commit"; git status --porcelain -- gen; exit 1; }
