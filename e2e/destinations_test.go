//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/webhookd/webhookd/activities/broker/brokertest"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/wire"
	"github.com/webhookd/webhookd/workflows"
)

// brokerUnderTest is a real broker of one destination kind (activities/broker/brokertest): its
// address as a webhook's url, a kill -9 and a start on the same port and data, and what a consumer
// read from it.
type brokerUnderTest interface {
	URL() string
	Kill()
	Restart(t testing.TB)
	// Poll takes up to n messages: it returns once n came or the timeout passed, with what came
	// since the last Poll.
	Poll(t testing.TB, n int, timeout time.Duration) []brokertest.Received
}

// destinationCase is one kind's system test: its broker, the webhook's destination, the secrets a
// search must not find, and whether the broker drops a copy under the same de-duplication id.
type destinationCase struct {
	start       func(t *testing.T) brokerUnderTest
	destination map[string]any
	secrets     map[string]string
	// secretsOf, when set, gives the secrets once the broker started (its generated password).
	secretsOf func() map[string]string
	dedup     bool
}

// destinationEvents is how many events each kind's system test delivers across the kill of
// webhookd, before the broker's outage.
const destinationEvents = 20

// testDestination is issue 44's system test of one kind, on the built binary, a Temporal dev
// server, PostgreSQL and the real broker: a webhook with the destination; 20 events published, with
// webhookd killed with SIGKILL once half were accepted and started again; every event's message
// read by a consumer and verified with the Standard Webhooks library, copies only under one
// webhook-id (none where the broker de-duplicates); then the broker killed, an event published, its
// attempts failing with a class that names the outage while the broker is down, and the event
// landing on the schedule once the broker is back. No secret of the destination is in webhookd's
// log, /metrics, the attempt log or the delivery workflows' Temporal history.
func testDestination(t *testing.T, c destinationCase) {
	besideOthers(t)
	b := c.start(t)
	bin := webhookdBinary(t)
	dbURL := dbtest.PostgresURL(t)
	tsrv := temporaltest.Start(t)
	rc := startReceiver(t)
	db := openTestDB(t, dbURL)
	p, apiURL := startWebhookd(t, bin, dbURL, "dest", tsrv, rc,
		"WEBHOOKD_ALLOW_HTTP_TARGETS=true",
		// Enough attempts to outlast a broker's restart under load (RabbitMQ's takes 6-30 s on two
		// busy cores), the breaker's cooldowns included: an attempt while the broker's breaker is
		// open fails fast and takes a place in the schedule.
		"WEBHOOKD_RETRY_SCHEDULE=2s,2s,2s,2s,2s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s,5s",
		"WEBHOOKD_BREAKER_COOLDOWN=3s",
		// A Deliver activity cut by the kill runs again after its start-to-close timeout.
		"WEBHOOKD_DELIVERY_TIMEOUT=2s",
		"WEBHOOKD_SWEEP_INTERVAL=250ms",
		"WEBHOOKD_RATE_LIMIT=10000",
		"WEBHOOKD_LOG_LEVEL=debug",
	)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("webhookd's log:\n%s", p.logs(t))
		}
	})
	key, _, err := model.CreateAPIKey(context.Background(), db, "destinations@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	st := &stack{apiURL: apiURL, key: key, db: db, rc: rc}
	status, body, _ := st.call(t, "A", "POST", "/api/svc/v2/webhooks", map[string]any{
		"url": b.URL(), "eventType": "campaign.created", "destination": c.destination})
	if status != http.StatusCreated {
		t.Fatalf("create the webhook: %d %v", status, body)
	}
	created := body["data"].(map[string]any)
	hook, secret := int64(created["id"].(float64)), created["secret"].(string)

	// 20 events, eight publishers at once, webhookd killed once half were accepted. A publish that
	// gets no 202 is made again with the same Idempotency-Key.
	events := make([]int64, destinationEvents)
	var accepted atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, destinationEvents)
	killed := make(chan struct{})
	var killOnce sync.Once
	for i := range destinationEvents {
		wg.Go(func() {
			if i >= destinationEvents/2 {
				<-killed
			}
			id, err := destinationEvent(st, i)
			if err != nil {
				errs <- err
				return
			}
			events[i] = id
			if accepted.Add(1) == destinationEvents/2 {
				killOnce.Do(func() { close(killed) })
			}
		})
	}
	<-killed
	p.kill(t)
	time.Sleep(time.Second)
	p.start(t)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	for _, ev := range events {
		waitDelivered(t, st, ev, hook)
	}

	// What the consumer read of them, before the broker goes down (goaws keeps no message across a
	// kill).
	byID := map[string][]brokertest.Received{}
	read := collect(t, b, byID, events, hook)

	// The broker down: the next event's attempts fail, naming the outage, until it is back.
	b.Kill()
	down := publishOrFail(t, st, destinationEvents)
	eventually(t, 60*time.Second, "two attempts failed while the broker is down", func() bool {
		return len(failedAttempts(t, st, down, hook)) >= 2
	})
	for _, a := range failedAttempts(t, st, down, hook) {
		switch *a.ErrorClass {
		case "refused", "network", "timeout", "circuit_open":
		default:
			t.Fatalf("an attempt while the broker is down failed with class %s (%v), want refused, network, timeout or circuit_open", *a.ErrorClass, *a.Error)
		}
	}
	b.Restart(t)
	waitDelivered(t, st, down, hook)
	events = append(events, down)
	read += collect(t, b, byID, []int64{down}, hook)

	// The consumer's side: every message verified as a receiver verifies a request.
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range byID {
		for _, m := range got {
			h := http.Header{}
			for k, v := range m.Headers {
				h.Set(k, v)
			}
			if err := wh.Verify(m.Body, h); err != nil {
				t.Fatalf("a message fails the Standard Webhooks check: %v (headers %v)", err, m.Headers)
			}
			var env struct {
				Data map[string]any `json:"data"`
			}
			if err := json.Unmarshal(m.Body, &env); err != nil || env.Data == nil {
				t.Fatalf("a message's body is not the delivery body: %s", m.Body)
			}
		}
	}
	copies := 0
	for _, ev := range events {
		got := byID[wire.MessageID(ev, hook)]
		if len(got) == 0 {
			t.Fatalf("event %d: no message under webhook-id %s (%d messages read)", ev, wire.MessageID(ev, hook), read)
		}
		for _, m := range got[1:] {
			if string(m.Body) != string(got[0].Body) {
				t.Fatalf("event %d: two messages under one webhook-id with different bodies", ev)
			}
		}
		copies += len(got) - 1
		delete(byID, wire.MessageID(ev, hook))
	}
	if len(byID) != 0 {
		t.Fatalf("messages under webhook-ids of no event: %v", byID)
	}
	if c.dedup && copies != 0 {
		t.Fatalf("the broker de-duplicates, yet the consumer read %d copies", copies)
	}
	t.Logf("%d events, %d messages, %d copies under their event's webhook-id", len(events), read, copies)

	// No secret of the destination anywhere webhookd writes.
	if c.secretsOf != nil {
		c.secrets = c.secretsOf()
	}
	if len(c.secrets) == 0 {
		return
	}
	secretsAbsent(t, "webhookd's log", p.logs(t), c.secrets, "delivery attempt")
	secretsAbsent(t, "/metrics", p.metricsText(t), c.secrets, "webhookd_deliveries_total")
	var log strings.Builder
	for _, ev := range events {
		for _, a := range st.attemptsOf(t, ev, hook) {
			for _, s := range []*string{a.RequestHeaders, a.ResponseBody, a.Error} {
				if s != nil {
					log.WriteString(*s + "\n")
				}
			}
		}
	}
	secretsAbsent(t, "the attempt log", log.String(), c.secrets, "Webhook-Id")
	ids := []string{workflows.DeliveryWorkflowID(down, hook)}
	for _, ev := range events[:3] {
		ids = append(ids, workflows.DeliveryWorkflowID(ev, hook))
	}
	secretsAbsent(t, "the delivery workflows' history", historyText(t, tsrv.Client(t), ids...), c.secrets, "Deliver")
	resp, err := http.Get(st.apiURL + fmt.Sprintf("/api/svc/v2/webhooks/%d", hook))
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		secretsAbsent(t, "an answer", string(b), c.secrets)
	}
}

