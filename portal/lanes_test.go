package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestOrderingForm (issue 43): the endpoint page's ordering form sets the ordering key, refuses a
// malformed one with the use case's reason on the page (the key as sent kept, escaped), and stops
// ordering; without the CSRF token, or in a read-only session, nothing changes.
func TestOrderingForm(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		f := e.endpointForm(t, v)
		path := f.page + "/ordering"
		key := func() string {
			if k := f.stored().OrderingKey; k != nil {
				return *k
			}
			return ""
		}

		rec := e.do(t, "GET", f.page, f.cookie, nil)
		expect(t, rec, http.StatusOK)
		if !shows(rec.Body.String(), `<span class="ordering-current">not ordered</span>`) || strings.Contains(rec.Body.String(), "Blocked lanes") {
			t.Fatalf("an unordered endpoint's page:\n%s", rec.Body)
		}

		rec = e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "key": {" data.id "}})
		expect(t, rec, http.StatusOK)
		if key() != "data.id" || !shows(rec.Body.String(), `<code class="ordering-current">data.id</code>`) ||
			!shows(rec.Body.String(), "delivered in order per value of data.id") || !shows(rec.Body.String(), "No lane is blocked.") {
			t.Fatalf("saved key %q; the page:\n%s", key(), rec.Body)
		}

		for _, bad := range []string{"", "data..id", `"><script>alert(1)</script>`} {
			rec = e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "key": {bad}})
			expect(t, rec, http.StatusUnprocessableEntity)
			body := rec.Body.String()
			if !shows(body, "The ordering key cannot be used: ordering.key") || strings.Contains(body, "<script>alert(1)") {
				t.Fatalf("key %q refused with the page:\n%s", bad, body)
			}
			if key() != "data.id" {
				t.Fatalf("a refused key changed the stored one to %q", key())
			}
		}

		rec = e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"remove"}})
		expect(t, rec, http.StatusOK)
		if key() != "" || !shows(rec.Body.String(), "Ordering was removed") {
			t.Fatalf("remove left %q:\n%s", key(), rec.Body)
		}

		expect(t, e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"bogus"}, "key": {"data.id"}}), http.StatusBadRequest)
		expect(t, e.do(t, "POST", path, f.cookie, url.Values{"do": {"save"}, "key": {"data.id"}}), http.StatusForbidden)
		ro := e.enter(t, e.link(t, f.account.ID, v, true))
		expect(t, e.do(t, "POST", path, ro, url.Values{"csrf": {e.csrf(t, ro)}, "do": {"save"}, "key": {"data.id"}}), http.StatusForbidden)
		if key() != "" {
			t.Fatalf("a refused save stored %q", key())
		}
	})
}

