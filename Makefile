# groundcloud — an index over small scripts in hack/.
.PHONY: all build deps demo demo-down test test-unit test-e2e test-upgrade conformance sig-network lint generate tools fuzz bench

all: build

build:            ## build our binaries into bin/ (static, as deploy/images/ builds them)
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o bin/ ./cmd/...

demo: deps        ## the sandbox: a real cluster in network namespaces with groundcloud installed, until Ctrl-C (root)
	go build -o bin/ ./cmd/groundcloud-sandbox
	bin/groundcloud-sandbox up $(DEMO_FLAGS)

demo-down:        ## remove a sandbox (a running one, or what a crashed one left)
	go build -o bin/ ./cmd/groundcloud-sandbox
	bin/groundcloud-sandbox down

tools:            ## build the pinned Kubernetes binaries (kube-apiserver, kubelet, kube-proxy, ...), helm and promcheck (cached)
	hack/tools/build.sh
	hack/tools/build-module.sh helm
	hack/tools/build-module.sh promcheck

deps:             ## install nftables, iproute2, containerd, runc, the CNI plugins, frr and the BMC emulator's Python libraries when missing (Debian, as root)
	hack/install-deps.sh

test: deps lint   ## everything CI runs: lint, unit, kernel (netns) and end-to-end tests
	hack/test.sh ./...

test-unit:        ## unit tests only: pure logic and fakes, no processes, no kernel
	go test -short -count=1 ./...

test-e2e: deps    ## end-to-end tests: real kube-apiserver, etcd, our binaries, netns hosts
	hack/test.sh ./test/...

test-upgrade: deps ## the upgrade and downgrade lane alone (make test runs it too): the previous release, then this tree, then back, with traffic (test/cluster TestUpgrade; needs the git history)
	GROUNDCLOUD_UPGRADE=1 TEST_FLAGS="-v $(TEST_FLAGS)" hack/test.sh -run '^TestUpgrade$$' ./test/cluster/

conformance: deps ## Kubernetes' [sig-network] LoadBalancers e2e specs on every lane (test/conformance; LANES=a,b for some)
	GROUNDCLOUD_LANES=$(or $(LANES),all) TEST_FLAGS="-v -timeout 6h $(TEST_FLAGS)" hack/test.sh ./test/conformance/

sig-network: deps ## the rest of Kubernetes' [sig-network] e2e specs, once, on the default lane: a report (test/conformance TestSigNetwork), not pass/fail (FOCUS=regexp for some, PROCS=n processes, default 3)
	GROUNDCLOUD_CONFORMANCE=sig-network GROUNDCLOUD_SIG_NETWORK_FOCUS='$(FOCUS)' GROUNDCLOUD_E2E_PROCS=$(PROCS) TEST_FLAGS="-v -timeout 3h $(TEST_FLAGS)" hack/test.sh -run '^TestSigNetwork$$' ./test/conformance/

lint:             ## gofmt, go vet, go mod tidy, generated files up to date
	hack/lint.sh

generate:         ## regenerate deepcopy code and CRD manifests
	hack/generate.sh

fuzz:             ## run each fuzz target for FUZZTIME (default 30s)
	hack/fuzz.sh

bench: deps       ## benchmarks (not pass/fail): print BENCH lines, rewrite their docs/benchmarks.md sections (root)
	hack/bench.sh
