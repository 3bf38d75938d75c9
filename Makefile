GO ?= go
PKGS := ./...
CORE := ./shard/... ./ring/... ./steal/... ./wal/... ./node/... ./peer/...

.PHONY: run build release deb rpm test race sim simulate fuzz bench compare lint deps vet fmt hostile

# Release builds: static binaries (no cgo) stamped with the version and
# commit that --version prints, for each of PLATFORMS, into DIST with their
# sha256 sums. `make release DIST=dir PLATFORMS=linux/arm64 VERSION=v1.2.3`.
DIST ?= dist
PLATFORMS ?= linux/amd64 linux/arm64
VERSION ?= $(shell git describe --tags --match 'v*' --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
BUILDINFO := github.com/needle-mesh/needle/cmd/internal/buildinfo
RELEASE_LDFLAGS := -s -w -X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Commit=$(COMMIT)

# bin/ is stamped like a release (--version names the commit even where
# the toolchain records none: GOFLAGS=-buildvcs=false, a copied tree).
build:
	$(GO) build -ldflags '-X $(BUILDINFO).Version=$(VERSION) -X $(BUILDINFO).Commit=$(COMMIT)' -o bin/ ./cmd/...

release:
	@mkdir -p $(DIST)
	@for p in $(PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; \
		for cmd in needled needle; do \
			echo "build $(DIST)/$$cmd-$$os-$$arch ($(VERSION))"; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -buildvcs=false \
				-ldflags '$(RELEASE_LDFLAGS)' -o $(DIST)/$$cmd-$$os-$$arch ./cmd/$$cmd || exit 1; \
		done; \
	done
	cd $(DIST) && sha256sum needled-* needle-* > SHA256SUMS && cat SHA256SUMS

# The Debian package of the release binaries for DEB_ARCH (this machine's):
# dist/needle_<version>_<arch>.deb (deploy/deb/build.sh).
DEB_ARCH ?= $(shell $(GO) env GOARCH)
deb:
	$(MAKE) -s release PLATFORMS=linux/$(DEB_ARCH)
	bash deploy/deb/build.sh $(VERSION) $(DEB_ARCH) $(DIST)

# The RPM package of the same binaries (needs rpmbuild: Debian's rpm).
rpm:
	$(MAKE) -s release PLATFORMS=linux/$(DEB_ARCH)
	bash deploy/rpm/build.sh $(VERSION) $(DEB_ARCH) $(DIST)

run: build
	./bin/needled --data ./needle-data --http 127.0.0.1:7070

test: vet
	$(GO) test -count=1 -timeout 15m $(PKGS)
	$(GO) test -count=1 -race -timeout 15m $(CORE)

# The hostile-input soak on three real daemons, alone on the machine.
hostile:
	NEEDLE_HOSTILE=1 $(GO) test -count=1 -timeout 10m -run '^TestHostileMeshHolds$$' ./cmd/needled

race:
	$(GO) test -race $(CORE)

vet:
	$(GO) vet $(PKGS)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1)

fmt:
	gofmt -w $$(git ls-files '*.go')

lint: vet

deps:
	$(GO) mod download

fuzz:
	@for f in $$(grep -rhoE '^func Fuzz[A-Za-z0-9_]+' --include='*_test.go' . | sed 's/func //'); do \
		pkg=$$(grep -rlE "^func $$f\(" --include='*_test.go' . | xargs dirname); \
		echo "fuzz $$f in $$pkg"; $(GO) test -run=^$$ -fuzz=^$$f$$ -fuzztime=30s $$pkg || exit 1; \
	done

bench:
	$(GO) test -run=^$$ -bench=. -benchmem $(PKGS)

compare: build
	cd bench/compare && ./run.sh

sim: simulate
simulate:
	$(GO) run ./cmd/needle simulate --seeds 1000
	$(GO) run ./cmd/needle simulate --seeds 1000 --peers 5
	$(GO) run ./cmd/needle simulate --seeds 1000 --peers 5 --start join
	$(GO) run ./cmd/needle simulate --seeds 300 --peers 4 --workload placement
	$(GO) run ./cmd/needle simulate --seeds 100 --peers 5 --workload placement --tasks 1000
	$(GO) run ./cmd/needle simulate --seeds 300 --workers 2
	$(GO) run ./cmd/needle simulate --seeds 200 --peers 4 --workload workers
	$(GO) run ./cmd/needle simulate --seeds 200 --peers 4 --workload workers --faults worker,busy,poison,restart,hang,crash,partition
	$(GO) run ./cmd/needle simulate --seeds 300 --peers 4 --faults forge,crash,partition
	$(GO) run ./cmd/needle simulate --seeds 300 --peers 7 --placement circle
	$(GO) run ./cmd/needle simulate --seeds 200 --peers 4 --workload gated
	$(GO) run ./cmd/needle simulate --seeds 4 --peers 20 --tasks 5000 --partitions 256 --liveness 5m
	$(GO) run ./cmd/needle simulate --seeds 6 --peers 200 --tasks 5000 --partitions 1024 --workload w1 --faults crash,partition,churn --liveness 5m
	$(GO) run ./cmd/needle simulate --seeds 3 --peers 200 --tasks 5000 --partitions 1024 --workload w1 --faults crash,partition,churn --liveness 5m --start join