// TestBlockedLanes (issue 43): an ordered endpoint's page lists its blocked lanes, each with its
// key and its head (event, sequence, attempts, last error, escaped), and Retry and Skip forms; a
// lane whose head is not exhausted is not listed. Without Temporal a retry or a skip is 503 and
// changes nothing; a lane with nothing at its head is 409 on the page; another account's endpoint
// is 404; a read-only session sees no buttons and may not post.
func TestBlockedLanes(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		f := e.endpointForm(t, v)
		expect(t, e.do(t, "POST", f.page+"/ordering", f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "key": {"data.id"}}), http.StatusOK)
		var events []int64
		for _, id := range []string{"c1", "c1", "c2"} {
			res, err := model.InsertEvent(t.Context(), e.db, model.NewEvent{AccountID: f.account.ID, Variant: v, EventType: f.webhook.EventType, Data: `{"id":"` + id + `"}`})
			if err != nil || len(res.Deliveries) != 1 || res.Deliveries[0].LaneID == nil {
				t.Fatalf("event %s: %+v, %v", id, res, err)
			}
			events = append(events, res.Event.ID)
		}
		lanes, err := model.ListLanes(t.Context(), e.db, f.webhook.ID, model.LaneFilter{Limit: 10})
		if err != nil || len(lanes) != 2 {
			t.Fatalf("lanes: %v, %v", lanes, err)
		}
		c1, c2 := lanes[0], lanes[1]
		hostile := `refused: <script>alert(1)</script>`
		if err := dbtest.SetDeliveryState(t.Context(), e.db, c1.Head.DeliveryID, model.DeliveryExhausted); err != nil {
			t.Fatal(err)
		}
		if _, err := e.db.NewUpdate().Table("deliveries").Set("last_error = ?", hostile).Set("attempts = 8").Where("id = ?", c1.Head.DeliveryID).Exec(t.Context()); err != nil {
			t.Fatal(err)
		}

		rec := e.do(t, "GET", f.page, f.cookie, nil)
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		row := fmt.Sprintf(`id="lane-%d"`, c1.ID)
		for _, want := range []string{"Blocked lanes", row, `<code>"c1"</code>`, fmt.Sprintf(`<a href="/portal/events/%d">%d</a>`, events[0], events[0]),
			"<td>1</td>", "<td>8</td>", fmt.Sprintf(`action="/portal/webhooks/%d/lanes/%d/retry"`, f.webhook.ID, c1.ID),
			fmt.Sprintf(`action="/portal/webhooks/%d/lanes/%d/skip"`, f.webhook.ID, c1.ID)} {
			if !shows(body, want) {
				t.Fatalf("the page lacks %s:\n%s", want, body)
			}
		}
		if strings.Contains(body, fmt.Sprintf(`id="lane-%d"`, c2.ID)) || strings.Contains(body, "<script>alert(1)") || !strings.Contains(body, "refused: &lt;script&gt;") {
			t.Fatalf("the page lists lane c2, whose head is pending, or an unescaped error:\n%s", body)
		}

		// No Temporal here: nothing is retried or skipped.
		lane := fmt.Sprintf("%s/lanes/%d", f.page, c1.ID)
		headOf := func(v model.LaneView) string { return fmt.Sprint(v.Head.DeliveryID) }
		for _, op := range []string{"retry", "skip"} {
			expect(t, e.do(t, "POST", lane+"/"+op, f.cookie, url.Values{"csrf": {f.csrf}, "head": {headOf(c1)}}), http.StatusServiceUnavailable)
		}
		// A skip form that names no head, or a head the lane has passed (a reload of the page a
		// skip answered), skips nothing.
		expect(t, e.do(t, "POST", lane+"/skip", f.cookie, url.Values{"csrf": {f.csrf}}), http.StatusBadRequest)
		moved := e.do(t, "POST", lane+"/skip", f.cookie, url.Values{"csrf": {f.csrf}, "head": {headOf(c2)}})
		expect(t, moved, http.StatusConflict)
		if !shows(moved.Body.String(), "That lane has moved on") {
			t.Fatalf("a skip of a head the lane has passed:\n%s", moved.Body)
		}
		if !shows(rec.Body.String(), fmt.Sprintf(`name="head" value="%d"`, c1.Head.DeliveryID)) {
			t.Fatalf("the skip form does not name the head it skips:\n%s", rec.Body)
		}
		if got, err := model.GetLane(t.Context(), e.db, f.webhook.ID, c1.ID); err != nil || got.Head == nil || got.Head.State != model.DeliveryExhausted {
			t.Fatalf("c1 after refused actions: %+v, %v", got, err)
		}

		// c2's only event delivered: nothing to retry or skip.
		if err := dbtest.SetDeliveryState(t.Context(), e.db, c2.Head.DeliveryID, model.DeliveryDelivered); err != nil {
			t.Fatal(err)
		}
		for _, op := range []string{"retry", "skip"} {
			rec := e.do(t, "POST", fmt.Sprintf("%s/lanes/%d/%s", f.page, c2.ID, op), f.cookie, url.Values{"csrf": {f.csrf}, "head": {headOf(c2)}})
			expect(t, rec, http.StatusConflict)
			if !shows(rec.Body.String(), "That lane waits for no event any more") {
				t.Fatalf("%s of an idle lane:\n%s", op, rec.Body)
			}
		}

		for _, bad := range []string{"x", "0", "01", "999999"} {
			expect(t, e.do(t, "POST", fmt.Sprintf("%s/lanes/%s/skip", f.page, bad), f.cookie, url.Values{"csrf": {f.csrf}, "head": {headOf(c1)}}), http.StatusNotFound)
		}
		expect(t, e.do(t, "POST", lane+"/skip", f.cookie, url.Values{}), http.StatusForbidden)
		other := e.endpointForm(t, v)
		expect(t, e.do(t, "POST", lane+"/skip", other.cookie, url.Values{"csrf": {other.csrf}, "head": {headOf(c1)}}), http.StatusNotFound)
		expect(t, e.do(t, "POST", fmt.Sprintf("%s/lanes/%d/skip", other.page, c1.ID), other.cookie, url.Values{"csrf": {other.csrf}, "head": {headOf(c1)}}), http.StatusNotFound)

		ro := e.enter(t, e.link(t, f.account.ID, v, true))
		rec = e.do(t, "GET", f.page, ro, nil)
		expect(t, rec, http.StatusOK)
		if !shows(rec.Body.String(), row) || strings.Contains(rec.Body.String(), "/skip") {
			t.Fatalf("a read-only page:\n%s", rec.Body)
		}
		expect(t, e.do(t, "POST", lane+"/skip", ro, url.Values{"csrf": {e.csrf(t, ro)}, "head": {headOf(c1)}}), http.StatusForbidden)

		// Ordering removed: the lane keeps its events, still blocked, and the page still lists it.
		expect(t, e.do(t, "POST", f.page+"/ordering", f.cookie, url.Values{"csrf": {f.csrf}, "do": {"remove"}}), http.StatusOK)
		rec = e.do(t, "GET", f.page, f.cookie, nil)
		if !shows(rec.Body.String(), "not ordered") || !shows(rec.Body.String(), row) {
			t.Fatalf("the page of an endpoint no longer ordered does not list its blocked lane:\n%s", rec.Body)
		}
	})
}
