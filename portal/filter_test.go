package portal_test

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

// TestFilterForm (issue 29): the endpoint page's filter form tries a filter on the endpoint's recent
// events without saving it, saves it, removes it when empty, and answers a bad filter with the
// fault's path on the page, the text as sent kept (escaped) in the form.
func TestFilterForm(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		w, _ := e.secretWebhook(t, account.ID, v, "https://r.example.com/")
		for _, data := range []string{`{"x":1}`, `{"x":2}`, `{"x":1}`} {
			if _, err := model.InsertEvent(t.Context(), e.db, model.NewEvent{AccountID: account.ID, Variant: v, EventType: w.EventType, Data: data}); err != nil {
				t.Fatal(err)
			}
		}
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		csrf := e.csrf(t, cookie)
		path := fmt.Sprintf("/portal/webhooks/%d/filter", w.ID)
		stored := func() *string {
			got, err := model.GetWebhook(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.Filter
		}

		rec := e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"test"}, "filter": {`{"data":{"x":1}}`}})
		expect(t, rec, http.StatusOK)
		if !shows(rec.Body.String(), "The filter passes 2 of the 3 most recent") || stored() != nil {
			t.Fatalf("a try shows:\n%s\nand stored %v", rec.Body, stored())
		}

		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"save"}, "filter": {`{ "data": {"x": 1} }`}})
		expect(t, rec, http.StatusOK)
		if f := stored(); f == nil || *f != `{"data":{"x":1}}` || !shows(rec.Body.String(), `{"data":{"x":1}}`) {
			t.Fatalf("saved filter %v; the page:\n%s", f, rec.Body)
		}

		hostile := `{"data":{"</textarea><script>alert(1)</script>":{"$bogus":1}}}`
		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"save"}, "filter": {hostile}})
		expect(t, rec, http.StatusUnprocessableEntity)
		if !shows(rec.Body.String(), "The filter cannot be used") || strings.Contains(rec.Body.String(), "<script>alert(1)") {
			t.Fatalf("a bad filter's page:\n%s", rec.Body)
		}
		if f := stored(); f == nil || *f != `{"data":{"x":1}}` {
			t.Fatalf("a refused save changed the filter to %v", f)
		}

		rec = e.do(t, "POST", path, cookie, url.Values{"csrf": {csrf}, "do": {"save"}, "filter": {""}})
		expect(t, rec, http.StatusOK)
		if stored() != nil || !shows(rec.Body.String(), "The filter was removed") {
			t.Fatalf("an empty save left %v:\n%s", stored(), rec.Body)
		}

		// Without the CSRF token, or in a read-only session, nothing is tried or saved.
		expect(t, e.do(t, "POST", path, cookie, url.Values{"do": {"save"}, "filter": {`{}`}}), http.StatusForbidden)
		ro := e.enter(t, e.link(t, account.ID, v, true))
		expect(t, e.do(t, "POST", path, ro, url.Values{"csrf": {e.csrf(t, ro)}, "do": {"save"}, "filter": {`{}`}}), http.StatusForbidden)
		if stored() != nil {
			t.Fatalf("a refused save stored %v", stored())
		}
	})
}

// TestFilterFormBounds (issue 40): the portal's trial goes through the same use case as the API's,
// with its bounds: over more than 8 MiB of stored event data it reads no more than that and the
// page says where it stopped; an account's third trial at once is refused with 429 and
// Retry-After on the page, while another account's trial runs.
func TestFilterFormBounds(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			webhookstest.WatchTrials(db)
			e := newEnv(t, db)
			for _, v := range model.Variants {
				t.Run(string(v), func(t *testing.T) {
					// endpoint is an account's endpoint and session: open makes one with
					// events, try is its form's do=test under a watch.
					type endpoint struct {
						path, csrf string
						cookie     *http.Cookie
					}
					open := func(eventsOfSize int) endpoint {
						account := e.account(t)
						hook, _ := e.secretWebhook(t, account.ID, v, "https://r.example.com/")
						data := `{"pad":"` + strings.Repeat("x", eventsOfSize-10) + `"}`
						n := 1
						if eventsOfSize > 1000 {
							n = 34 // 8.3 MiB of 250 KiB events
						}
						for range n {
							if _, err := model.InsertEvent(t.Context(), db, model.NewEvent{AccountID: account.ID, Variant: v, EventType: hook.EventType, Data: data}); err != nil {
								t.Fatal(err)
							}
						}
						cookie := e.enter(t, e.link(t, account.ID, v, false))
						return endpoint{path: fmt.Sprintf("/portal/webhooks/%d/filter", hook.ID), csrf: e.csrf(t, cookie), cookie: cookie}
					}
					try := func(ep endpoint, w *webhookstest.Watch) *http.Request {
						form := url.Values{"csrf": {ep.csrf}, "do": {"test"}, "filter": {`{}`}}
						req := httptest.NewRequest("POST", ep.path, strings.NewReader(form.Encode()))
						req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
						req.AddCookie(ep.cookie)
						return req.WithContext(w.Context(req.Context()))
					}

					const size = 250 << 10
					w := &webhookstest.Watch{}
					rec := e.serve(t, try(open(size), w))
					expect(t, rec, http.StatusOK)
					want := webhooks.MaxTrialBytes / size
					if w.EventsRead()*size > webhooks.MaxTrialBytes || !shows(rec.Body.String(), fmt.Sprintf("The filter passes %d of the %d most recent", want, want)) ||
						!shows(rec.Body.String(), "It stopped there, after 8 MiB of event data") {
						t.Fatalf("a try over 8.3 MiB read %d events and shows: %s", w.EventsRead(), filterNote(rec.Body.String()))
					}

					a, other := open(100), open(100)
					gate := webhookstest.NewGate()
					defer gate.Open()
					answers := make(chan *httptest.ResponseRecorder, webhooks.MaxConcurrentTrials)
					for range webhooks.MaxConcurrentTrials {
						req := try(a, gate.Watch())
						go func() {
							rec := httptest.NewRecorder()
							e.srv.ServeHTTP(rec, req)
							answers <- rec
						}()
						gate.AwaitHeld()
					}
					rec = e.serve(t, try(a, &webhookstest.Watch{}))
					if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "5" ||
						!shows(rec.Body.String(), "This account is already trying 2 filters") {
						t.Errorf("an account's third try at once: %d, Retry-After %q: %s", rec.Code, rec.Header().Get("Retry-After"), filterNote(rec.Body.String()))
					}
					rec = e.serve(t, try(other, &webhookstest.Watch{}))
					if rec.Code != http.StatusOK || !shows(rec.Body.String(), "The filter passes 1 of the 1 most recent") {
						t.Errorf("another account's try meanwhile: %d: %s", rec.Code, filterNote(rec.Body.String()))
					}
					gate.Open()
					for range webhooks.MaxConcurrentTrials {
						if rec := <-answers; rec.Code != http.StatusOK {
							t.Errorf("a held try answered %d: %s", rec.Code, filterNote(rec.Body.String()))
						}
					}
				})
			}
		})
	}
}

// filterNote is what an endpoint page says of a filter's try or refusal: its trial's or its
// filter error's paragraph, or the page when it has neither.
func filterNote(page string) string {
	for _, class := range []string{`class="notice filter-trial"`, `class="error filter-error"`} {
		if i := strings.Index(page, class); i >= 0 {
			if end := strings.Index(page[i:], "</p>"); end >= 0 {
				return html.UnescapeString(page[i : i+end])
			}
		}
	}
	return page
}
