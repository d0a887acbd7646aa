package portal_test

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

var failureRowPattern = regexp.MustCompile(`<tr id="delivery-(\d+)">`)

// TestFailures (issue 46): the failures page lists the session's exhausted and retrying deliveries
// across its endpoints, newest first, each linking to its delivery's page, in pages that hold each
// once; delivered and pending ones, another account's and another variant's are not there.
func TestFailures(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		acc, other := e.account(t), e.account(t)
		first := e.webhook(t, acc.ID, v, "https://one.example.com/hook")
		second := e.webhook(t, acc.ID, v, "https://two.example.com/hook")
		foreign := e.webhook(t, other.ID, v, "https://three.example.com/hook")
		var want []int64
		for i := range 60 {
			res := e.publish(t, acc.ID, v, v.EventTypes()[0], `{}`)
			for _, d := range res.Deliveries {
				state := []string{model.DeliveryExhausted, model.DeliveryRetrying, model.DeliveryDelivered, model.DeliveryPending}[(i+int(d.WebhookID))%4]
				if err := dbtest.SetDeliveryState(t.Context(), e.db, d.ID, state); err != nil {
					t.Fatal(err)
				}
				if d.WebhookID != foreign.ID && (state == model.DeliveryExhausted || state == model.DeliveryRetrying) {
					want = append(want, d.ID)
				}
			}
		}
		other2 := e.publish(t, other.ID, v, v.EventTypes()[0], `{}`)
		for _, d := range other2.Deliveries {
			if err := dbtest.SetDeliveryState(t.Context(), e.db, d.ID, model.DeliveryExhausted); err != nil {
				t.Fatal(err)
			}
		}
		slices.Reverse(want)
		cookie := e.enter(t, e.link(t, acc.ID, v, true))
		var got []int64
		pages := 0
		for path := "/portal/failures"; path != ""; pages++ {
			if pages > 10 {
				t.Fatal("the failures' pages do not end")
			}
			rec := e.do(t, "GET", path, cookie, nil)
			expect(t, rec, http.StatusOK)
			body := rec.Body.String()
			for _, m := range failureRowPattern.FindAllStringSubmatch(body, -1) {
				id, _ := strconv.ParseInt(m[1], 10, 64)
				got = append(got, id)
				if !strings.Contains(body, fmt.Sprintf(`<a href="/portal/deliveries/%d">`, id)) {
					t.Fatalf("delivery %d has no link to its page", id)
				}
			}
			path = ""
			if m := nextPattern.FindStringSubmatch(body); m != nil {
				path = html.UnescapeString(m[1])
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) || pages < 2 {
			t.Fatalf("the failures pages (%d) list %v, want %v", pages, got, want)
		}
		rec := e.do(t, "GET", "/portal/failures", cookie, nil)
		for _, u := range []string{first.URL, second.URL} {
			if !strings.Contains(rec.Body.String(), u) {
				t.Fatalf("the page does not name endpoint %s", u)
			}
		}
		if strings.Contains(rec.Body.String(), foreign.URL) {
			t.Fatal("the page shows another account's endpoint")
		}
		expect(t, e.do(t, "GET", "/portal/failures?before=x", cookie, nil), http.StatusBadRequest)
		// Another variant's session of the same account sees none of them.
		otherV := e.enter(t, e.link(t, acc.ID, otherVariant(v), true))
		if ids := failureRowPattern.FindAllString(e.do(t, "GET", "/portal/failures", otherV, nil).Body.String(), -1); len(ids) != 0 {
			t.Fatalf("another variant's session lists %v", ids)
		}
	})
}