// collect reads the broker's messages into byID (by webhook-id) until one of each of events is
// there, then a while longer for copies; it returns how many it read.
func collect(t *testing.T, b brokerUnderTest, byID map[string][]brokertest.Received, events []int64, hook int64) int {
	t.Helper()
	read := 0
	missing := func() int {
		n := 0
		for _, ev := range events {
			if len(byID[wire.MessageID(ev, hook)]) == 0 {
				n++
			}
		}
		return n
	}
	for deadline := time.Now().Add(90 * time.Second); missing() > 0 && time.Now().Before(deadline); {
		for _, m := range b.Poll(t, missing(), 5*time.Second) {
			byID[m.Headers[wire.HeaderID]] = append(byID[m.Headers[wire.HeaderID]], m)
			read++
		}
	}
	for _, m := range b.Poll(t, 1000, 2*time.Second) {
		byID[m.Headers[wire.HeaderID]] = append(byID[m.Headers[wire.HeaderID]], m)
		read++
	}
	return read
}

// publishAgain publishes an event of eventType with data under Idempotency-Key key until it is
// answered 202 (for two minutes), and returns its id: an event committed before a kill is not
// published twice.
func publishAgain(st *stack, eventType, key string, data any) (int64, error) {
	body, _ := json.Marshal(map[string]any{"eventType": eventType, "data": data})
	client := &http.Client{Timeout: 10 * time.Second}
	var last string
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, _ := http.NewRequest("POST", st.apiURL+"/api/svc/v2/events", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", st.key)
		req.Header.Set("Idempotency-Key", key)
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		var out struct {
			Data struct {
				ID int64 `json:"id"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if resp.StatusCode == http.StatusAccepted && err == nil && out.Data.ID > 0 {
			return out.Data.ID, nil
		}
		last = fmt.Sprintf("answered %d", resp.StatusCode)
	}
	return 0, fmt.Errorf("publish %s: no 202 within two minutes, last %s", key, last)
}

// destinationEvent publishes the destinations' test event i (campaign.created).
func destinationEvent(st *stack, i int) (int64, error) {
	data := maps.Clone(campaign)
	data["id"], data["name"] = 4400+i, fmt.Sprintf("destination %d", i)
	return publishAgain(st, "campaign.created", fmt.Sprintf("dest-%d", i), data)
}

func publishOrFail(t *testing.T, st *stack, i int) int64 {
	t.Helper()
	id, err := destinationEvent(st, i)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// waitDelivered waits until event's delivery to webhook is recorded delivered.
func waitDelivered(t *testing.T, st *stack, event, webhook int64) {
	t.Helper()
	eventually(t, 3*time.Minute, fmt.Sprintf("event %d delivered", event), func() bool {
		return st.delivery(t, event, webhook).State == model.DeliveryDelivered
	})
}

// failedAttempts are the failed attempts of event's delivery to webhook.
func failedAttempts(t *testing.T, st *stack, event, webhook int64) []model.Attempt {
	t.Helper()
	var out []model.Attempt
	for _, a := range st.attemptsOf(t, event, webhook) {
		if a.ErrorClass != nil {
			out = append(out, a)
		}
	}
	return out
}

// attemptsOf are every attempt of event's delivery to webhook, in order.
func (st *stack) attemptsOf(t *testing.T, event, webhook int64) []model.Attempt {
	t.Helper()
	var out []model.Attempt
	if err := st.db.NewSelect().Model(&out).
		Where("delivery_id IN (SELECT id FROM deliveries WHERE event_id = ? AND webhook_id = ?)", event, webhook).
		OrderExpr("attempt ASC").Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDestinationSQS: the sqs kind on goaws run as a process, a standard queue (no de-duplication
// id: copies carry one webhook-id).
func TestDestinationSQS(t *testing.T) {
	const secretKey = "sqs-secret-KOALA-44"
	testDestination(t, destinationCase{
		start: func(t *testing.T) brokerUnderTest { return brokertest.StartSQS(t) },
		destination: map[string]any{"type": "sqs", "region": "us-east-1", "accessKeyId": "AKIAWEBHOOKD44",
			"secretAccessKey": secretKey},
		secrets: map[string]string{"the AWS secret access key": secretKey},
	})
}

// TestDestinationRabbitMQ: the rabbitmq kind on Debian's RabbitMQ, its own node: a durable exchange
// and queue, the password in the URL (no de-duplication of its own: copies carry one message_id).
func TestDestinationRabbitMQ(t *testing.T) {
	var password string
	testDestination(t, destinationCase{
		start: func(t *testing.T) brokerUnderTest {
			r := brokertest.StartRabbitMQ(t)
			password = r.Password()
			return rabbitWithPassword{r}
		},
		destination: map[string]any{"type": "rabbitmq", "exchange": brokertest.RabbitExchange, "routingKey": brokertest.RabbitQueue},
		secretsOf:   func() map[string]string { return map[string]string{"the broker's password": password} },
	})
}

// rabbitWithPassword is the RabbitMQ of a test with its publisher's password in its URL, as an
// owner registers it.
type rabbitWithPassword struct{ *brokertest.RabbitMQ }

func (r rabbitWithPassword) URL() string {
	u, err := url.Parse(r.RabbitMQ.URL())
	if err != nil {
		panic(err)
	}
	u.User = url.UserPassword(u.User.Username(), r.Password())
	return u.String()
}

// TestDestinationNATS: the nats kind on nats-server (built from its Go module) with JetStream and a
// token: the stream drops a copy under the same Nats-Msg-Id, so the consumer reads none.
func TestDestinationNATS(t *testing.T) {
	const token = "nats-token-WALLABY-44"
	testDestination(t, destinationCase{
		start:       func(t *testing.T) brokerUnderTest { return brokertest.StartNATS(t, brokertest.WithNATSToken(token)) },
		destination: map[string]any{"type": "nats", "subject": brokertest.NATSSubject, "token": token},
		secrets:     map[string]string{"the NATS token": token},
		dedup:       true,
	})
}

// TestDestinationKafka: the kafka kind on franz-go's in-process cluster (kfake: no Kafka broker runs
// on these machines), SASL/PLAIN with the password in the URL. Kafka has no de-duplication id:
// copies carry one webhook-id header.
func TestDestinationKafka(t *testing.T) {
	const user, password = "webhookd", "kafka-pw-NUMBAT-44"
	testDestination(t, destinationCase{
		start: func(t *testing.T) brokerUnderTest {
			return kafkaWithPassword{brokertest.StartKafka(t, brokertest.KafkaSASL(user, password)), user, password}
		},
		destination: map[string]any{"type": "kafka", "topic": brokertest.KafkaTopic},
		secrets:     map[string]string{"the Kafka password": password},
	})
}

// kafkaWithPassword is the kfake cluster of a test with its SASL user and password in its URL.
type kafkaWithPassword struct {
	*brokertest.Kafka
	user, password string
}

func (k kafkaWithPassword) URL() string {
	return "kafka://" + url.UserPassword(k.user, k.password).String() + "@" + k.Addr()
}

// TestDestinationFailingNotifiesOnce: a broker that refuses every publish (a NATS subject no
// stream stores) fails a destination's deliveries as an HTTPS receiver's 5xx would: each attempt
// recorded with its class and message, every delivery exhausted on the schedule, the webhook moved
// to failing, and its owner told once, by one e-mail and one webhook.failing at the account's
// operational endpoint; the API's delivery log names the class. Then the owner fixes the
// destination (PATCH, a subject the stream stores) and a retry delivers.
func TestDestinationFailingNotifiesOnce(t *testing.T) {
	besideOthers(t)
	n := brokertest.StartNATS(t)
	st := newStack(t, stackOptions{allowPrivate: true, allowPlaintext: true, schedule: []time.Duration{200 * time.Millisecond}})
	addChannel(t, st, "A", "webhook", st.rc.url("/ops"))
	status, body, _ := st.call(t, "A", "POST", "/api/svc/v2/webhooks", map[string]any{
		"url": n.URL(), "eventType": "campaign.created", "destination": map[string]any{"type": "nats", "subject": "orders.nowhere"}})
	if status != http.StatusCreated {
		t.Fatalf("create: %d %v", status, body)
	}
	hook := int64(body["data"].(map[string]any)["id"].(float64))
	var events []int64
	for range 3 {
		events = append(events, st.publish(t, "A", "campaign.created", campaign))
	}
	eventually(t, 60*time.Second, "three deliveries exhausted", func() bool {
		return countStates(t, st.db, hook)[model.DeliveryExhausted] == 3
	})
	if w := st.webhook(t, hook); w.Status != "failed" {
		t.Fatalf("webhook status %s, want failed (variant A's failing)", w.Status)
	}
	eventually(t, 30*time.Second, "webhook.failing", func() bool { return len(st.rc.requests("/ops")) >= 1 })
	time.Sleep(2 * time.Second) // a wait for a notice that must not come
	if got := noticeTypes(noticesAt(t, st.rc, "/ops", hook)); !slices.Equal(got, []string{"webhook.failing"}) {
		t.Fatalf("notices = %v, want one webhook.failing", got)
	}
	if n := len(st.mb.Messages()); n != 1 {
		t.Fatalf("%d e-mails, want one", n)
	}
	for _, ev := range events {
		for _, a := range st.attemptsOf(t, ev, hook) {
			if a.ErrorClass == nil || *a.ErrorClass != "broker_missing" || !strings.Contains(*a.Error, "nats") {
				t.Fatalf("attempt %d of event %d: class %v (%v), want broker_missing naming nats", a.Attempt, ev, a.ErrorClass, a.Error)
			}
		}
	}
	status, body, _ = st.call(t, "A", "GET", fmt.Sprintf("/api/svc/v2/webhooks/%d/deliveries", hook), nil)
	if status != http.StatusOK || !strings.Contains(fmt.Sprint(body), "broker_missing") {
		t.Fatalf("the delivery log does not name the class: %d %v", status, body)
	}

	// Fixed: the subject the stream stores, then a retry of the exhausted deliveries.
	if s, b, _ := st.call(t, "A", "PATCH", fmt.Sprintf("/api/svc/v2/webhooks/%d", hook), map[string]any{
		"destination": map[string]any{"type": "nats", "subject": n.Subject()}}); s != http.StatusOK {
		t.Fatalf("patch: %d %v", s, b)
	}
	if s, b, _ := st.call(t, "A", "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/retry", hook), map[string]any{}); s != http.StatusAccepted && s != http.StatusOK {
		t.Fatalf("retry: %d %v", s, b)
	} else {
		t.Logf("retry: %d %v", s, b)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, a := range st.attemptsOf(t, events[0], hook) {
				t.Logf("attempt %d: %v %v", a.Attempt, deref(a.ErrorClass), deref(a.Error))
			}
		}
	})
	for _, ev := range events {
		waitDelivered(t, st, ev, hook)
	}
	if got := len(n.Consume(t, 3, 30*time.Second)); got != 3 {
		t.Fatalf("the stream holds %d messages, want 3", got)
	}
}

// TestDestinationsThroughEgressProxy: with an egress proxy, every broker connection goes through
// it, as an HTTPS receiver's does: webhookd asks the proxy for a CONNECT tunnel to the broker's
// checked address, and speaks NATS, AMQP, Kafka or SQS's HTTP through it. Each kind's message
// arrives, and the proxy saw a tunnel to each broker.
func TestDestinationsThroughEgressProxy(t *testing.T) {
	besideOthers(t)
	proxy := startConnectProxy(t, "webhookd", "proxy-secret")
	proxyURL := &url.URL{Scheme: "http", Host: proxy.ln.Addr().String(), User: url.UserPassword("webhookd", "proxy-secret")}
	st := newStack(t, stackOptions{allowPrivate: true, allowPlaintext: true, proxy: proxyURL})
	nats := brokertest.StartNATS(t)
	kafka := brokertest.StartKafka(t)
	sqs := brokertest.StartSQS(t)
	rabbit := brokertest.StartRabbitMQ(t)
	kinds := []struct {
		b           brokerUnderTest
		addr        string
		destination map[string]any
	}{
		{nats, strings.TrimPrefix(nats.URL(), "nats://"), map[string]any{"type": "nats", "subject": brokertest.NATSSubject}},
		{kafka, kafka.Addr(), map[string]any{"type": "kafka", "topic": brokertest.KafkaTopic}},
		{sqs, strings.Split(strings.TrimPrefix(sqs.URL(), "http://"), "/")[0], map[string]any{"type": "sqs", "region": "us-east-1", "accessKeyId": "AKIA44", "secretAccessKey": "proxy-test"}},
		{rabbitWithPassword{rabbit}, strings.Split(strings.Split(rabbit.URL(), "@")[1], "/")[0], map[string]any{"type": "rabbitmq", "exchange": brokertest.RabbitExchange, "routingKey": brokertest.RabbitQueue}},
	}
	var hooks []int64
	for _, k := range kinds {
		status, body, _ := st.call(t, "A", "POST", "/api/svc/v2/webhooks", map[string]any{
			"url": k.b.URL(), "eventType": "campaign.created", "destination": k.destination})
		if status != http.StatusCreated {
			t.Fatalf("create %v: %d %v", k.destination["type"], status, body)
		}
		hooks = append(hooks, int64(body["data"].(map[string]any)["id"].(float64)))
	}
	ev := st.publish(t, "A", "campaign.created", campaign)
	for i, k := range kinds {
		waitDelivered(t, st, ev, hooks[i])
		byID := map[string][]brokertest.Received{}
		collect(t, k.b, byID, []int64{ev}, hooks[i])
		targets, _ := proxy.seen()
		if !slices.Contains(targets, k.addr) {
			t.Fatalf("%v: the proxy saw tunnels to %v, not to the broker at %s", k.destination["type"], targets, k.addr)
		}
	}
}
