package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/webhookd/webhookd/wire"
)

// The destinations scenario (issue 44): what a delivery published into a broker costs beside one
// POSTed to an HTTPS receiver. Each of -rounds rounds runs, one after another, the throughput
// scenario's closed-loop publishing of -events campaign.created events by -concurrency clients to a
// new webhook of each kind:
//
//   - HTTPS: tier (c), as the tiers scenario measures it (measureThroughput);
//   - NATS: a webhook whose destination is a JetStream subject on the nats-server at -nats, stored
//     by a file stream that this scenario creates;
//   - RabbitMQ: one whose destination is a durable direct exchange on the broker at -amqp, routed to
//     a durable queue that this scenario declares and binds.
//
// The kinds take turns at going first (round r starts with kind r), so that none is always the one
// that runs on the longest Temporal history. A broker's messages are counted on the consumer's
// side, by a consumer in this process that acknowledges each (a JetStream consumer created before
// the publishing; an AMQP consumer on the bound queue): its tier's deliveries/s runs from the first
// publish to the last accepted event's first message consumed, and it fails unless every accepted
// event's webhook-id arrived. Copies under one webhook-id are counted, not failures. Each tier
// reports the CPU time per delivery of webhookd, the Temporal server and this loadtest, and a
// broker tier the broker's own (-nats-pid, -rabbitmq-pid) apart, and the mean duration of
// webhookd's attempts in it (its /metrics: dial or publish to the reply or the broker's
// acknowledgement). A kind whose URL is not given is
// left out. deployments/dev/bench-e2e.sh destinations starts both brokers (bench-brokers.sh).

// destinationsConfig is the destinations scenario's own flags.
type destinationsConfig struct {
	natsURL, amqpURL   string
	natsPID, rabbitPID int
}

// The stream, exchange and queue the scenario sets up on the brokers, as their owner would.
const (
	benchNATSStream   = "WEBHOOKD_BENCH"
	benchNATSSubject  = "webhookd.bench"
	benchExchange     = "webhookd-bench"
	benchQueue        = "webhookd-bench"
	benchRoutingKey   = "deliveries"
	benchAMQPPrefetch = 256
	brokerDialTimeout = 30 * time.Second
)

// brokerConsumer takes one broker's messages for the scenario.
type brokerConsumer interface {
	// consume hands the webhook-id of every message that arrives from now on to take, until
	// stop is called.
	consume(ctx context.Context, take func(id string)) (stop func(), err error)
	close()
}

// destinationKind is one kind the scenario measures. https is tier (c); the others publish to url
// with destination, and consumer reads what arrives.
type destinationKind struct {
	name        string
	https       bool
	url         string
	destination map[string]any
	consumer    brokerConsumer
	broker      []cpuProcess // the broker's process, when its pid was given
}

// destinationTier is one kind's figure in one round.
type destinationTier struct {
	tierResult
	broker cpuCost // the broker's own CPU time per delivery, apart from the stack's
	copies int     // messages consumed beyond the first under a webhook-id; -1: not counted
	// attempt is the mean duration of webhookd's attempts in the tier (its /metrics); 0: unknown.
	attempt time.Duration
}

// destinationsResult is the scenario's figures: rounds[r][k] is kind k (in kinds' order) in round r.
type destinationsResult struct {
	kinds  []string
	rounds [][]destinationTier
}

func destinationsScenario(ctx context.Context, cfg config, cert tls.Certificate) error {
	cfg.events = orDefault(cfg.events, defaultEvents)
	kinds, err := destinationKinds(ctx, cfg.dest)
	if err != nil {
		return err
	}
	defer func() {
		for _, k := range kinds {
			if k.consumer != nil {
				k.consumer.close()
			}
		}
	}()
	res := destinationsResult{}
	for _, k := range kinds {
		res.kinds = append(res.kinds, k.name)
	}
	rounds := max(1, cfg.rounds)
	fmt.Printf("destinations: %d deliveries each, %d concurrent clients, %s in %d rounds\n",
		cfg.events, cfg.concurrency, strings.Join(res.kinds, ", "), rounds)
	client := newAPIClient(cfg.api, cfg.key, cfg.concurrency)
	stack := cpuProcesses(cfg)
	for round := range rounds {
		figures := make([]destinationTier, len(kinds))
		for _, i := range turnOrder(len(kinds), round) {
			k := kinds[i]
			name := fmt.Sprintf("%s, round %d", k.name, round+1)
			watched := append(append([]cpuProcess(nil), stack...), k.broker...)
			before, attemptsBefore := readCPU(watched), scrapeAttemptTime(ctx, cfg.api)
			var t destinationTier
			if k.https {
				var r throughputResult
				r, err = measureThroughput(ctx, cfg, cert, name)
				t = destinationTier{tierResult: tierResult{n: cfg.events, elapsed: r.total}, copies: -1}
			} else {
				t, err = brokerTier(ctx, cfg, client, k, name)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			after := readCPU(watched)
			t.attempt = meanAttempt(attemptsBefore, scrapeAttemptTime(ctx, cfg.api))
			t.name = name
			t.cpu = cpuPerDelivery(stack, before, after, t.n)
			t.broker = cpuPerDelivery(k.broker, before, after, t.n)
			figures[i] = t
		}
		res.rounds = append(res.rounds, figures)
	}
	printDestinations(res)
	return nil
}

// turnOrder is the order of n kinds in round r (from 0): kind r mod n first, then the next ones.
func turnOrder(n, r int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = (r + i) % n
	}
	return out
}

