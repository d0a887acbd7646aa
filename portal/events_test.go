package portal_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/wire"
)

// xssData is event data that would end the page's <pre> and run a script if it were not escaped.
const xssData = `{"note":"</pre><script>alert(1)</script>"}`

// signedWebhook is a webhook whose secret is sealed with the test box, so variant B bodies can be
// signed as the activity signs them; it returns the webhook and its secret.
func (e *env) signedWebhook(t *testing.T, accountID int64, v model.Variant, rawURL string) (*model.Webhook, string) {
	t.Helper()
	box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	secret, sealed, err := box.NewSealedWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: accountID, Variant: v, URL: rawURL, EventType: v.EventTypes()[0],
		Status: v.InitialStatus(), Secret: sealed, CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(t.Context(), e.db, w, 100); err != nil {
		t.Fatal(err)
	}
	return w, secret
}

func (e *env) publish(t *testing.T, accountID int64, v model.Variant, eventType, data string) *model.PublishResult {
	t.Helper()
	res, err := model.InsertEvent(t.Context(), e.db, model.NewEvent{AccountID: accountID, Variant: v, EventType: eventType, Data: data})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// attempt records an attempt as activities.Deliver does, through model.RecordAttempt.
func (e *env) attempt(t *testing.T, w *model.Webhook, deliveryID int64, n, status int, response, headers string, next *time.Time) {
	t.Helper()
	o := model.AttemptOutcome{Success: status >= 200 && status < 300, NextAttemptAt: next}
	o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.LatencyMS = deliveryID, n, w.URL, model.Now(), int64(40+n)
	if status != 0 {
		o.StatusCode = &status
	}
	if !o.Success {
		class, msg := "http_status", fmt.Sprintf("receiver answered %d", status)
		o.ErrorClass, o.Error = &class, &msg
	}
	if response != "" {
		o.ResponseBody = &response
	}
	if headers != "" {
		o.RequestHeaders = &headers
	}
	if _, err := model.RecordAttempt(t.Context(), e.db, w, o); err != nil {
		t.Fatal(err)
	}
}

func otherVariant(v model.Variant) model.Variant {
	if v == model.VariantA {
		return model.VariantB
	}
	return model.VariantA
}

var eventRowPattern = regexp.MustCompile(`<tr id="event-(\d+)">`)
var nextPattern = regexp.MustCompile(`<a class="next" href="([^"]+)"`)

// eventLogIDs walks the event log from path by its "older events" links and returns every event id
// it shows, in page order, and how many pages it read.
func (e *env) eventLogIDs(t *testing.T, cookie *http.Cookie, path string) ([]int64, int) {
	t.Helper()
	var ids []int64
	pages := 0
	for path != "" {
		if pages++; pages > 50 {
			t.Fatal("the event log's pages do not end")
		}
		rec := e.do(t, "GET", path, cookie, nil)
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		for _, m := range eventRowPattern.FindAllStringSubmatch(body, -1) {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			ids = append(ids, id)
		}
		path = ""
		if m := nextPattern.FindStringSubmatch(body); m != nil {
			path = html.UnescapeString(m[1])
		}
	}
	return ids, pages
}

// TestEventLog: the log holds the session's events only, newest first, in pages that hold every
// event exactly once, with its deliveries counted by state; the type and time filters narrow it.
func TestEventLog(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account, stranger := e.account(t), e.account(t)
		e.webhook(t, account.ID, v, "https://r.example.com/")
		types := v.EventTypes()
		var want []int64 // newest first
		for i := range 120 {
			typ := types[i%2]
			want = append([]int64{e.publish(t, account.ID, v, typ, `{"n":1}`).Event.ID}, want...)
			if i%40 == 0 {
				e.publish(t, stranger.ID, v, typ, `{"n":2}`)
				e.publish(t, account.ID, otherVariant(v), otherVariant(v).EventTypes()[0], `{"n":3}`)
			}
		}
		cookie := e.enter(t, e.link(t, account.ID, v, false))

		first := e.do(t, "GET", "/portal/events", cookie, nil)
		expect(t, first, http.StatusOK)
		body := first.Body.String()
		if !strings.Contains(body, "UTC") || !strings.Contains(body, `type="datetime-local"`) || !strings.Contains(body, `href="/portal/events"`) {
			t.Fatalf("the log lacks its filters, its UTC note or the nav link:\n%s", body)
		}
		for _, et := range types {
			if !strings.Contains(body, `<option value="`+et+`"`) {
				t.Fatalf("the type filter lacks %s", et)
			}
		}
		got, pages := e.eventLogIDs(t, cookie, "/portal/events")
		if !slices.Equal(got, want) || pages < 3 {
			t.Fatalf("the log's %d pages showed %d events %v, want every one of %d once, newest first %v", pages, len(got), got, len(want), want)
		}

		// The deliveries of an event, by state.
		if !strings.Contains(body, fmt.Sprintf(`<a href="/portal/events/%d">`, want[0])) {
			t.Fatalf("no link to the newest event:\n%s", body)
		}
		// Every other event is of the webhook's type, and has one delivery, pending.
		if !strings.Contains(body, `1 <span class="status state-pending">1 pending</span>`) || !strings.Contains(body, "<td>0</td>") {
			t.Fatalf("the deliveries are not counted by state:\n%s", body)
		}

		// By type.
		got, _ = e.eventLogIDs(t, cookie, "/portal/events?type="+url.QueryEscape(types[1]))
		if len(got) != 60 {
			t.Fatalf("type %s: %d events, want 60", types[1], len(got))
		}

		// By time: only the events moved into the window are in it; since is included, until not.
		t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		for i, id := range want[:3] {
			if _, err := e.db.NewUpdate().Table("events").Set("occurred_at = ?", t0.Add(time.Duration(i)*time.Minute)).Where("id = ?", id).Exec(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		got, _ = e.eventLogIDs(t, cookie, "/portal/events?since=2026-05-01T12:00&until=2026-05-01T12:02:00")
		if !slices.Equal(got, []int64{want[0], want[1]}) {
			t.Fatalf("window: %v, want %v", got, []int64{want[0], want[1]})
		}

		// Bad filters are named on the page, with 400.
		for _, q := range []string{"type=nope", "since=yesterday", "until=2026-13-01T00:00", "since=2026-05-02T00:00&until=2026-05-01T00:00", "before=-3", "before=x"} {
			rec := e.do(t, "GET", "/portal/events?"+q, cookie, nil)
			expect(t, rec, http.StatusBadRequest)
			if !strings.Contains(rec.Body.String(), `class="error"`) {
				t.Fatalf("%s: no reason shown:\n%s", q, rec.Body)
			}
		}
	})
}

// TestEventDetail: an event shows its payload exactly as the receiver gets it (variant B's signed
// with the endpoint's secret, which is never shown), escaped, and its deliveries.
func TestEventDetail(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		w, secret := e.signedWebhook(t, account.ID, v, "https://r.example.com/")
		res := e.publish(t, account.ID, v, w.EventType, xssData)
		if len(res.Deliveries) != 1 {
			t.Fatalf("%d deliveries", len(res.Deliveries))
		}
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		rec := e.do(t, "GET", fmt.Sprintf("/portal/events/%d", res.Event.ID), cookie, nil)
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "</pre><script") {
			t.Fatalf("the event's data is not escaped:\n%s", body)
		}
		if !strings.Contains(body, "&lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatalf("the event's data is not shown as text:\n%s", body)
		}
		ev := res.Event
		sent := wire.Body(v.Spec().Body, ev.EventType, json.RawMessage(ev.Data), ev.OccurredAt, secret)
		text := html.UnescapeString(body)
		if !strings.Contains(text, "<pre class=\"raw\">"+string(sent)+"</pre>") {
			t.Fatalf("the payload is not the body sent %s:\n%s", sent, body)
		}
		words := map[model.Variant]string{model.VariantA: `{"eventType":`, model.VariantB: `"signature":"sha256=`}[v]
		if !strings.Contains(text, words) {
			t.Fatalf("variant %s's body lacks %s", v, words)
		}
		if strings.Contains(text, secret) {
			t.Fatal("the event page shows the webhook's secret")
		}
		if !strings.Contains(body, fmt.Sprintf(`<a href="/portal/deliveries/%d">`, res.Deliveries[0].ID)) || !strings.Contains(body, "state-pending") {
			t.Fatalf("the delivery is not listed with its state and link:\n%s", body)
		}

		// Its endpoint deleted, the delivery stays in the event's history, without a link.
		if err := model.DeleteWebhook(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID); err != nil {
			t.Fatal(err)
		}
		rec = e.do(t, "GET", fmt.Sprintf("/portal/events/%d", res.Event.ID), cookie, nil)
		expect(t, rec, http.StatusOK)
		if body := rec.Body.String(); !strings.Contains(body, fmt.Sprintf("endpoint %d (deleted)", w.ID)) || strings.Contains(body, "/portal/deliveries/") {
			t.Fatalf("a deleted endpoint's delivery:\n%s", body)
		}
	})
}

