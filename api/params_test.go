package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model/dbtest"
)

// TestRepeatedParameterRefused (issue 27): a query parameter given twice is 400 invalid_request
// naming it, on every route of both variants, in the variant's envelope, as a JSON key sent twice
// is: whatever the route reads, whatever the values (equal ones too), and however the name is
// spelled (%69 is i). The key is checked first, and a refused request changes nothing.
func TestRepeatedParameterRefused(t *testing.T) {
	e := newEnv(t, dbtest.SQLite(t))
	key := newKey(t, e.db)
	routes := variantRoutes(t, e, key)
	counts := func() [3]int64 {
		var n [3]int64
		for i, table := range []string{"webhooks", "events", "deliveries"} {
			q := e.db.NewSelect().Table(table)
			if table == "webhooks" {
				q = q.Where("deleted_at IS NULL")
			}
			c, err := q.Count(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			n[i] = c
		}
		return n
	}
	before := counts()
	for _, rt := range routes {
		t.Run(rt.name, func(t *testing.T) {
			body := ""
			if member := bodyRoutes[rt.name]; member != "" {
				body = "{" + member + "}"
			}
			for _, c := range []struct{ query, field string }{
				{"limit=50&limit=60", "limit"},
				{"limit=50&limit=50", "limit"},
				{"after=0&limit=5&after=1", "after"},
				{"lim%69t=5&limit=5", "limit"},
				{"since=2020-01-01T00:00:00Z&until=2030-01-01T00:00:00Z&since=2020-01-01T00:00:00Z", "since"},
				{"bogus=1&bogus", "bogus"},
			} {
				r := e.do(t, rt.method, rt.path+"?"+c.query, rt.auth, body)
				r.expectError(t, rt.v, http.StatusBadRequest, c.field)
				if msg, _ := r.body["message"].(string); r.body["code"] != "invalid_request" || !strings.Contains(msg, `"`+c.field+`"`) {
					t.Errorf("?%s: %s, want invalid_request naming %q", c.query, r.raw, c.field)
				}
			}
			e.do(t, rt.method, rt.path+"?limit=1&limit=2", nil, body).expectError(t, rt.v, http.StatusUnauthorized, "")
		})
	}
	if after := counts(); after != before {
		t.Errorf("refused requests changed the webhooks, events and deliveries from %v to %v", before, after)
	}
	for _, rt := range routes {
		if rt.method == http.MethodGet && !strings.Contains(rt.name, ":deliveryId") && !strings.Contains(rt.name, ":laneId") {
			e.do(t, "GET", rt.path, rt.auth, "").expect(t, http.StatusOK, "")
		}
	}
	// Parameters given once each, and a next page's link, are as before.
	for _, v := range variants {
		e.do(t, "POST", v.collection, v.auth(key), createBody("https://r2.example.com/", v.eventType)).expect(t, http.StatusCreated, "")
		r := e.do(t, "GET", v.collection+"?limit=1&after=0&eventType="+v.eventType, v.auth(key), "")
		r.expect(t, http.StatusOK, "")
		link := r.header.Get("Link")
		next, _, ok := strings.Cut(strings.TrimPrefix(link, "<"), ">")
		if !ok {
			t.Fatalf("no next page: %q", link)
		}
		e.do(t, "GET", next, v.auth(key), "").expect(t, http.StatusOK, "")
	}
}
