// Command loadtest measures a running webhookd stack from the outside, through the API and HTTPS
// receivers it serves itself. Its scenarios:
//
//   - throughput (the default): one fast receiver and one webhook; it publishes N events as fast as
//     it can and reports the intake rate and the time from the first publish to the last delivery.
//   - tiers: the throughput scenario beside its references, with the same receiver and
//     concurrency: raw HTTPS POSTs, and bare Temporal (one workflow with one activity that POSTs, on
//     the Temporal server the stack uses, TEMPORAL_* variables). It prints deliveries/s per tier
//     and webhookd's share of bare Temporal's rate, and the CPU time per delivery of each process
//     given: -pid (webhookd), -temporal-pid, -postgres-pid, or on make cluster -api-pids and
//     -worker-pids, each a list of replicas summed (deployments/dev/bench-cluster.sh).
//   - hanging: issue 7's experiment. Account B's webhooks point at a receiver that accepts the
//     connection and never answers; account C's one webhook points at a healthy receiver. It reports
//     C's event-to-receipt time while idle, then while B's deliveries hang.
//   - isolation: the benchmark behind docs/performance-history.md. C publishes at a steady
//     open-loop rate, first alone, then while B publishes as much to a receiver that answers at
//     once (the control), then to one that never answers; it reports C's p50, p99 and max
//     event-to-receipt per phase.
//   - sharedhost: issue 17's experiment. One receiver, one host and port, serves C's one webhook
//     (/ok, answers at once) and B's 100 (/hang/<i>, never answer). C publishes -probes events on
//     the idle stack; then B publishes -noisy-events events and, -pause later (time for a breaker
//     on the host to open), C publishes as many again. It reports per phase C's p50, p99 and max
//     event-to-receipt, its events not arrived within -timeout and its failed attempts (from the
//     API's delivery log), then C's webhook status and how long the receiver held B's requests.
//     Issue 27: -pressure N runs C's probes once more in each state (B idle, B hanging) beside N
//     busy processes, each this binary spinning on one core, and reports C's worst with B hanging
//     over its worst with B idle, on the machine as it is and under that pressure. Given -pid
//     (webhookd) and -temporal-pid (the Temporal server, with its descendants), it measures the
//     CPU of B's held backlog over -steady after the pause, while C is quiet, beside B's start
//     (its publish and the pause) and an idle window of -steady before B publishes: each process's
//     share of one core and its CPU time per useful attempt, a request of B's that reached the
//     hanging receiver in the window.
//   - matrix: issue 40's noisy-neighbour matrix. One row per heavy thing account B (-noisy-key) can
//     do: endpoints on C's receiver host and port that hang, that refuse B's handshake (the host
//     requires a client certificate, which C's webhook has) or whose OAuth2 token endpoint fails;
//     big events past heavy filters; concurrent filter trials over stored big events; a recover of
//     many held deliveries; a burst of publishes; portal pages and long lists over many events.
//     Per row, C (-key) publishes -probes events one every -probe-every, each with a GET
//     /webhooks, first with B idle, then -matrix-settle (the hanging row: -pause) after B's load
//     started; B's load stops, its webhooks are deleted, and the next row waits until webhookd
//     and the Temporal server (-pid, -temporal-pid) are quiet. It prints one table: C's
//     publish-to-receipt and API answer times, p50 and max, idle and during B's load, their
//     ratios, C's failed attempts, and what B did. The -matrix-* flags set each row's scale.
//   - ratelimit: issue 27's measurement of a webhook's own rate limit with a backlog. For each
//     rateLimit of -rates (default 1,2,5,50), one after another so that they do not compete, a
//     fresh webhook of the -key account at /rate/<r> on a receiver that answers at once, PATCHed to
//     {"rateLimit": r}, and -events events (default 40) published at once; it waits for their
//     deliveries (-timeout after the publishes), deletes the webhook and prints per rate the span
//     from the first arrival to the last, the receiver-side rate (arrived-1)/span, its ratio to
//     the set rate (within 5%?), the largest gap between arrivals and how many arrived.
//   - openloop: one webhook at a healthy receiver; it publishes -rate events/s for -duration, open
//     loop (a publish does not wait for earlier answers), and reports the accepted count and the
//     p50, p99 and max event-to-receipt (publish sent to arrival).
//   - fanout: -hooks webhooks at a healthy receiver and one event; it reports the time to the 202
//     and to the last receipt, and how many delivery workflows the request started and how many
//     it left to the worker's sweeper (webhookd_delivery_starts_total on /metrics; "n/a" for a
//     build without it).
//   - fanout-filter: issue 29's comparison in one run: fanout as above, then again with half of the
//     -hooks webhooks carrying a payload filter that refuses the event; it reports both 202s, the
//     webhooks reached and the delivery workflows started.
//   - burst: the throughput scenario with -events 2000 by default; it reports the intake rate, the
//     time to the last delivery, deliveries/s, and the starts by request and by sweeper.
//   - suite: issue 10's benchmark: tiers, openloop, fanout and burst in that order against the
//     same stack, then one markdown table with every figure.
//   - list: issue 10's scale figure for lists: -hooks webhooks on the key's account, then
//     -list-calls calls of the first page, a middle page and the last full page (?limit=, ?after=);
//     it reports p50, p99 and max per kind and deletes the webhooks unless -keep.
//   - pending: issue 10's scale figure for pending retries: one webhook at a receiver that answers
//     500 and -events events (default 100000), so that each delivery fails once and waits on its
//     retry timer (start the stack with a long WEBHOOKD_RETRY_SCHEDULE); it reports webhookd's RSS
//     (-pid) at each quarter of the deliveries failed, at the end and after -idle, and the webhooks
//     list's p50, p99 and max before, during and after the load.
//   - killload: the at-least-once check under kill -9. Accounts C (-key) and B (-noisy-key) each
//     have three webhooks on one receiver host and port: one with rateLimit -hook-rate-limit, one
//     plain, one that answers 503 to each delivery's first request. Both publish -rate events/s for
//     -duration while deployments/dev/bench-kill.sh SIGKILLs webhookd and starts it again; then it
//     waits for every accepted event's deliveries and reports the missing (exit 1 if any), those
//     that arrived twice, those whose publish got no 202, and the failed publishes.
//   - lanes: issue 43's ordered lanes per key (lanes.go): the ordered throughput over -keys keys
//     beside the unordered tier (c), each with its CPU time per delivery; the other keys'
//     event-to-receipt without and with one key stuck; then -events events over -keys keys with
//     -lane-fail of the requests answered 503, while deployments/dev/bench-e2e.sh kills webhookd
//     and the Temporal server with SIGKILL and starts them again: the order violations and the lost
//     events the receiver saw (exit 1 if any).
//   - destinations: issue 44's destination tier (destinations.go): in -rounds rounds, tier (c) to
//     an HTTPS receiver, then the same publishing to a webhook whose destination is a JetStream
//     subject on the nats-server at -nats, and to one whose destination is an exchange on the
//     RabbitMQ broker at -amqp, each consumed by this process and checked (every event's
//     webhook-id arrived): deliveries/s and the CPU time per delivery of webhookd, Temporal and
//     loadtest, and the broker's apart (-nats-pid, -rabbitmq-pid).
//
// The stack must trust the receivers' certificate and allow loopback receivers, so the first run
// writes the certificate and tells how to start the stack:
//
//	go run ./cmd/loadtest -init
//	WEBHOOKD_EXTRA_CA_FILE=.data/loadtest-cert.pem WEBHOOKD_ALLOW_PRIVATE_TARGETS=true make run
//	go run ./cmd/loadtest -key whk_... -events 1000
//
// deployments/dev/bench-isolation.sh (make bench-isolation) runs the hanging, isolation,
// sharedhost, matrix and ratelimit scenarios on a stack of their own, deployments/dev/bench-e2e.sh (make
// bench-e2e) the suite, lanes and destinations (with the brokers), deployments/dev/bench-scale.sh (make bench-scale) the list and pending
// scenarios, deployments/dev/bench-kill.sh (make bench-kill) the killload scenario. The isolation
// defaults (10 events/s each, B with 20 webhooks) overload a Temporal dev server whatever B's
// receiver does, so that script scales them down.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	temporallog "go.temporal.io/sdk/log"
)