// TestDeliveryDetail: a delivery shows every attempt with status, class of error, latency, the
// response's first KiB and the headers sent without the signature, all escaped; a delivery under
// way loads follow.js.
func TestDeliveryDetail(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		w, secret := e.signedWebhook(t, account.ID, v, "https://r.example.com/")
		res := e.publish(t, account.ID, v, w.EventType, `{"n":1}`)
		d := res.Deliveries[0]
		headers := `{"Content-Type":"application/json","Webhook-Id":"msg_x","Webhook-Signature":"v1,c2VjcmV0LWRlcml2ZWQ=","X-Evil":"<script>alert(3)</script>"}`
		next := model.Now().Add(time.Minute)
		e.attempt(t, w, d.ID, 1, 500, `<script>alert("receiver")</script>`, headers, &next)
		e.attempt(t, w, d.ID, 2, 502, strings.Repeat("é", 700), "", &next)
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		rec := e.do(t, "GET", fmt.Sprintf("/portal/deliveries/%d", d.ID), cookie, nil)
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		if strings.Contains(body, "<script>alert") {
			t.Fatalf("a receiver's response or a header is not escaped:\n%s", body)
		}
		for _, want := range []string{
			"&lt;script&gt;alert(&#34;receiver&#34;)&lt;/script&gt;", "&lt;script&gt;alert(3)&lt;/script&gt;",
			"state-retrying", "Attempt 1", "Attempt 2", "500", "502", "http_status", "41 ms", "Webhook-Id", "msg_x",
			"Cut at 1 KiB", `<script src="/portal/static/follow.js" defer></script>`, `id="live" data-follow=`,
			model.Now().Add(time.Minute).Format("2006-01-02"), `action="/portal/deliveries/` + strconv.FormatInt(d.ID, 10) + `/resend"`,
		} {
			if !strings.Contains(body, want) {
				t.Fatalf("the delivery page lacks %q:\n%s", want, body)
			}
		}
		if strings.Contains(strings.ToLower(body), "webhook-signature</th>") || strings.Contains(body, "c2VjcmV0LWRlcml2ZWQ") || strings.Contains(html.UnescapeString(body), secret) {
			t.Fatalf("the delivery page shows a signature header or the secret:\n%s", body)
		}
		// The first KiB, cut at a character.
		if strings.Contains(body, strings.Repeat("é", 513)) || !strings.Contains(body, strings.Repeat("é", 512)) {
			t.Fatal("the response is not cut at its first KiB")
		}

		// Without a dispatcher (Temporal) nothing is queued: 503, and the delivery stays as it was.
		rec = e.do(t, "POST", fmt.Sprintf("/portal/deliveries/%d/resend", d.ID), cookie, url.Values{"csrf": {e.csrf(t, cookie)}})
		expect(t, rec, http.StatusServiceUnavailable)
		if !strings.Contains(rec.Body.String(), "nothing was sent") {
			t.Fatalf("resend without Temporal:\n%s", rec.Body)
		}

		// Delivered: the page stops following.
		e.attempt(t, w, d.ID, 3, 200, "ok", "", nil)
		rec = e.do(t, "GET", fmt.Sprintf("/portal/deliveries/%d", d.ID), cookie, nil)
		expect(t, rec, http.StatusOK)
		if body := rec.Body.String(); strings.Contains(body, "follow.js") || strings.Contains(body, "data-follow") || !strings.Contains(body, "state-delivered") {
			t.Fatalf("a delivered delivery's page still follows:\n%s", body)
		}
	})
}

