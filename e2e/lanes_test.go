//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// The ordered webhook's traffic in the lanes tests: laneKeys keys (campaigns), laneEvents events
// of each, published one after another per key and all keys at once.
const (
	laneKeys   = 20
	laneEvents = 15
	// laneFailRate is the share of requests the receiver answers 503, at random.
	laneFailRate = 0.15
	// laneKeyBase is the first campaign id: key k is campaign laneKeyBase+k.
	laneKeyBase = 7000
)

// laneSchedule is webhookd's retry schedule in the lanes tests: ten attempts within 4 s, so that a
// head the receiver fails at 15% runs out of it once in 10^8 (the lane would block), and the
// stuck key's head runs out of it soon.
const laneSchedule = "100ms,200ms,300ms,400ms,500ms,500ms,500ms,500ms,500ms"

// TestOrderedLanes (issue 43): one ordered webhook (ordering key data.id), 20 campaigns x 15
// campaign.updated events published per campaign one after another, all campaigns at once, to a
// receiver that answers 503 to 15% of requests at random; webhookd, the built binary, is killed
// with SIGKILL halfway through the publishing and started again on the same database and
// Temporal. Every event arrives, and the receiver's own log of requests (arrival and answer, per
// campaign) shows that no request of a campaign's event n+1 started before its event n was
// answered 2xx, and that webhook-sequence grows with the events as they were published:
//
//	go test -count=1 -run 'TestOrderedLanes$' -tags e2e -v ./e2e/
func TestOrderedLanes(t *testing.T) {
	besideOthers(t)
	lt := startLaneTest(t, -1)
	lt.publishWithKill(t)
	eventually(t, 3*time.Minute, "every event of every key answered 2xx", func() bool { return lt.log.missing(nil) == 0 })
	lt.checkOrder(t, nil)
}

// TestOrderedLaneStuckKey (issue 43): TestOrderedLanes with one campaign (the stuck key) whose
// every request fails. The other 19 are all delivered, in order; the stuck key's later events
// wait behind its head, which runs out of its schedule and blocks the lane: GET
// /webhooks/:id/lanes?blocked=true lists it with its head. Once the owner skips the head (POST
// .../lanes/:laneId/skip), the lane goes on, and the rest of that key, now answered 2xx, arrives
// in order.
//
//	go test -count=1 -run 'TestOrderedLaneStuckKey$' -tags e2e -v ./e2e/
func TestOrderedLaneStuckKey(t *testing.T) {
	besideOthers(t)
	const stuck = 3
	lt := startLaneTest(t, stuck)
	lt.publishWithKill(t)
	others := func(k int) bool { return k != stuck }
	eventually(t, 3*time.Minute, "every event of the 19 other keys answered 2xx", func() bool { return lt.log.missing(others) == 0 })
	head := lt.events[stuck][0]
	eventually(t, time.Minute, "the stuck key's head exhausted", func() bool {
		return lt.st.delivery(t, head, lt.hook).State == model.DeliveryExhausted
	})
	lt.checkOrder(t, others)

	// The stuck key's later events wait behind its head: the receiver got its first event alone.
	for _, e := range lt.log.entries() {
		if e.key == stuck && e.event != 0 {
			t.Fatalf("event %d of the stuck key reached the receiver (sequence %d at %s) while its head, event 0, was never answered 2xx",
				e.event, e.seq, e.at.Format(time.RFC3339Nano))
		}
	}
	tries := len(lt.log.of(stuck, 0))
	if want := len(strings.Split(laneSchedule, ",")) + 1; tries < want {
		t.Errorf("the stuck head was tried %d times, want its whole schedule, %d (one more for an attempt the kill cut)", tries, want)
	}

	// The database sees the lane blocked with that head, and the API lists it.
	lanes, err := model.ListLanes(t.Context(), lt.st.db, lt.hook, model.LaneFilter{Blocked: true, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	if len(lanes) != 1 || lanes[0].Head == nil || lanes[0].Head.EventID != head || lanes[0].Waiting != laneEvents-1 {
		t.Fatalf("blocked lanes in the database = %+v, want the stuck key's alone, its head event %d and %d waiting", lanes, head, laneEvents-1)
	}
	laneID := lt.blockedLane(t, stuck, head)
	if laneID != lanes[0].ID {
		t.Fatalf("the API lists lane %d as blocked, the database lane %d", laneID, lanes[0].ID)
	}

	// The owner skips the head; the receiver now answers the stuck key as the others.
	lt.log.unstick()
	skipAt := time.Now()
	status, body, _ := lt.st.call(t, "A", "POST", fmt.Sprintf("/api/svc/v2/webhooks/%d/lanes/%d/skip", lt.hook, laneID), nil)
	if status != http.StatusOK {
		t.Fatalf("skip the stuck head: %d %v", status, body)
	}
	skipped := func(k, i int) bool { return k == stuck && i == 0 }
	eventually(t, 2*time.Minute, "the rest of the stuck key answered 2xx", func() bool {
		return lt.log.missing(func(k int) bool { return k == stuck }, skipped) == 0
	})
	lt.checkOrder(t, nil, skipped)
	for _, e := range lt.log.of(stuck, 1) {
		if e.at.Before(skipAt) {
			t.Errorf("event 1 of the stuck key arrived at %s, before its head was skipped (%s)", e.at.Format(time.RFC3339Nano), skipAt.Format(time.RFC3339Nano))
		}
	}
	if st := lt.st.delivery(t, head, lt.hook).State; st != model.DeliveryCanceled {
		t.Errorf("the skipped head is %s, want %s", st, model.DeliveryCanceled)
	}
	if n := len(lt.log.of(stuck, 0)); n != tries {
		t.Errorf("the skipped head was sent again: %d requests, %d before the skip", n, tries)
	}
}

// laneTest is the stack of the lanes tests: webhookd's binary on its own database and Temporal,
// one ordered webhook, and the receiver's log.
type laneTest struct {
	p    *webhookdProcess
	st   *stack
	hook int64
	log  *laneLog
	// events[k][i] is the id of key k's event i.
	events [laneKeys][laneEvents]int64
}

// startLaneTest starts webhookd and the receiver, and creates the ordered webhook; the receiver
// fails every request of key stuck (-1: none).
func startLaneTest(t *testing.T, stuck int) *laneTest {
	bin := webhookdBinary(t)
	dbURL := dbtest.PostgresURL(t)
	tsrv := temporaltest.Start(t)
	rc := startReceiver(t)
	log := &laneLog{rand: rand.New(rand.NewPCG(43, uint64(stuck+1))), stuck: stuck}
	rc.setRespondTo(log.respond)
	db := openTestDB(t, dbURL)
	p, apiURL := startWebhookd(t, bin, dbURL, "lanes", tsrv, rc, append(killSettings, "WEBHOOKD_RETRY_SCHEDULE="+laneSchedule)...)
	key, _, err := model.CreateAPIKey(context.Background(), db, "lanes@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	lt := &laneTest{p: p, st: &stack{apiURL: apiURL, key: key, db: db, rc: rc}, log: log}
	lt.hook = lt.createOrderedWebhook(t, rc.url("/lanes"))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("webhookd's log:\n%s", p.logs(t))
		}
	})
	return lt
}

