# groundcloud — an index over small scripts in hack/.
.PHONY: all build deps demo demo-down test test-unit test-e2e lint generate tools fuzz bench

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

deps:             ## install nftables, iproute2, containerd, runc, the CNI plugins and frr when missing (Debian, as root)
	hack/install-deps.sh

test: deps lint   ## everything CI runs: lint, unit, kernel (netns) and end-to-end tests
	hack/test.sh ./...

test-unit:        ## unit tests only: pure logic and fakes, no processes, no kernel
	go test -short -count=1 ./...

test-e2e: deps    ## end-to-end tests: real kube-apiserver, etcd, our binaries, netns hosts
	hack/test.sh ./test/...

lint:             ## gofmt, go vet, go mod tidy, generated files up to date
	hack/lint.sh

generate:         ## regenerate deepcopy code and CRD manifests
	hack/generate.sh

fuzz:             ## run each fuzz target for FUZZTIME (default 30s)
	hack/fuzz.sh

bench: deps       ## benchmarks (not pass/fail): print BENCH lines, rewrite their docs/benchmarks.md sections (root)
	hack/bench.sh