// TestFollowScript: follow.js is served from the binary as JavaScript.
func TestFollowScript(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	rec := e.do(t, "GET", "/portal/static/follow.js", nil, nil)
	expect(t, rec, http.StatusOK)
	if ct := rec.Header().Get("Content-Type"); !strings.Contains(ct, "javascript") || !strings.Contains(rec.Body.String(), `getElementById("live")`) {
		t.Fatalf("follow.js: %q\n%s", ct, rec.Body)
	}
}

// TestRecoverCount: the recover page counts what a recovery would resend, as dispatch.Recover
// counts it, and refuses a window the API refuses.
func TestRecoverCount(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		w := e.webhook(t, account.ID, v, "https://r.example.com/")
		for i := range 5 {
			res := e.publish(t, account.ID, v, w.EventType, `{"n":1}`)
			state := []string{model.DeliveryExhausted, model.DeliveryRetrying, model.DeliveryExhausted, model.DeliveryDelivered, model.DeliveryPending}[i]
			if err := dbtest.SetDeliveryState(t.Context(), e.db, res.Deliveries[0].ID, state); err != nil {
				t.Fatal(err)
			}
		}
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		since := model.Now().Add(-time.Hour).Format("2006-01-02T15:04:05")
		// The pending one is covered too: its attempt may be in flight (issue 41).
		n, _, err := model.CountDeliveries(t.Context(), e.db, model.Recovery{WebhookID: w.ID, Since: model.Now().Add(-time.Hour), Until: model.Now()}.Query())
		if err != nil || n != 4 {
			t.Fatalf("CountRecoverable = %d, %v; want 4", n, err)
		}
		path := fmt.Sprintf("/portal/webhooks/%d/recover", w.ID)
		rec := e.do(t, "GET", path+"?since="+since, cookie, nil)
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		if !strings.Contains(body, "<strong>4</strong> deliveries") || !strings.Contains(body, `<form method="post" action="`+path+`"`) ||
			!strings.Contains(body, `name="since" value="`+since+`"`) || !strings.Contains(body, "Resend 4 deliveries") {
			t.Fatalf("the recover page does not count 4 with a confirmation form:\n%s", body)
		}
		// Without since: the last 24 hours.
		rec = e.do(t, "GET", path, cookie, nil)
		expect(t, rec, http.StatusOK)
		if !strings.Contains(rec.Body.String(), "<strong>4</strong>") {
			t.Fatalf("the default window:\n%s", rec.Body)
		}
		// None since a minute from now is refused; none in a later window is 0 with no form.
		future := model.Now().Add(time.Hour).Format("2006-01-02T15:04")
		for _, bad := range []string{"?since=" + future, "?since=now", "?since=0000-01-01T00:00"} {
			rec := e.do(t, "GET", path+bad, cookie, nil)
			expect(t, rec, http.StatusBadRequest)
			if !strings.Contains(rec.Body.String(), `class="error"`) {
				t.Fatalf("%s: no reason shown:\n%s", bad, rec.Body)
			}
		}
		// Linked from the endpoints row.
		if page := e.do(t, "GET", "/portal/", cookie, nil).Body.String(); !strings.Contains(page, `href="`+path+`"`) {
			t.Fatalf("no recover link on the endpoints page:\n%s", page)
		}
		// Without a dispatcher (Temporal) nothing is queued: 503.
		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {e.csrf(t, cookie)}, "since": {since}})
		expect(t, rec, http.StatusServiceUnavailable)
		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {e.csrf(t, cookie)}, "since": {future}})
		expect(t, rec, http.StatusBadRequest)
	})
}