// createOrderedWebhook creates a campaign.updated webhook ordered by data.id.
func (lt *laneTest) createOrderedWebhook(t *testing.T, url string) int64 {
	t.Helper()
	status, body, _ := lt.st.call(t, "A", "POST", "/api/svc/v2/webhooks", map[string]any{
		"url": url, "eventType": "campaign.updated", "ordering": map[string]string{"key": "data.id"}})
	if status != http.StatusCreated {
		t.Fatalf("create the ordered webhook: %d %v", status, body)
	}
	id := int64(body["data"].(map[string]any)["id"].(float64))
	if w := lt.st.webhook(t, id); w.OrderingKey == nil || *w.OrderingKey != "data.id" {
		t.Fatalf("the webhook's ordering key is %v after a create with ordering {\"key\": \"data.id\"}", w.OrderingKey)
	}
	return id
}

// publishWithKill publishes every key's events, one after another per key and the keys at once,
// and kills webhookd with SIGKILL once half of them were accepted, starting it again a second
// later. A publish that gets no 202 is made again with the same Idempotency-Key until one comes,
// so that an event committed before the kill is not published twice.
func (lt *laneTest) publishWithKill(t *testing.T) {
	t.Helper()
	var accepted atomic.Int64
	errs := make(chan error, laneKeys)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for k := range laneKeys {
		wg.Go(func() {
			for i := range laneEvents {
				id, err := lt.publishEvent(k, i)
				if err != nil {
					errs <- err
					return
				}
				lt.events[k][i] = id
				accepted.Add(1)
				time.Sleep(40 * time.Millisecond) // the publishing spans the kill
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	for accepted.Load() < laneKeys*laneEvents/2 {
		select {
		case <-done:
			t.Fatal("every event was published before the kill: the test proves nothing")
		case err := <-errs:
			t.Fatal(err)
		default:
			time.Sleep(2 * time.Millisecond)
		}
	}
	lt.p.kill(t)
	atKill := accepted.Load()
	time.Sleep(time.Second)
	lt.p.start(t)
	<-done
	close(errs)
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	t.Logf("webhookd killed with SIGKILL after %d of %d events were accepted, and started again", atKill, laneKeys*laneEvents)
	if atKill == laneKeys*laneEvents {
		t.Fatal("every event was published before the kill: the test proves nothing")
	}
	for k := range laneKeys {
		for i := 1; i < laneEvents; i++ {
			if lt.events[k][i] <= lt.events[k][i-1] {
				t.Fatalf("key %d: event %d has id %d, not after event %d's %d", k, i, lt.events[k][i], i-1, lt.events[k][i-1])
			}
		}
	}
}

// publishEvent publishes event i of key k, again until it is answered 202 (for two minutes).
func (lt *laneTest) publishEvent(k, i int) (int64, error) {
	data := maps.Clone(campaign)
	data["id"] = laneKeyBase + k
	data["name"] = laneEventName(k, i)
	data["budget"] = 100 + i
	return publishAgain(lt.st, "campaign.updated", "lane-"+laneEventName(k, i), data)
}

func laneEventName(k, i int) string { return fmt.Sprintf("k%02d-e%02d", k, i) }

// blockedLane reads GET /webhooks/:id/lanes?blocked=true and returns the id of the one lane listed,
// which must be key stuck's, blocked on event head.
func (lt *laneTest) blockedLane(t *testing.T, stuck int, head int64) int64 {
	t.Helper()
	status, body, _ := lt.st.call(t, "A", "GET", fmt.Sprintf("/api/svc/v2/webhooks/%d/lanes?blocked=true", lt.hook), nil)
	if status != http.StatusOK {
		t.Fatalf("list the blocked lanes: %d %v", status, body)
	}
	list, _ := body["data"].([]any)
	if len(list) != 1 {
		t.Fatalf("blocked lanes listed: %v, want the stuck key's alone", body)
	}
	lane, _ := list[0].(map[string]any)
	h, _ := lane["head"].(map[string]any)
	if lane["blocked"] != true || int(num(lane["key"])) != laneKeyBase+stuck || h == nil || int64(num(h["eventId"])) != head ||
		h["status"] != model.DeliveryExhausted || num(lane["waiting"]) != laneEvents-1 {
		t.Fatalf("the blocked lane listed is %v, want key %d blocked, its head event %d exhausted, %d waiting", lane, laneKeyBase+stuck, head, laneEvents-1)
	}
	return int64(num(lane["id"]))
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

// laneRequest is one request the receiver got, as it logged it: which key and event (from the
// body), the headers of the lanes, when it arrived and when the receiver answered it, and how.
type laneRequest struct {
	key, event int
	seq        int64
	resend     bool
	at, answer time.Time
	status     int
}

// laneLog is the receiver of the lanes tests: it answers 503 to a share of requests at random
// (seeded) and to every request of the stuck key, and logs each request with its answer.
type laneLog struct {
	mu    sync.Mutex
	rand  *rand.Rand
	stuck int
	reqs  []laneRequest
	bad   []string
}

func (l *laneLog) respond(r receivedRequest, w http.ResponseWriter) {
	var body struct {
		Data struct {
			Name string `json:"name"`
		} `json:"data"`
	}
	var e laneRequest
	e.at = r.At
	_ = json.Unmarshal(r.Body, &body)
	_, err := fmt.Sscanf(body.Data.Name, "k%02d-e%02d", &e.key, &e.event)
	seq, seqErr := strconv.ParseInt(r.Header.Get("Webhook-Sequence"), 10, 64)
	e.seq, e.resend = seq, r.Header.Get("Webhook-Resend") == "true"
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil || e.key < 0 || e.key >= laneKeys || e.event < 0 || e.event >= laneEvents {
		l.bad = append(l.bad, fmt.Sprintf("a request whose body names none of the test's events: %.200s", r.Body))
		return
	}
	if seqErr != nil || seq < 1 {
		l.bad = append(l.bad, fmt.Sprintf("%s came with webhook-sequence %q", body.Data.Name, r.Header.Get("Webhook-Sequence")))
	}
	e.status = http.StatusOK
	if e.key == l.stuck || l.rand.Float64() < laneFailRate {
		e.status = http.StatusServiceUnavailable
	}
	w.WriteHeader(e.status)
	e.answer = time.Now()
	l.reqs = append(l.reqs, e)
}

// unstick makes the receiver answer the stuck key as the others.
func (l *laneLog) unstick() {
	l.mu.Lock()
	l.stuck = -1
	l.mu.Unlock()
}

// entries returns the log in the order the requests arrived.
func (l *laneLog) entries() []laneRequest {
	l.mu.Lock()
	out := slices.Clone(l.reqs)
	l.mu.Unlock()
	slices.SortStableFunc(out, func(a, b laneRequest) int { return a.at.Compare(b.at) })
	return out
}

// of returns the requests of key k's event i, in the order they arrived.
func (l *laneLog) of(k, i int) []laneRequest {
	var out []laneRequest
	for _, e := range l.entries() {
		if e.key == k && e.event == i {
			out = append(out, e)
		}
	}
	return out
}

// missing counts the events of the keys keep selects (nil: all) that no request answered 2xx,
// except those skipped (by their owner).
func (l *laneLog) missing(keep func(k int) bool, skipped ...func(k, i int) bool) int {
	var ok [laneKeys][laneEvents]bool
	for _, e := range l.entries() {
		if e.status == http.StatusOK {
			ok[e.key][e.event] = true
		}
	}
	n := 0
	for k := range laneKeys {
		for i := range laneEvents {
			if (keep == nil || keep(k)) && !ok[k][i] && !isSkipped(skipped, k, i) {
				n++
			}
		}
	}
	return n
}

func isSkipped(skipped []func(k, i int) bool, k, i int) bool {
	for _, s := range skipped {
		if s(k, i) {
			return true
		}
	}
	return false
}

// checkOrder checks the receiver's log of the keys keep selects (nil: all): no request of a key's
// event n+1 arrived before its event n was answered 2xx (or, skipped, before its last request),
// no request of event n arrived after one of event n+1 unless it says it is a resend, and each
// event's webhook-sequence is one number, greater than the one of the event before (1 for the
// first).
func (lt *laneTest) checkOrder(t *testing.T, keep func(k int) bool, skipped ...func(k, i int) bool) {
	t.Helper()
	reqs := lt.log.entries()
	lt.log.mu.Lock()
	for _, b := range lt.log.bad {
		t.Error(b)
	}
	lt.log.mu.Unlock()
	var violations []string
	attempts, failed := 0, 0
	for k := range laneKeys {
		if keep != nil && !keep(k) {
			continue
		}
		var firstOK [laneEvents]time.Time
		var first, last [laneEvents]time.Time
		var seq [laneEvents]int64
		for _, e := range reqs {
			if e.key != k {
				continue
			}
			attempts++
			if e.status != http.StatusOK {
				failed++
			}
			i := e.event
			if first[i].IsZero() {
				first[i] = e.at
			}
			last[i] = e.at
			if e.status == http.StatusOK && firstOK[i].IsZero() {
				firstOK[i] = e.answer
			}
			if seq[i] == 0 {
				seq[i] = e.seq
			} else if seq[i] != e.seq {
				violations = append(violations, fmt.Sprintf("key %d event %d came with webhook-sequence %d and %d", k, i, seq[i], e.seq))
			}
			if i+1 < laneEvents && !first[i+1].IsZero() && !e.resend {
				violations = append(violations, fmt.Sprintf("key %d: a request of event %d at %s, after event %d's first at %s",
					k, i, e.at.Format(time.RFC3339Nano), i+1, first[i+1].Format(time.RFC3339Nano)))
			}
		}
		if seq[0] != 0 && seq[0] != 1 {
			violations = append(violations, fmt.Sprintf("key %d: its first event came with webhook-sequence %d, want 1", k, seq[0]))
		}
		for i := 1; i < laneEvents; i++ {
			if first[i].IsZero() {
				continue
			}
			before := firstOK[i-1]
			if isSkipped(skipped, k, i-1) {
				before = last[i-1]
			}
			if before.IsZero() || first[i].Before(before) {
				violations = append(violations, fmt.Sprintf("key %d: event %d's first request at %s, event %d answered 2xx at %s",
					k, i, first[i].Format(time.RFC3339Nano), i-1, before.Format(time.RFC3339Nano)))
			}
			if seq[i-1] != 0 && seq[i] <= seq[i-1] {
				violations = append(violations, fmt.Sprintf("key %d: event %d came with webhook-sequence %d, event %d with %d", k, i, seq[i], i-1, seq[i-1]))
			}
		}
	}
	t.Logf("%d requests of the keys checked, %d of them answered 503; %d order violations", attempts, failed, len(violations))
	if failed == 0 {
		t.Error("the receiver answered no request 503: the test proves nothing of retries in a lane")
	}
	for _, v := range violations[:min(len(violations), 20)] {
		t.Error(v)
	}
}
