package portal_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/portal"
)

// lockedBuffer is a log destination that requests may write to at once.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestRequestsObserved: every portal request is logged and counted by its route, and the link's
// token, which travels in the query of /portal/enter, reaches neither the log nor a label.
func TestRequestsObserved(t *testing.T) {
	db := dbtest.SQLite(t)
	var logs lockedBuffer
	reg := prometheus.NewRegistry()
	e := newEnv(t, db, func(c *envConfig) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, nil))
		c.Registry = reg
	})
	acc := e.account(t)
	token := e.link(t, acc.ID, model.VariantB, false)
	cookie := e.enter(t, token)
	expect(t, e.do(t, "GET", "/portal/", cookie, nil), http.StatusOK)
	expect(t, e.do(t, "GET", "/portal/enter?token="+token, nil, nil), http.StatusForbidden) // reused

	for _, c := range []struct {
		route, code string
		want        float64
	}{
		{"/portal/enter", "303", 1}, {"/portal/enter", "403", 1}, {"/portal/", "200", 1},
	} {
		got := testutil.ToFloat64(prometheusCounter(t, reg, c.route, c.code))
		if got != c.want {
			t.Errorf("webhookd_portal_requests_total{route=%q,code=%q} = %v, want %v", c.route, c.code, got, c.want)
		}
	}
	out := logs.String()
	if !strings.Contains(out, `msg="portal request" method=GET route=/portal/enter status=303`) {
		t.Errorf("no log line of the exchange:\n%s", out)
	}
	if strings.Contains(out, token) || strings.Contains(out, "wpt_") {
		t.Errorf("the link's token reached the log:\n%s", out)
	}
	if strings.Contains(out, cookie.Value) {
		t.Errorf("the session id reached the log:\n%s", out)
	}
}

// prometheusCounter finds the series of webhookd_portal_requests_total for a GET of route.
func prometheusCounter(t *testing.T, reg *prometheus.Registry, route, code string) prometheus.Collector {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "missing"})
	for _, f := range families {
		if f.GetName() != "webhookd_portal_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["method"] == "GET" && labels["route"] == route && labels["code"] == code {
				c.Add(m.GetCounter().GetValue())
			}
		}
	}
	return c
}

// TestLogout: signing out ends the session in the database, so the cookie (or a copy of it) opens
// nothing; it needs the CSRF token like any POST, and a read-only session may sign out too.
func TestLogout(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		acc := e.account(t)
		for _, readOnly := range []bool{false, true} {
			cookie := e.enter(t, e.link(t, acc.ID, v, readOnly))
			expect(t, e.do(t, "POST", "/portal/logout", cookie, url.Values{}), http.StatusForbidden)
			expect(t, e.do(t, "POST", "/portal/logout", cookie, url.Values{"csrf": {"forged"}}), http.StatusForbidden)
			expect(t, e.do(t, "GET", "/portal/", cookie, nil), http.StatusOK)
			rec := e.do(t, "POST", "/portal/logout", cookie, url.Values{"csrf": {csrfOf(cookie)}})
			expect(t, rec, http.StatusOK)
			if !strings.Contains(rec.Body.String(), "signed out") {
				t.Fatalf("read-only %v: %s", readOnly, rec.Body)
			}
			cleared := false
			for _, c := range rec.Result().Cookies() {
				cleared = cleared || (c.Name == portal.CookieName && c.MaxAge < 0)
			}
			if !cleared {
				t.Errorf("read-only %v: the cookie was not cleared: %v", readOnly, rec.Header())
			}
			expect(t, e.do(t, "GET", "/portal/", cookie, nil), http.StatusUnauthorized)
		}
	})
}