// destinationKinds are HTTPS, then each broker whose URL was given, with its consumer connected and
// its stream, or exchange and queue, set up.
func destinationKinds(ctx context.Context, d destinationsConfig) ([]destinationKind, error) {
	kinds := []destinationKind{{name: "HTTPS (tier (c))", https: true}}
	if d.natsURL != "" {
		c, err := dialNATSConsumer(ctx, d.natsURL)
		if err != nil {
			return nil, err
		}
		kinds = append(kinds, destinationKind{name: "NATS JetStream", url: d.natsURL, consumer: c,
			destination: map[string]any{"type": "nats", "subject": benchNATSSubject},
			broker:      brokerProcess("nats", d.natsPID)})
	}
	if d.amqpURL != "" {
		c, err := dialAMQPConsumer(ctx, d.amqpURL)
		if err != nil {
			for _, k := range kinds {
				if k.consumer != nil {
					k.consumer.close()
				}
			}
			return nil, err
		}
		kinds = append(kinds, destinationKind{name: "RabbitMQ", url: d.amqpURL, consumer: c,
			destination: map[string]any{"type": "rabbitmq", "exchange": benchExchange, "routingKey": benchRoutingKey},
			broker:      brokerProcess("rabbitmq", d.rabbitPID)})
	}
	if len(kinds) == 1 {
		fmt.Println("destinations: neither -nats nor -amqp was given: HTTPS only")
	}
	return kinds, nil
}

func brokerProcess(name string, pid int) []cpuProcess {
	if pid <= 0 {
		return nil
	}
	return []cpuProcess{{name: name, pids: []int{pid}}}
}

// brokerTier registers a webhook with k's destination, consumes its messages from now on, publishes
// cfg.events events closed loop, and waits until every accepted event's webhook-id was consumed.
func brokerTier(ctx context.Context, cfg config, client *apiClient, k destinationKind, name string) (destinationTier, error) {
	hook, err := client.registerWebhook(ctx, map[string]any{"url": k.url, "eventType": "campaign.created", "destination": k.destination})
	if err != nil {
		return destinationTier{}, err
	}
	defer deleteWebhooks(ctx, client, []int64{hook})
	got := newConsumedIDs(hook, cfg.events)
	stop, err := k.consumer.consume(ctx, got.take)
	if err != nil {
		return destinationTier{}, err
	}
	defer stop()

	start := time.Now()
	var accepted atomic.Int64
	stopProgress := every(cfg.progress, func() {
		fmt.Printf("  %s: %d of %d events accepted, %d consumed\n", name, accepted.Load(), cfg.events, got.distinct())
	})
	_, events, err := publishClosedLoop(ctx, client, cfg.events, cfg.concurrency, &accepted)
	stopProgress()
	if err != nil {
		return destinationTier{}, fmt.Errorf("publish: %w", err)
	}
	if err := got.await(ctx, cfg, name); err != nil {
		return destinationTier{}, err
	}
	t := got.tally(events)
	if len(t.missing) > 0 {
		return destinationTier{}, fmt.Errorf("no message consumed under webhook-id %s (and %d more)", wire.MessageID(t.missing[0], hook), len(t.missing)-1)
	}
	return destinationTier{tierResult: tierResult{n: len(events), elapsed: t.last.Sub(start)}, copies: t.copies}, nil
}

// consumedIDs tallies the webhook-ids a consumer took for one webhook: when each first came, and
// the copies. Messages of other webhooks (an earlier tier's late copy) are left aside.
type consumedIDs struct {
	suffix   string // "_<webhook id>": what the webhook's message ids end with
	expected int
	done     chan struct{}

	mu     sync.Mutex
	first  map[string]time.Time
	copies int
	others int
}