// eventFixture is an account with a webhook, an event and its delivery, seen from a session.
type eventFixture struct {
	webhook  *model.Webhook
	event    int64
	delivery int64
}

func (e *env) eventFixture(t *testing.T, accountID int64, v model.Variant) eventFixture {
	t.Helper()
	w, _ := e.signedWebhook(t, accountID, v, "https://r.example.com/")
	res := e.publish(t, accountID, v, w.EventType, `{"n":1}`)
	if err := dbtest.SetDeliveryState(t.Context(), e.db, res.Deliveries[0].ID, model.DeliveryExhausted); err != nil {
		t.Fatal(err)
	}
	return eventFixture{webhook: w, event: res.Event.ID, delivery: res.Deliveries[0].ID}
}

func (f eventFixture) gets() []string {
	return []string{
		fmt.Sprintf("/portal/events/%d", f.event), fmt.Sprintf("/portal/deliveries/%d", f.delivery),
		fmt.Sprintf("/portal/webhooks/%d/recover", f.webhook.ID),
	}
}

func (f eventFixture) posts() []string {
	return []string{fmt.Sprintf("/portal/deliveries/%d/resend", f.delivery), fmt.Sprintf("/portal/webhooks/%d/recover", f.webhook.ID)}
}

// TestEventTenancy: another account's event, delivery or webhook, or the account's own of the
// other variant, is 404 on every page and action, as in the REST API; the log does not list them.
func TestEventTenancy(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account, stranger := e.account(t), e.account(t)
		theirs := e.eventFixture(t, stranger.ID, v)
		other := e.eventFixture(t, account.ID, otherVariant(v))
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		csrf := e.csrf(t, cookie)
		since := model.Now().Add(-time.Hour).Format("2006-01-02T15:04:05")
		if ids, _ := e.eventLogIDs(t, cookie, "/portal/events"); len(ids) != 0 {
			t.Fatalf("the log lists events outside the session's scope: %v", ids)
		}
		for _, f := range []eventFixture{theirs, other} {
			for _, path := range f.gets() {
				expect(t, e.do(t, "GET", path, cookie, nil), http.StatusNotFound)
			}
			for _, path := range f.posts() {
				expect(t, e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "since": {since}}), http.StatusNotFound)
			}
			var state string
			if err := e.db.NewSelect().Table("deliveries").Column("state").Where("id = ?", f.delivery).Scan(t.Context(), &state); err != nil || state != model.DeliveryExhausted {
				t.Fatalf("delivery %d changed from another session: %q, %v", f.delivery, state, err)
			}
		}
		for _, bad := range []string{"0", "-1", "01", "+1", "x", "99999999999999999999", "123456789"} {
			for _, path := range []string{"/portal/events/" + bad, "/portal/deliveries/" + bad, "/portal/webhooks/" + bad + "/recover"} {
				expect(t, e.do(t, "GET", path, cookie, nil), http.StatusNotFound)
			}
		}
		// A delivery of the session's own, deleted, endpoint is gone with it, as in the API.
		mine := e.eventFixture(t, account.ID, v)
		if err := model.DeleteWebhook(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, mine.webhook.ID); err != nil {
			t.Fatal(err)
		}
		expect(t, e.do(t, "GET", fmt.Sprintf("/portal/deliveries/%d", mine.delivery), cookie, nil), http.StatusNotFound)
	})
}

