GO ?= go
PKGS := ./...
CORE := ./shard/... ./ring/... ./steal/... ./wal/... ./peer/...

.PHONY: run build test race sim simulate fuzz bench compare lint deps vet fmt

build:
	$(GO) build -o bin/ ./cmd/...

run: build
	./bin/needled --data ./needle-data --http 127.0.0.1:7070

test: vet
	$(GO) test -count=1 -timeout 15m $(PKGS)
	$(GO) test -count=1 -race -timeout 15m $(CORE)

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
	$(GO) run ./cmd/needle simulate --seeds 300 --peers 4 --workload placement
	$(GO) run ./cmd/needle simulate --seeds 4 --peers 20 --tasks 5000 --partitions 256 --liveness 5m