func newConsumedIDs(hook int64, expected int) *consumedIDs {
	return &consumedIDs{suffix: "_" + strconv.FormatInt(hook, 10), expected: expected,
		done: make(chan struct{}), first: map[string]time.Time{}}
}

func (c *consumedIDs) take(id string) { c.takeAt(id, time.Now()) }

func (c *consumedIDs) takeAt(id string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch _, seen := c.first[id]; {
	case !strings.HasPrefix(id, "msg_") || !strings.HasSuffix(id, c.suffix):
		c.others++
	case seen:
		c.copies++
	default:
		c.first[id] = at
		if len(c.first) == c.expected {
			close(c.done)
		}
	}
}

func (c *consumedIDs) distinct() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.first)
}

// await waits until c.expected distinct webhook-ids of the webhook arrived, printing progress every
// cfg.progress, for cfg.timeout at most.
func (c *consumedIDs) await(ctx context.Context, cfg config, label string) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()
	tick := time.NewTicker(cfg.progress)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return nil
		case <-tick.C:
			fmt.Printf("  %s: %d of %d consumed\n", label, c.distinct(), c.expected)
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("only %d of %d webhook-ids consumed within %s", c.distinct(), c.expected, cfg.timeout), ctx.Err())
		}
	}
}

// consumedTally is what a consumer's messages say of the events published.
type consumedTally struct {
	missing []int64   // events whose webhook-id never came
	last    time.Time // the last first arrival among the events'
	copies  int
	others  int
}

// tally checks that the webhook-id of each of events came (wire.MessageID's, for this webhook).
func (c *consumedIDs) tally(events []int64) consumedTally {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := consumedTally{copies: c.copies, others: c.others}
	for _, ev := range events {
		at, ok := c.first["msg_"+strconv.FormatInt(ev, 10)+c.suffix]
		switch {
		case !ok:
			t.missing = append(t.missing, ev)
		case at.After(t.last):
			t.last = at
		}
	}
	return t
}

// natsConsumer reads the bench subject's stream on a NATS server.
type natsConsumer struct {
	nc     *nats.Conn
	stream jetstream.Stream
}

// dialNATSConsumer connects to the server at url and creates the stream of benchNATSSubject (file
// storage, JetStream's default duplicate window), or finds it.
func dialNATSConsumer(ctx context.Context, url string) (*natsConsumer, error) {
	var nc *nats.Conn
	var err error
	for deadline := time.Now().Add(brokerDialTimeout); ; {
		if nc, err = nats.Connect(url, nats.Name("loadtest"), nats.Timeout(5*time.Second)); err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("connect to NATS at -nats: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: benchNATSStream, Subjects: []string{benchNATSSubject}, Storage: jetstream.FileStorage})
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("NATS: create the stream %s (is JetStream on?): %w", benchNATSStream, err)
	}
	return &natsConsumer{nc: nc, stream: stream}, nil
}

// consume creates a consumer of the messages stored from now on, which acknowledges each, as a
// receiver's would.
func (c *natsConsumer) consume(ctx context.Context, take func(id string)) (func(), error) {
	name := fmt.Sprintf("loadtest-%d", time.Now().UnixNano())
	cons, err := c.stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{Name: name,
		DeliverPolicy: jetstream.DeliverNewPolicy, AckPolicy: jetstream.AckExplicitPolicy, InactiveThreshold: time.Minute})
	if err != nil {
		return nil, fmt.Errorf("NATS: create a consumer: %w", err)
	}
	cc, err := cons.Consume(func(m jetstream.Msg) {
		take(m.Headers().Get(wire.HeaderID))
		// A lost ack brings the message again: a copy, which the tally counts.
		_ = m.Ack()
	})
	if err != nil {
		return nil, fmt.Errorf("NATS: consume: %w", err)
	}
	return func() {
		cc.Stop()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = c.stream.DeleteConsumer(ctx, name) // and it goes after a minute idle anyway
	}, nil
}

func (c *natsConsumer) close() { c.nc.Close() }

// amqpConsumer reads the bench queue on a RabbitMQ broker.
type amqpConsumer struct {
	conn *amqp.Connection
}

