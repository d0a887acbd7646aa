# Build, run and test webhookd: `make run` starts the development stack, `make test` is what CI runs.

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
TEMPORAL_CLI_VERSION := v1.5.1
STATICCHECK_VERSION := v0.8.2
ERRCHECK_VERSION := v1.30.0
WORKFLOWCHECK_VERSION := v0.6.0
NATS_SERVER_VERSION := v2.15.3
# The linters read the system tests (e2e) and the recorders of workflows/testdata (record) too.
LINT_TAGS := e2e,record,integration,pressure

.PHONY: build run postgres promtool chromium rabbitmq test lint bench fmt vet clean

build:
	@echo "==> building bin/webhookd and bin/devtemporal (the first build downloads modules: 1-3 minutes; then seconds)"
	CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/webhookd ./cmd/webhookd
	CGO_ENABLED=0 go build -trimpath -o bin/devtemporal ./cmd/devtemporal

# The Temporal CLI hosts the dev server for `make run` and the integration tests (-tags integration).
# It is pinned (@latest does not build) and installed once, since building it takes minutes.
bin/temporal:
	@echo "==> installing the Temporal CLI $(TEMPORAL_CLI_VERSION) into bin/ (once; usually 5-8 minutes on 2 cores, silent while it compiles)"
	GOBIN=$(CURDIR)/bin go install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION)

# The static analysis tools of `make lint`, pinned like the CLI and installed once (seconds each).
# workflowcheck is a module of its own, released apart from the SDK.
bin/staticcheck:
	@echo "==> installing staticcheck $(STATICCHECK_VERSION) into bin/ (once)"
	GOBIN=$(CURDIR)/bin go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

bin/errcheck:
	@echo "==> installing errcheck $(ERRCHECK_VERSION) into bin/ (once)"
	GOBIN=$(CURDIR)/bin go install github.com/kisielk/errcheck@$(ERRCHECK_VERSION)

# The SQS that the tests of activities/broker run (brokertest.StartSQS): goaws, pinned, as a process
# of its own. Its main package is app/cmd, so go install names the binary cmd.
GOAWS_VERSION := v0.4.5
bin/goaws:
	@echo "==> building goaws $(GOAWS_VERSION) into bin/ (once; seconds)"
	GOBIN=$(CURDIR)/bin/goaws.tmp go install github.com/Admiral-Piett/goaws/app/cmd@$(GOAWS_VERSION)
	mv bin/goaws.tmp/cmd bin/goaws
	rmdir bin/goaws.tmp

bin/workflowcheck:
	@echo "==> installing Temporal's workflowcheck $(WORKFLOWCHECK_VERSION) into bin/ (once)"
	GOBIN=$(CURDIR)/bin go install go.temporal.io/sdk/contrib/tools/workflowcheck@$(WORKFLOWCHECK_VERSION)

# The tests of NATS destinations (activities/broker, tag integration) start a real nats-server,
# built from its Go module (under a minute), pinned like the tools above.
bin/nats-server:
	@echo "==> installing nats-server $(NATS_SERVER_VERSION) into bin/ (once; under a minute)"
	GOBIN=$(CURDIR)/bin go install github.com/nats-io/nats-server/v2@$(NATS_SERVER_VERSION)

# The integration tests (-tags integration) start throwaway PostgreSQL clusters of their own, so they
# need the server binaries.
postgres:
	@echo "==> checking for the PostgreSQL server binaries (installed with apt when absent: about a minute)"
	deployments/dev/ensure-postgres.sh

# A test runs promtool on the Prometheus alerting rules and their unit tests (deployments/prometheus).
promtool:
	@echo "==> checking for promtool (installed with apt when absent: about 15 seconds)"
	deployments/dev/ensure-promtool.sh

# The tests of docs/ (docs/tools_test.go, tag integration) read the two OpenAPI documents with the
# tools integrators use: Redocly's linter and three TypeScript client generators, compiled with tsc.
# Pinned in deployments/dev/npm (package.json and its lock) and installed once with the machine's npm.
bin/node_modules: deployments/dev/npm/package.json deployments/dev/npm/package-lock.json
	@echo "==> installing the OpenAPI tools from npm into bin/node_modules (once: Redocly CLI, openapi-typescript, @hey-api/openapi-ts, orval, TypeScript; about 30 seconds, 130 MB; Node.js and npm with apt when absent)"
	deployments/dev/ensure-node.sh
	mkdir -p bin
	cp deployments/dev/npm/package.json deployments/dev/npm/package-lock.json bin/
	npm ci --prefix bin --no-audit --no-fund --loglevel=error
	touch bin/node_modules

# A test drives Chromium headless through the Temporal Web UI (e2e/webui_test.go).
chromium:
	@echo "==> checking for Chromium (installed with apt when absent: about a minute)"
	deployments/dev/ensure-chromium.sh

