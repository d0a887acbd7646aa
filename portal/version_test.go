package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestVersionForm: the endpoint page shows the payload version and a form listing the event type's
// versions; a version the type does not have is refused naming it (422, nothing changed), a value
// that is not a number is 400, and without the CSRF token or in a read-only session nothing
// changes. (Every type has one version today, so a change to another is shown by sources'
// fixture tests through the same use case.)
func TestVersionForm(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		f := e.endpointForm(t, v)
		account, w, cookie, csrf, page := f.account, f.webhook, f.cookie, f.csrf, f.page
		version := func() int { return f.stored().Version }

		rec := e.do(t, "GET", page, cookie, nil)
		expect(t, rec, http.StatusOK)
		if body := rec.Body.String(); !strings.Contains(body, `action="/portal/webhooks/`+fmt.Sprint(w.ID)+`/version"`) ||
			!strings.Contains(body, `<option value="1" selected>version 1</option>`) {
			t.Fatalf("the page has no version form with version 1 chosen:\n%s", body)
		}

		rec = e.do(t, "POST", page+"/version", cookie, url.Values{"csrf": {csrf}, "version": {"1"}})
		expect(t, rec, http.StatusOK)
		if !strings.Contains(rec.Body.String(), "carry version 1 of the") {
			t.Errorf("no notice after choosing version 1:\n%s", rec.Body)
		}

		rec = e.do(t, "POST", page+"/version", cookie, url.Values{"csrf": {csrf}, "version": {"2"}})
		expect(t, rec, http.StatusUnprocessableEntity)
		if !strings.Contains(rec.Body.String(), "version-error") || !strings.Contains(rec.Body.String(), "version") {
			t.Errorf("version 2 not refused with the form's error:\n%s", rec.Body)
		}
		rec = e.do(t, "POST", page+"/version", cookie, url.Values{"csrf": {csrf}, "version": {"<script>"}})
		expect(t, rec, http.StatusBadRequest)
		if strings.Contains(rec.Body.String(), "<script>") {
			t.Errorf("the page echoes markup:\n%s", rec.Body)
		}
		rec = e.do(t, "POST", page+"/version", cookie, url.Values{"version": {"2"}})
		if rec.Code == http.StatusOK || rec.Code == http.StatusUnprocessableEntity {
			t.Errorf("a form without its CSRF token got %d", rec.Code)
		}
		ro := e.enter(t, e.link(t, account.ID, v, true))
		rec = e.do(t, "POST", page+"/version", ro, url.Values{"csrf": {e.csrf(t, ro)}, "version": {"1"}})
		if rec.Code == http.StatusOK {
			t.Errorf("a read-only session changed the version: %d", rec.Code)
		}
		if got := version(); got != 1 {
			t.Errorf("version = %d, want 1", got)
		}
	})
}
