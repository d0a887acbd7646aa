package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
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