// TestEventReadOnly: a read-only session sees the pages without resend or recover, and their POSTs
// are 403.
func TestEventReadOnly(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		f := e.eventFixture(t, account.ID, v)
		cookie := e.enter(t, e.link(t, account.ID, v, true))
		since := model.Now().Add(-time.Hour).Format("2006-01-02T15:04:05")
		for _, path := range append(f.gets(), "/portal/events", fmt.Sprintf("/portal/webhooks/%d/recover?since=%s", f.webhook.ID, since)) {
			rec := e.do(t, "GET", path, cookie, nil)
			expect(t, rec, http.StatusOK)
			// Signing out is the one form a read-only session has (TestReadOnly).
			body := logoutForm.ReplaceAllString(rec.Body.String(), "")
			if strings.Contains(body, `method="post"`) || strings.Contains(body, "/resend") || strings.Contains(body, "Resend 1") {
				t.Fatalf("%s shows an action in a read-only session:\n%s", path, body)
			}
		}
		for _, path := range f.posts() {
			rec := e.do(t, "POST", path, cookie, url.Values{"csrf": {csrfOf(cookie)}, "since": {since}})
			expect(t, rec, http.StatusForbidden)
			if !strings.Contains(rec.Body.String(), "read-only") {
				t.Fatalf("POST %s: %s", path, rec.Body)
			}
		}
	})
}

// TestEventCSRF: resend and recover without the session's CSRF token are 403.
func TestEventCSRF(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		f := e.eventFixture(t, account.ID, v)
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		otherCSRF := e.csrf(t, e.enter(t, e.link(t, account.ID, v, false)))
		since := model.Now().Add(-time.Hour).Format("2006-01-02T15:04:05")
		for _, path := range f.posts() {
			for _, csrf := range []string{"", "wrong", otherCSRF} {
				form := url.Values{"since": {since}}
				if csrf != "" {
					form.Set("csrf", csrf)
				}
				expect(t, e.do(t, "POST", path, cookie, form), http.StatusForbidden)
			}
			expect(t, e.do(t, "POST", path+"?csrf="+url.QueryEscape(e.csrf(t, cookie)), cookie, url.Values{"since": {since}}), http.StatusForbidden)
		}
	})
}