// config is what the flags ask for; each scenario reads the part it needs.
type config struct {
	scenario string
	api      string
	key      string // account C in the hanging, isolation, sharedhost and matrix scenarios
	noisyKey string // account B, whose receiver hangs, or whose load is heavy (matrix)

	listen      string // the healthy receiver; in sharedhost, the one receiver
	hangListen  string // the hanging receiver
	healthyHost string // host name in the healthy webhook's URL
	certFile    string
	keyFile     string
	timeout     time.Duration

	// throughput, tiers and burst; 0 is the scenario's default (1000, or 2000 for burst)
	events      int
	concurrency int
	rounds      int
	// bareCompression is the bare tiers' gRPC compression to Temporal.
	bareCompression string

	// fanout and list
	hooks int

	// list and pending
	listCalls int
	listLimit int
	keep      bool

	// pending (webhookd's RSS), and tiers (its CPU time, with the Temporal server's and PostgreSQL's)
	pid         int
	apiPIDs     []int // make cluster's webhookd API replicas (tiers)
	workerPIDs  []int // and its worker replicas
	temporalPID int
	postgresPID int
	// temporalMetrics is the Temporal server's Prometheus endpoint, whose store operations per
	// delivery the tiers report.
	temporalMetrics string
	// postgresStats is a URL of the PostgreSQL database where pg_stat_statements is installed, whose
	// statements per delivery the tiers report.
	postgresStats string
	// tiers are the tiers the tiers scenario measures (-tiers); none: all.
	tiers      tierSet
	sample     time.Duration
	listEvery  time.Duration
	idle       time.Duration
	publishFor time.Duration

	// hanging, isolation and sharedhost
	noisyHooks int

	// hanging and sharedhost; 0 is the scenario's default
	noisyEvents int
	probes      int
	probeEvery  time.Duration

	// hanging
	baseline int

	// sharedhost
	pause time.Duration
	// pressure is how many busy processes C's extra probes run beside; steady is the window over
	// which the CPU of B's held backlog is measured (with -pid or -temporal-pid).
	pressure int
	steady   time.Duration

	// ratelimit: the rateLimit values measured one after another (the backlog is events)
	rates []int

	// killload
	hookRateLimit int
	answerDelay   time.Duration

	// isolation and openloop
	rate     float64
	duration time.Duration
	control  bool
	progress time.Duration

	// otlpSink is where to serve a discarding OTLP trace receiver; empty: none.
	otlpSink string

	// matrix: the scale of each row
	matrix matrixConfig

	// lanes
	lanes lanesConfig

	// destinations
	dest destinationsConfig
}