// dialAMQPConsumer connects to the broker at url and declares the durable exchange and queue of the
// bench, the queue bound to the exchange with benchRoutingKey.
func dialAMQPConsumer(ctx context.Context, url string) (*amqpConsumer, error) {
	var conn *amqp.Connection
	var err error
	for deadline := time.Now().Add(brokerDialTimeout); ; {
		if conn, err = amqp.DialConfig(url, amqp.Config{Dial: amqp.DefaultDial(5 * time.Second), Properties: amqp.Table{"connection_name": "loadtest"}}); err == nil {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return nil, fmt.Errorf("connect to RabbitMQ at -amqp: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = ch.ExchangeDeclare(benchExchange, amqp.ExchangeDirect, true, false, false, false, nil)
	}
	if err == nil {
		_, err = ch.QueueDeclare(benchQueue, true, false, false, false, nil)
	}
	if err == nil {
		err = ch.QueueBind(benchQueue, benchRoutingKey, benchExchange, false, nil)
	}
	if err == nil {
		err = ch.Close()
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("RabbitMQ: declare the exchange and queue: %w", err)
	}
	return &amqpConsumer{conn: conn}, nil
}

// consume consumes the queue on a channel of its own, acknowledging each message, until stop.
func (c *amqpConsumer) consume(_ context.Context, take func(id string)) (func(), error) {
	ch, err := c.conn.Channel()
	if err != nil {
		return nil, fmt.Errorf("RabbitMQ: channel: %w", err)
	}
	if err := ch.Qos(benchAMQPPrefetch, 0, false); err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("RabbitMQ: qos: %w", err)
	}
	tag := fmt.Sprintf("loadtest-%d", time.Now().UnixNano())
	deliveries, err := ch.Consume(benchQueue, tag, false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, fmt.Errorf("RabbitMQ: consume %s: %w", benchQueue, err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for d := range deliveries {
			id, _ := d.Headers[wire.HeaderID].(string)
			take(id)
			// A lost ack brings the message again: a copy, which the tally counts.
			_ = d.Ack(false)
		}
	})
	return func() {
		_ = ch.Close() // closes deliveries; an unacknowledged message goes back to the queue
		wg.Wait()
	}, nil
}

func (c *amqpConsumer) close() { _ = c.conn.Close() }

// printDestinations prints the scenario's one table: each kind in each round, the medians, and each
// broker's rate over HTTPS's by round.
func printDestinations(r destinationsResult) {
	fmt.Println()
	fmt.Printf("| destination | deliveries/s | first publish to last delivery | mean attempt | CPU ms per delivery | broker CPU ms per delivery | copies |\n|---|---|---|---|---|---|---|\n")
	for _, round := range r.rounds {
		for _, t := range round {
			fmt.Printf("| %s | %.0f | %s | %s | %s | %s | %s |\n", t.name, t.rate(), t.elapsed.Round(time.Millisecond), attemptText(t.attempt),
				t.cpu, brokerCost(t.broker), copiesText(t.copies))
		}
	}
	if len(r.rounds) == 0 {
		return
	}
	byKind := make([][]tierResult, len(r.kinds))
	brokers := make([][]tierResult, len(r.kinds))
	copies := make([]int, len(r.kinds))
	attempts := make([][]float64, len(r.kinds))
	for _, round := range r.rounds {
		for k, t := range round {
			if t.attempt > 0 {
				attempts[k] = append(attempts[k], float64(t.attempt))
			}
			byKind[k] = append(byKind[k], t.tierResult)
			brokers[k] = append(brokers[k], tierResult{cpu: t.broker})
			if t.copies < 0 || copies[k] < 0 {
				copies[k] = -1 // not counted (HTTPS)
			} else {
				copies[k] += t.copies
			}
		}
	}
	for k, name := range r.kinds {
		fmt.Printf("| %s, median of %d rounds | %.0f | | %s | %s | %s | %s |\n", name, len(r.rounds), median(rates(byKind[k])),
			attemptText(time.Duration(median(attempts[k]))), medianCost(byKind[k]), brokerCost(medianCost(brokers[k])), copiesText(copies[k]))
	}
	for k := 1; k < len(r.kinds); k++ {
		ratios := make([]float64, len(r.rounds))
		for i := range r.rounds {
			ratios[i] = byKind[k][i].rate() / byKind[0][i].rate()
		}
		fmt.Printf("| %s / HTTPS deliveries/s, by round; median | %s; %.2f | | | | | |\n", r.kinds[k], formatRatios(ratios), median(ratios))
	}
}

// brokerCost is the broker's CPU time per delivery, "-" for HTTPS or a broker not watched.
func brokerCost(c cpuCost) string {
	if len(c.names) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s %.2f", c.names[0], c.ms[0])
}

// attemptText is a mean attempt's duration in milliseconds, "-" when unknown.
func attemptText(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func copiesText(n int) string {
	if n < 0 {
		return "-"
	}
	return strconv.Itoa(n)
}
