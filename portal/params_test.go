package portal_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/portal"
)

// TestRepeatedParameterRefused (issue 27): a query parameter given twice is a 400 page naming it
// (never quoting its values) on every route of the portal, as in the API: pages, forms' actions,
// the link's /portal/enter and the static files. The session is checked first; the link's token is
// not spent by a refused exchange, and a refused form changes nothing.
func TestRepeatedParameterRefused(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	account := e.account(t)
	f := e.eventFixture(t, account.ID, model.VariantB)
	cookie := e.enter(t, e.link(t, account.ID, model.VariantB, false))
	csrf := csrfOf(cookie)
	since := model.Now().Add(-time.Hour).Format("2006-01-02T15:04:05")
	routes := 0
	for _, rt := range portal.Routes(e.srv) {
		routes++
		id := f.webhook.ID
		switch {
		case strings.HasPrefix(rt.Path, portal.Prefix+"deliveries/"):
			id = f.delivery
		case strings.HasPrefix(rt.Path, portal.Prefix+"events/"):
			id = f.event
		}
		path := strings.NewReplacer(":id", fmt.Sprint(id), "*", "portal.css").Replace(rt.Path)
		t.Run(rt.Method+" "+rt.Path, func(t *testing.T) {
			var form url.Values
			if rt.Method == http.MethodPost {
				form = url.Values{"csrf": {csrf}, "since": {since}, "url": {"https://changed.example.com/"}}
			}
			for _, c := range []struct{ query, name string }{
				{"range=7d&range=7d", "range"},
				{"since=2020-01-01T00:00:00&type=&since=2021-01-01T00:00:00", "since"},
				{"to%6Ben=wpt_secretvalue&token=wpt_secretvalue", "token"},
				{"x=1&x", "x"},
			} {
				rec := e.do(t, rt.Method, path+"?"+c.query, cookie, form)
				if body := rec.Body.String(); rec.Code != http.StatusBadRequest || !strings.Contains(body, "“"+c.name+"”") || strings.Contains(body, "secretvalue") {
					t.Errorf("?%s: %d, want a 400 page naming %s:\n%s", c.query, rec.Code, c.name, body)
				}
			}
			if rt.Method == http.MethodGet && rt.Path != portal.Prefix+"enter" && !strings.HasPrefix(rt.Path, portal.Prefix+"static/") {
				expect(t, e.do(t, rt.Method, path+"?range=7d&range=7d", nil, nil), http.StatusUnauthorized)
			}
		})
	}
	if routes < 10 {
		t.Fatalf("the portal routes %d paths", routes)
	}
	// The refused exchange left the link unopened, and the refused forms left everything as it was.
	token := e.link(t, account.ID, model.VariantB, false)
	expect(t, e.do(t, "GET", "/portal/enter?token="+token+"&token="+token, nil, nil), http.StatusBadRequest)
	e.enter(t, token)
	expect(t, e.do(t, "GET", "/portal/", cookie, nil), http.StatusOK)
	got, err := model.GetWebhook(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: model.VariantB}, f.webhook.ID)
	if err != nil || got.URL != f.webhook.URL || got.Disabled() {
		t.Fatalf("a refused form changed the webhook: %+v, %v", got, err)
	}
	var state string
	if err := e.db.NewSelect().Table("deliveries").Column("state").Where("id = ?", f.delivery).Scan(t.Context(), &state); err != nil || state != model.DeliveryExhausted {
		t.Fatalf("a refused resend changed the delivery: %q, %v", state, err)
	}
}