# The broker tests of the RabbitMQ destination (activities/broker, tag integration) start RabbitMQ
# brokers of their own from Debian's rabbitmq-server package (its service stays stopped).
rabbitmq:
	@echo "==> checking for RabbitMQ (installed with apt when absent: about a minute)"
	deployments/dev/ensure-rabbitmq.sh

run: build bin/temporal
	deployments/dev/run.sh

# `make cluster` (deployments/cluster/cluster.sh): a production-shaped stack with a real Temporal
# server on PostgreSQL, its Web UI, and webhookd replicas. The server, its schema tool and the UI are
# built once from the versions pinned in deployments/cluster/go.mod, a module of its own.
.PHONY: cluster
cluster: build bin/temporal bin/temporal-server bin/temporal-sql-tool bin/temporal-ui postgres
	deployments/cluster/cluster.sh

bin/temporal-server:
	@echo "==> building the Temporal server into bin/ (once; 6-8 minutes on 2 cores, silent while it compiles)"
	cd deployments/cluster && go build -o ../../bin/temporal-server go.temporal.io/server/cmd/server

bin/temporal-sql-tool:
	@echo "==> building the Temporal SQL schema tool into bin/ (once; seconds after the server)"
	cd deployments/cluster && go build -o ../../bin/temporal-sql-tool go.temporal.io/server/cmd/tools/sql

bin/temporal-ui:
	@echo "==> building the Temporal Web UI server into bin/ (once; under a minute after the server)"
	cd deployments/cluster && go build -o ../../bin/temporal-ui github.com/temporalio/ui-server/v2/cmd/server

# The cluster test (e2e/cluster_test.go) runs `make cluster`'s topology, so the test builds its
# binaries too. A plain `go test ./...` is the hermetic unit tier (SQLite, the SDK's testsuite); the
# integration tag adds the tests on a Temporal dev server and PostgreSQL in every package, and the e2e
# tag the system tests (e2e/).
# Each tier's output is a plain run's (the packages' results, a failed test's whole output), then
# its slowest tests (internal/testreport): where the time of `make test` goes.
# They run after the other packages, not beside them: on 2 cores the api package's tests (their own
# dev servers, -race) beside the system tests slowed the kill test's setup past its bounds. Within
# them, the tests that judge a latency, a rate or work per unit of time run alone, first; then those
# that call besideOthers (e2e/harness_test.go: counts and behaviour, mostly waiting) run three at a
# time (-parallel 3).
test: lint build bin/temporal bin/goaws bin/nats-server rabbitmq bin/temporal-server bin/temporal-sql-tool bin/temporal-ui postgres promtool chromium bin/node_modules
	go test -tags integration -race -count=1 -timeout 20m -json ./... | go run ./internal/testreport -slowest 15
	go test -tags e2e -race -count=1 -parallel 3 -timeout 20m -json ./e2e/ | go run ./internal/testreport -slowest 30
	cd deployments/kubernetes && go test -count=1 ./...

# Static analysis, the first step of `make test`: gofmt, go vet, staticcheck (its default checks;
# exceptions are //lint:ignore comments with their reasons), errcheck (exceptions with their reasons
# in errcheck-excludes.txt) and workflowcheck (the determinism of workflows/, tests included; through
# go vet, which caches its results: 2 s after a change, where the tool alone takes 15-20 s).
lint: bin/staticcheck bin/errcheck bin/workflowcheck
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed (run make fmt):"; echo "$$unformatted"; exit 1; fi
	go vet -tags e2e,integration ./...
	go vet -tags e2e,pressure ./e2e/
	bin/staticcheck -tags $(LINT_TAGS) ./...
	bin/errcheck -tags $(LINT_TAGS) -exclude errcheck-excludes.txt ./...
	go vet -vettool=$(CURDIR)/bin/workflowcheck ./workflows/...

# The integration tag: the benchmarks that run on both databases include PostgreSQL. ./... takes in
# filter's BenchmarkMatch (ns per evaluation of a simple and a nested $or filter, issue 29).
bench:
	go test -tags integration -run '^$$' -bench . -benchmem ./...

# Receiver isolation (docs/performance.md): a throwaway stack on ports of its own, a hanging
# receiver and a healthy one. SCENARIO=hanging|isolation|sharedhost|matrix|ratelimit runs one
# (sharedhost: issue 17, both accounts' webhooks on one receiver host, with the CPU of the held
# backlog and ARGS='-pressure 3' for busy processes, issue 27; matrix: issue 40, the noisy-neighbour
# matrix, one table of account C's publish-to-receipt and API times with B idle and during each
# heavy thing B can do (hanging, TLS and auth failures on C's host, heavy filters, filter trials,
# a burst, portal pages, long lists, a recover of 10,000 deliveries, a replay of 10,000 with
# webhookd's peak RSS), about 25 minutes,
# ARGS='-matrix-rows burst,lists' for some rows; ratelimit: issue 27, the rate a receiver sees with
# a backlog; none of them in the default run), ARGS='-rate 5' passes loadtest flags,
# WEBHOOKD_BIN=... measures another build.
.PHONY: bench-isolation
bench-isolation:
	deployments/dev/bench-isolation.sh $(SCENARIO) $(ARGS)

