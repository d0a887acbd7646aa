# Build, run and test webhookd: `make run` starts the development stack, `make test` is what CI runs.

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
TEMPORAL_CLI_VERSION := v1.5.1

.PHONY: build run postgres test bench fmt vet clean

build:
	@echo "==> building bin/webhookd (the first build downloads modules: 1-3 minutes; then seconds)"
	go build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/webhookd ./cmd/webhookd

# The Temporal CLI hosts the dev server for `make run` and the integration tests. It is pinned
# (@latest does not build) and installed once, since building it takes minutes.
bin/temporal:
	@echo "==> installing the Temporal CLI $(TEMPORAL_CLI_VERSION) into bin/ (once; usually 5-8 minutes on 2 cores, silent while it compiles)"
	GOBIN=$(CURDIR)/bin go install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

# The tests start throwaway PostgreSQL clusters of their own, so they need the server binaries.
postgres:
	@echo "==> checking for the PostgreSQL server binaries (installed with apt when absent: about a minute)"
	deployments/dev/ensure-postgres.sh

run: build bin/temporal
	deployments/dev/run.sh

test: bin/temporal postgres
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed (run make fmt):"; echo "$$unformatted"; exit 1; fi
	go vet ./...
	go test -race -count=1 -timeout 12m ./...

bench:
	go test -run '^$$' -bench . -benchmem ./...

# Receiver isolation (docs/performance.md): a throwaway stack on ports of its own, a hanging
# receiver and a healthy one. SCENARIO=hanging|isolation runs one, ARGS='-rate 5' passes loadtest
# flags, WEBHOOKD_BIN=... measures another build.
.PHONY: bench-isolation
bench-isolation:
	deployments/dev/bench-isolation.sh $(SCENARIO) $(ARGS)

fmt:
	gofmt -w .

vet:
	go vet ./...

# Keeps bin/temporal: rebuilding it takes minutes and it does not change with our code.
clean:
	rm -f bin/webhookd