// incompleteError reports a run that printed its figures although its wait ended before every
// delivery arrived: the figures marked ≥ are lower bounds. It exits with status 2, so a script can
// tell it from a failure to measure at all.
type incompleteError struct {
	missing int
	waited  time.Duration
}

func (e *incompleteError) Error() string {
	return fmt.Sprintf("%d deliveries had not arrived %s after the last publish; figures marked ≥ are lower bounds",
		e.missing, e.waited)
}

func main() {
	if burnRequested(os.Args) {
		burn() // a busy process of -pressure
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx)
	stop()
	var incomplete *incompleteError
	if errors.As(err, &incomplete) {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	var cfg config
	flag.StringVar(&cfg.scenario, "scenario", "throughput", "throughput, tiers, hanging, isolation, sharedhost, matrix, ratelimit, openloop, fanout, burst, suite (tiers, openloop, fanout and burst, then one table), list, pending, killload, lanes, destinations or idle (the stack's CPU with no load over -duration)")
	flag.StringVar(&cfg.api, "api", "http://127.0.0.1:8080", "webhookd API base URL")
	flag.StringVar(&cfg.key, "key", "", "API key (printed by make run); account C in the hanging, isolation, sharedhost, matrix, ratelimit and killload scenarios")
	flag.StringVar(&cfg.noisyKey, "noisy-key", "", "API key of account B, whose webhooks hang (hanging, isolation and sharedhost), whose load is heavy (matrix), the second account (killload)")
	flag.StringVar(&cfg.listen, "listen", "127.0.0.1:9443", "healthy receiver address; in sharedhost and killload the one receiver, B's and C's; in ratelimit the receiver of every rate's webhook")
	flag.StringVar(&cfg.hangListen, "hang-listen", "127.0.0.1:9444", "hanging receiver address (hanging and isolation)")
	flag.StringVar(&cfg.healthyHost, "healthy-host", "localhost",
		"host name in the healthy webhook's URL: another name than the hanging receiver's 127.0.0.1, as two customers' hosts would be")
	flag.StringVar(&cfg.certFile, "cert", ".data/loadtest-cert.pem", "receiver certificate (give it to the stack as WEBHOOKD_EXTRA_CA_FILE)")
	flag.StringVar(&cfg.keyFile, "cert-key", ".data/loadtest-key.pem", "receiver private key")
	initOnly := flag.Bool("init", false, "only write the receiver certificate, then exit")
	flag.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "after the last publish, wait this long for deliveries at most")
	flag.IntVar(&cfg.events, "events", 0, "events to publish (throughput, tiers, destinations and burst; default 1000, 2000 for burst), the backlog of each rate (ratelimit; default 40), the chaos phase's events (lanes; default 10000)")
	flag.IntVar(&cfg.concurrency, "concurrency", 16, "concurrent publishers (throughput, tiers and burst)")
	flag.StringVar(&cfg.bareCompression, "bare-compression", "none", "gRPC compression of the bare tiers' Temporal client: none, as webhookd's default (WEBHOOKD_TEMPORAL_COMPRESSION), or gzip, the SDK's")
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds of (b) then (c) (tiers), of each destination kind (destinations): the table gives each, their medians and the median (c)/(b), or each broker's rate over HTTPS's")
	flag.IntVar(&cfg.hooks, "hooks", 1000, "webhooks the event fans out to (fanout), webhooks to list (list)")
	flag.IntVar(&cfg.listCalls, "list-calls", 0, "timed list calls per kind (list; default 500), per burst (pending; default 50)")
	flag.IntVar(&cfg.listLimit, "list-limit", 50, "?limit= of the timed list calls (list and pending)")
	flag.BoolVar(&cfg.keep, "keep", false, "do not delete the webhooks at the end (list and pending)")
	flag.IntVar(&cfg.pid, "pid", 0, "webhookd's process id, whose RSS is sampled (pending) and whose CPU time per delivery (tiers) or in B's held backlog (sharedhost) is reported")
	apiPIDs := flag.String("api-pids", "", "process ids of webhookd's API replicas, separated by commas, whose CPU time per delivery is reported summed as webhookd-api (tiers; make cluster, see bench-cluster.sh)")
	workerPIDs := flag.String("worker-pids", "", "process ids of webhookd's worker replicas, separated by commas, whose CPU time per delivery is reported summed as webhookd-worker (tiers)")
	flag.IntVar(&cfg.temporalPID, "temporal-pid", 0, "the Temporal server's process id (with its descendants), whose CPU time per delivery (tiers) or in B's held backlog (sharedhost) is reported")
	tierList := flag.String("tiers", "a,b',b,c", "the tiers to measure, separated by commas, among a, b', b and c (tiers)")
	flag.StringVar(&cfg.postgresStats, "postgres-stats", "", "a postgres:// URL of the database where pg_stat_statements is installed, whose top statements per delivery the tiers report (make cluster with CLUSTER_PG_STATEMENTS=1)")
	flag.StringVar(&cfg.temporalMetrics, "temporal-metrics", "", "the Temporal server's metrics URL (http://host:port/metrics), whose store operations per delivery the tiers report")
	flag.IntVar(&cfg.postgresPID, "postgres-pid", 0, "PostgreSQL's postmaster process id (with its backends), whose CPU time per delivery is reported (tiers)")
	flag.DurationVar(&cfg.sample, "sample", 2*time.Second, "interval between RSS samples (pending)")
	flag.DurationVar(&cfg.listEvery, "list-every", 10*time.Second, "interval between bursts of timed list calls under load (pending)")
	flag.DurationVar(&cfg.publishFor, "publish-for", 0, "stop publishing after this long, with fewer than -events if need be; 0: no limit (pending)")
	flag.DurationVar(&cfg.idle, "idle", 2*time.Minute, "after the last delivery failed, wait this long before the last RSS sample (pending)")
	flag.IntVar(&cfg.noisyHooks, "noisy-hooks", 0, "account B's webhooks on the hanging receiver (default 100 for hanging, sharedhost and matrix's sharedhost-hang row, 20 for isolation)")
	flag.IntVar(&cfg.baseline, "baseline", 5, "C events published one at a time on the idle stack (hanging)")
	flag.IntVar(&cfg.noisyEvents, "noisy-events", 10, "events B publishes (hanging, sharedhost and matrix's sharedhost-hang row)")
	flag.IntVar(&cfg.probes, "probes", 0, "C events published while B's deliveries hang (hanging; default 10), in each phase (sharedhost; default 20; matrix: default 10)")
	flag.DurationVar(&cfg.probeEvery, "probe-every", 0, "interval between those C events (hanging: default 1s; sharedhost: 500ms; matrix: 300ms)")
	flag.DurationVar(&cfg.pause, "pause", 12*time.Second,
		"after B publishes, wait this long before C publishes again, for a breaker on the host to open: twice webhookd's delivery timeout or more (sharedhost, and matrix's sharedhost-hang row)")
	flag.IntVar(&cfg.pressure, "pressure", 0,
		"busy processes, each spinning on one core, beside which C probes again, once with B idle and once with B hanging (sharedhost; 0: no such probes)")
	flag.DurationVar(&cfg.steady, "steady", 30*time.Second,
		"with -pid or -temporal-pid: the window after the pause, C quiet, over which the CPU of B's held backlog is measured, and the length of the idle window before B publishes (sharedhost; 0: neither)")
	rates := flag.String("rates", "1,2,5,50", "rateLimit values (deliveries/s) to measure one after another, separated by commas (ratelimit)")
	flag.Float64Var(&cfg.rate, "rate", 10, "events per second each account publishes (isolation, openloop, killload)")
	flag.DurationVar(&cfg.duration, "duration", 30*time.Second, "length of each phase (isolation), of the publishing (openloop, killload), of the measurement (idle)")
	flag.IntVar(&cfg.hookRateLimit, "hook-rate-limit", 2, "rateLimit (deliveries/s) of each account's rate-limited webhook, below -rate so that its attempts queue (killload)")
	flag.DurationVar(&cfg.answerDelay, "answer-delay", 100*time.Millisecond, "how long the healthy endpoints take to answer, so that attempts queue for the host (killload)")
	flag.BoolVar(&cfg.control, "control", true, "add a phase where B's receiver answers at once, to tell what the hang costs from what B's traffic costs (isolation)")
	flag.DurationVar(&cfg.progress, "progress", 5*time.Second, "interval between progress lines")
	matrixRowList := flag.String("matrix-rows", "all", "the rows to run, separated by commas, in the matrix's order: sharedhost-hang, sharedhost-tls, sharedhost-auth, heavy-filters, filter-trials, burst, ordered-hotkey, portal, lists, recover, replay, replay-filter (matrix)")
	flag.DurationVar(&cfg.matrix.settle, "matrix-settle", 2*time.Second, "after B's load starts, wait this long before C probes again (matrix; the sharedhost-hang row waits -pause)")
	flag.DurationVar(&cfg.matrix.trialSettle, "matrix-trial-settle", 30*time.Second, "after B's filter trials start, wait this long before C probes again: a trial reads its events before it matches any (matrix's filter-trials row)")
	flag.IntVar(&cfg.matrix.steadyHooks, "matrix-steady-hooks", 10, "B's webhooks on the shared host in the sharedhost-tls and sharedhost-auth rows (matrix)")
	flag.Float64Var(&cfg.matrix.steadyRate, "matrix-steady-rate", 2, "events per second B publishes to them (matrix)")
	flag.StringVar(&cfg.matrix.authToken, "matrix-auth-token", "reject", "the token endpoint of B's webhooks in the sharedhost-auth row: reject (401 invalid_client) or hang (never answers) (matrix)")
	flag.IntVar(&cfg.matrix.filterHooks, "matrix-filter-hooks", 100, "B's webhooks with a heavy filter in the heavy-filters row (matrix)")
	flag.IntVar(&cfg.matrix.filterTests, "matrix-filter-tests", 150, "substring tests in each heavy filter, as long as a 4 KiB filter allows (matrix)")
	flag.IntVar(&cfg.matrix.eventKiB, "matrix-event-kib", 250, "size of B's big events in KiB, at most 256 (heavy-filters, filter-trials, replay-filter; matrix)")
	flag.IntVar(&cfg.matrix.publishers, "matrix-publishers", 4, "B's concurrent publishers of big events (heavy-filters, and storing filter-trials' events; matrix)")
	flag.IntVar(&cfg.matrix.stored, "matrix-stored", 1000, "B's stored big events that the filter trials read, at most 1000 read per trial; as many held deliveries of big events for the replay-filter row (matrix)")
	flag.IntVar(&cfg.matrix.trials, "matrix-trials", 6, "B's concurrent filter trials, and concurrent filtered replay dry runs (matrix)")
	flag.IntVar(&cfg.matrix.dataset, "matrix-dataset", 10000, "B's events with a held delivery each, to one webhook: what the recover row recovers and the portal and lists rows read; the replay row replays a second data set of this size (matrix)")
	flag.IntVar(&cfg.matrix.burst, "matrix-burst", 2000, "events in B's burst, published by -concurrency publishers (matrix)")
	flag.IntVar(&cfg.matrix.readers, "matrix-readers", 6, "B's concurrent readers of portal pages and of lists (matrix)")
	flag.IntVar(&cfg.matrix.listHooks, "matrix-list-hooks", 100, "B's webhooks in the list the lists row reads; the stack's WEBHOOKD_MAX_WEBHOOKS must allow them beside the data set's (matrix)")
	quietPct := flag.Float64("matrix-quiet", 25, "between rows, wait until webhookd and Temporal (-pid, -temporal-pid) together use less than this % of one core (matrix)")
	flag.DurationVar(&cfg.matrix.drainMax, "matrix-drain-max", 8*time.Minute, "between rows, wait that long at most for the stack to be quiet; without -pid and -temporal-pid, wait that long (matrix)")
	flag.IntVar(&cfg.lanes.keys, "keys", 500, "keys (campaigns) the ordered webhook's events are spread over (lanes)")
	flag.Float64Var(&cfg.lanes.rate, "lane-rate", 10, "events per second of the open-loop phases with and without a stuck key, each -duration long, below the ordered throughput (lanes)")
	flag.IntVar(&cfg.lanes.pairs, "lane-pairs", 3, "pairs of open-loop phases, without then with a stuck key (lanes)")
	flag.Float64Var(&cfg.lanes.failRate, "lane-fail", 0.05, "share of the chaos phase's requests the receiver answers 503, at random (lanes)")
	flag.StringVar(&cfg.lanes.killAckDir, "kill-ack-dir", "", "after printing \"lanes: kill <process>\", wait for a file of that name in this directory: bench-e2e.sh writes it once the process runs again (lanes; empty: no wait)")
	flag.StringVar(&cfg.dest.natsURL, "nats", "", "a NATS server with JetStream, nats://host:port: the NATS destination's URL; its stream is created (destinations; empty: no NATS tier)")
	flag.StringVar(&cfg.dest.amqpURL, "amqp", "", "a RabbitMQ broker, amqp://user:password@host:port: the RabbitMQ destination's URL; its exchange and queue are declared (destinations; empty: no RabbitMQ tier)")
	flag.IntVar(&cfg.dest.natsPID, "nats-pid", 0, "the nats-server's process id, whose CPU time per delivery is reported apart (destinations)")
	flag.IntVar(&cfg.dest.rabbitPID, "rabbitmq-pid", 0, "the RabbitMQ node's process id (the Erlang VM, with its descendants), whose CPU time per delivery is reported apart (destinations)")
	flag.StringVar(&cfg.otlpSink, "otlp-sink", "", "serve a discarding OTLP/HTTP trace receiver at this address during the run and print how many spans it got (webhookd's OTEL_EXPORTER_OTLP_ENDPOINT; see BENCH_TRACING)")
	flag.Parse()

	if _, err := os.Stat(cfg.certFile); errors.Is(err, os.ErrNotExist) || *initOnly {
		if err := writeCert(cfg.certFile, cfg.keyFile); err != nil {
			return err
		}
		fmt.Printf("wrote %s; start the stack with:\n  WEBHOOKD_EXTRA_CA_FILE=%s WEBHOOKD_ALLOW_PRIVATE_TARGETS=true make run\n", cfg.certFile, cfg.certFile)
		if *initOnly {
			return nil
		}
	}
	if cfg.key == "" {
		return errors.New("-key is required (make run prints one)")
	}
	cert, err := tls.LoadX509KeyPair(cfg.certFile, cfg.keyFile)
	if err != nil {
		return err
	}
	if cfg.rate <= 0 || cfg.duration <= 0 || cfg.progress <= 0 {
		return errors.New("-rate, -duration and -progress must be positive")
	}
	if cfg.probes < 0 || cfg.probeEvery < 0 || cfg.pause < 0 || cfg.answerDelay < 0 || cfg.pressure < 0 || cfg.steady < 0 {
		return errors.New("-probes, -probe-every, -pause, -answer-delay, -pressure and -steady must not be negative")
	}
	if cfg.hookRateLimit < 1 || cfg.hookRateLimit > 10000 {
		return errors.New("-hook-rate-limit must be 1..10000, as the API's rateLimit")
	}
	if cfg.events < 0 || cfg.concurrency <= 0 || cfg.hooks <= 0 {
		return errors.New("-events must not be negative, -concurrency and -hooks must be positive")
	}
	if cfg.listCalls < 0 || cfg.listLimit < 1 || cfg.listLimit > 200 || cfg.sample <= 0 || cfg.listEvery <= 0 || cfg.idle < 0 || cfg.publishFor < 0 {
		return errors.New("-list-calls must not be negative, -list-limit must be 1..200, -sample and -list-every positive, -idle and -publish-for not negative")
	}
	if cfg.matrix.rows, err = parseMatrixRows(*matrixRowList); err != nil {
		return err
	}
	cfg.matrix.quietCPU = *quietPct / 100
	if err := cfg.matrix.check(); err != nil {
		return err
	}
	if cfg.tiers, err = parseTiers(*tierList); err != nil {
		return err
	}
	if cfg.apiPIDs, err = parsePIDs("api-pids", *apiPIDs); err != nil {
		return err
	}
	if cfg.workerPIDs, err = parsePIDs("worker-pids", *workerPIDs); err != nil {
		return err
	}
	if cfg.otlpSink != "" {
		finish, err := serveOTLPSink(cfg.otlpSink)
		if err != nil {
			return err
		}
		defer finish()
	}
	switch cfg.scenario {
	case "throughput":
		return throughput(ctx, cfg, cert)
	case "idle":
		return idle(ctx, cfg)
	case "openloop":
		return openloop(ctx, cfg, cert)
	case "fanout":
		return fanout(ctx, cfg, cert)
	case "fanout-filter":
		return fanoutFilter(ctx, cfg, cert)
	case "burst":
		return burst(ctx, cfg, cert)
	case "ratelimit":
		cfg.events = orDefault(cfg.events, 40)
		if cfg.rates, err = parseRates(*rates); err != nil {
			return err
		}
		return ratelimit(ctx, cfg, cert)
	case "lanes":
		if cfg.lanes.rate <= 0 || cfg.lanes.pairs < 1 || cfg.lanes.failRate < 0 || cfg.lanes.failRate >= 1 {
			return errors.New("-lane-rate and -lane-pairs must be positive, -lane-fail in [0, 1)")
		}
		return lanesScenario(ctx, cfg, cert)
	case "destinations":
		return destinationsScenario(ctx, cfg, cert)
	case "list":
		cfg.listCalls = orDefault(cfg.listCalls, 500)
		return scaleList(ctx, cfg)
	case "pending":
		cfg.listCalls = orDefault(cfg.listCalls, 50)
		return scalePending(ctx, cfg, cert)
	case "tiers", "suite":
		opts, err := temporalOptions()
		if err != nil {
			return err
		}
		switch cfg.bareCompression {
		case "none":
			opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionNone{}
		case "gzip":
			opts.ConnectionOptions.GrpcCompression = &client.GrpcCompressionGzip{}
		default:
			return fmt.Errorf("-bare-compression %q: want none or gzip", cfg.bareCompression)
		}
		if cfg.scenario == "tiers" {
			return tiers(ctx, cfg, cert, opts)
		}
		_, err = suite(ctx, cfg, cert, opts, os.Stdout)
		return err
	case "hanging", "isolation", "sharedhost", "killload", "matrix":
		if cfg.noisyKey == "" || cfg.noisyKey == cfg.key {
			return fmt.Errorf("-scenario %s needs -noisy-key, the key of a second account", cfg.scenario)
		}
		switch cfg.scenario {
		case "hanging":
			cfg.probes, cfg.probeEvery = orDefault(cfg.probes, 10), orDefault(cfg.probeEvery, time.Second)
			return hanging(ctx, cfg, cert)
		case "sharedhost":
			cfg.probes, cfg.probeEvery = orDefault(cfg.probes, 20), orDefault(cfg.probeEvery, 500*time.Millisecond)
			return sharedHost(ctx, cfg, cert)
		case "killload":
			return killLoad(ctx, cfg, cert)
		case "matrix":
			cfg.noisyHooks = orDefault(cfg.noisyHooks, 100)
			cfg.probes, cfg.probeEvery = orDefault(cfg.probes, 10), orDefault(cfg.probeEvery, 300*time.Millisecond)
			return matrixScenario(ctx, cfg, cert)
		}
		return isolation(ctx, cfg, cert)
	}
	return fmt.Errorf("-scenario %q: want throughput, tiers, hanging, isolation, sharedhost, matrix, ratelimit, openloop, fanout, burst, suite, list, pending, killload, lanes or destinations", cfg.scenario)
}

// temporalOptions finds the Temporal server the stack uses as webhookd finds it (TEMPORAL_*
// variables), for the bare-Temporal tier.
func temporalOptions() (client.Options, error) {
	opts, err := envconfig.LoadDefaultClientOptions()
	if err != nil {
		//lint:ignore ST1005 Temporal is a name
		return client.Options{}, fmt.Errorf("Temporal client configuration: %w", err)
	}
	opts.Logger = temporallog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	return opts, nil
}