# A shared host under CPU pressure (issue 27; out of make test since issue 42): the system test
# e2e/pressure_test.go (tag pressure), 1,000 held deliveries of account B on one receiver host beside
# account C's healthy webhook and 3 busy processes, about 2 minutes. It fails when the held backlog
# comes back more than 5 times per attempt that reaches the receiver, and prints the CPU per such
# attempt against a plain delivery's and C's worst receipt with B's backlog against B idle.
.PHONY: bench-pressure
bench-pressure: build bin/temporal postgres
	go test -tags e2e,pressure -race -count=1 -v -timeout 10m -run 'TestSharedHostIsolationUnderCPUPressure$$' ./e2e/

# At least once under kill -9 (docs/performance.md): cmd/loadtest's killload on a throwaway stack
# whose webhookd is SIGKILLed while two accounts publish, then started again on the same database;
# it fails if a delivery of an accepted event is missing. ARGS='-rate 6' passes loadtest flags,
# BENCH_KILL_AT=15 BENCH_KILL_PAUSE=10 move the kill, BENCH_DATABASE_URL=... runs it on PostgreSQL.
.PHONY: bench-kill
bench-kill:
	deployments/dev/bench-kill.sh $(ARGS)

# Issue 10's end-to-end benchmark: cmd/loadtest's suite (tiers, open loop, fan-out, burst, then one
# table) on a throwaway stack of its own. SCENARIO=fanout|... runs one, ARGS='-events 500' passes
# loadtest flags, WEBHOOKD_BIN=... measures another build, BENCH_POSTGRES=1 runs webhookd on a
# throwaway PostgreSQL cluster. The tiers print CPU ms per delivery of each process (issue 21).
# BENCH_TRACING=1 (or 0.01) runs webhookd with tracing on, sampled at that ratio, exporting to a
# discarding OTLP receiver in the loadtest, which prints how many spans it got.
# SCENARIO=destinations (issue 44) measures tier (c) beside NATS and RabbitMQ destinations, on
# brokers it starts (bin/nats-server, and RabbitMQ from `make rabbitmq`).
.PHONY: bench-e2e
bench-e2e:
	deployments/dev/bench-e2e.sh $(SCENARIO) $(ARGS)

# Issue 33: bench-e2e's tiers ((a), (b'), (b), (c)) against make cluster's production-shaped stack
# (Temporal server on PostgreSQL with mutual TLS, 2 API and 2 worker replicas) in a temporary
# directory on ports of its own (CLUSTER_PORT_BASE, 27200), with CPU ms per delivery of the API
# replicas, the workers, Temporal and PostgreSQL. ARGS='-events 1000 -rounds 3' passes loadtest
# flags, WEBHOOKD_BIN=... measures another build, BENCH_PG_STATEMENTS=1 adds PostgreSQL's costliest
# statements. Needs make cluster's programs (run it once).
.PHONY: bench-cluster
bench-cluster:
	deployments/dev/bench-cluster.sh $(ARGS)

# webhookd beside Convoy (issue 33): BENCH_PAIRS (3) alternating pairs of the tiers' (c) and Convoy
# measured by convoybench, same events and publishers, then a table and the medians of the ratios.
# Needs CONVOY_DIR: a Convoy set up once outside the repository (see docs/performance-history.md,
# "Beside Convoy (issue 33)"). ARGS='-events 200' passes loadtest flags (and convoybench's -n, -c),
# BENCH_POSTGRES=1 runs webhookd on PostgreSQL, BENCH_CLUSTER=all|split on make cluster's production
# topology (issue 45: the headline), WEBHOOKD_BIN=... measures another build.
.PHONY: bench-convoy
bench-convoy:
	deployments/dev/bench-convoy.sh $(ARGS)

# Issue 10's scale figures: a webhooks list of 10000 on one account, and 100000 deliveries waiting on
# retry timers (webhookd's RSS, the list's latency), each on a throwaway stack of its own. About
# 35 minutes. SCENARIO=list|pending runs one, ARGS='-events 20000' passes loadtest flags.
.PHONY: bench-scale
bench-scale:
	deployments/dev/bench-scale.sh $(SCENARIO) $(ARGS)

fmt:
	gofmt -w .

vet:
	go vet -tags e2e,integration ./...

# Keeps bin/temporal: rebuilding it takes minutes and it does not change with our code.
clean:
	rm -f bin/webhookd
