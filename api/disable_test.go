package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// checkDisabled asserts how a variant shows a webhook's disabled state: variant A with the
// disabled boolean beside an unchanged status, variant B with its status alone.
func checkDisabled(t *testing.T, v variantCase, w map[string]any, disabled bool, statusA string) {
	t.Helper()
	switch v.name {
	case "A":
		if w["disabled"] != disabled || w["status"] != statusA {
			t.Fatalf("variant A webhook = %v, want disabled %v and status %s", w, disabled, statusA)
		}
	case "B":
		want := map[bool]string{true: model.StatusDisabled, false: model.StatusActive}[disabled]
		if _, ok := w["disabled"]; ok || w["status"] != want {
			t.Fatalf("variant B webhook = %v, want status %s and no disabled field", w, want)
		}
	}
}

func loadWebhook(t *testing.T, e *testEnv, id any) *model.Webhook {
	t.Helper()
	w := &model.Webhook{}
	if err := e.db.NewSelect().Model(w).Where("id = ?", id).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	return w
}

// TestDisableAndEnable: both operations answer 200 with the webhook in the variant's envelope,
// are idempotent, keep the first disabled_at, and neither replays nor tests anything.
func TestDisableAndEnable(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		created := e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).data(t)
		id := created["id"]
		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(id))
		events := func() int64 {
			n, err := e.db.NewSelect().Model((*model.Event)(nil)).Where("account_id = ?", loadWebhook(t, e, id).AccountID).
				Where("about_webhook_id IS NULL").Count(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		// notices are the types of the notices about the webhook, oldest first, with who acted.
		notices := func() []string {
			var got []model.Event
			if err := e.db.NewSelect().Model(&got).Where("about_webhook_id = ?", loadWebhook(t, e, id).ID).OrderExpr("id").Scan(context.Background()); err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, n := range got {
				var d model.NoticeData
				if err := json.Unmarshal([]byte(n.Data), &d); err != nil {
					t.Fatal(err)
				}
				out = append(out, n.EventType+" by "+d.By)
			}
			return out
		}
		eventsBefore := events()

		off := e.do(t, "POST", one+"/disable", auth, "")
		off.expect(t, http.StatusOK, "")
		v.okEnvelope(t, off)
		if off.body["message"] != "Webhook disabled" {
			t.Fatalf("message = %v", off.body["message"])
		}
		checkDisabled(t, v, off.data(t), true, "pending")
		first := loadWebhook(t, e, id)
		if !first.Disabled() || first.DisabledReason == nil || *first.DisabledReason != model.DisabledManual {
			t.Fatalf("stored webhook after disable = %+v", first)
		}

		again := e.do(t, "POST", one+"/disable", auth, "{}")
		again.expect(t, http.StatusOK, "")
		checkDisabled(t, v, again.data(t), true, "pending")
		if got := loadWebhook(t, e, id); !got.DisabledAt.Equal(*first.DisabledAt) {
			t.Fatalf("disabling again moved disabled_at from %v to %v", first.DisabledAt, got.DisabledAt)
		}
		checkDisabled(t, v, e.do(t, "GET", one, auth, "").data(t), true, "pending")

		// B's status filter finds it; A's filters are its specified statuses.
		filter := map[string]string{"A": "pending", "B": "disabled"}[v.name]
		listed := e.do(t, "GET", v.collection+"?status="+filter, auth, "")
		listed.expect(t, http.StatusOK, "")
		if items := listed.list(t); len(items) != 1 || items[0].(map[string]any)["id"] != id {
			t.Fatalf("?status=%s lists %s", filter, listed.raw)
		}
		checkDisabled(t, v, listed.list(t)[0].(map[string]any), true, "pending")
		if v.name == "B" {
			if n := len(e.do(t, "GET", v.collection+"?status=active", auth, "").list(t)); n != 0 {
				t.Fatalf("?status=active lists %d disabled webhooks", n)
			}
		}

		on := e.do(t, "POST", one+"/enable", auth, "")
		on.expect(t, http.StatusOK, "")
		v.okEnvelope(t, on)
		if on.body["message"] != "Webhook enabled" {
			t.Fatalf("message = %v", on.body["message"])
		}
		checkDisabled(t, v, on.data(t), false, "pending")
		onAgain := e.do(t, "POST", one+"/enable", auth, "{}")
		onAgain.expect(t, http.StatusOK, "")
		checkDisabled(t, v, onAgain.data(t), false, "pending")
		if got := loadWebhook(t, e, id); got.Disabled() || got.DisabledReason != nil {
			t.Fatalf("stored webhook after enable = %+v", got)
		}
		if n := events(); n != eventsBefore {
			t.Fatalf("disable and enable published %d events; they publish none", n-eventsBefore)
		}
		// One notice per move, none for a request that moved nothing (disabled twice, enabled twice).
		if got, want := notices(), []string{"webhook.disabled by api", "webhook.enabled by api"}; !slices.Equal(got, want) {
			t.Fatalf("notices = %v, want %v", got, want)
		}
	})
}

// TestDisableAndEnableErrors: each operation refuses a body with fields, malformed JSON, a
// missing or wrong credential, and the ids of other accounts and of the other variant, leaving
// the webhook as it was.
func TestDisableAndEnableErrors(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := newKey(t, e.db)
		auth := v.auth(key)
		id := jsonNumber(e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).data(t)["id"])
		intruder := v.auth(newKey(t, e.db))
		other := variants[0]
		if v.name == "A" {
			other = variants[1]
		}
		otherID := jsonNumber(e.do(t, "POST", other.collection, other.auth(key), createBody("https://r.example.com/", other.eventType)).data(t)["id"])

		for _, op := range []string{"disable", "enable"} {
			cases := []struct {
				name, id string
				auth     func(*http.Request)
				body     string
				status   int
				code     string
				field    string
			}{
				{"unknown field", id, auth, `{"reason":"maintenance"}`, 400, "invalid_request", "reason"},
				{"malformed JSON", id, auth, `{"reason":`, 400, "invalid_request", ""},
				{"not an object", id, auth, `[]`, 400, "invalid_request", ""},
				{"trailing data", id, auth, `{}{}`, 400, "invalid_request", ""},
				{"non-numeric id", "abc", auth, "", 400, "invalid_request", "id"},
				{"no key", id, nil, "", 401, "unauthorized", ""},
				{"other variant's header", id, v.wrongAuth(key), "", 401, "unauthorized", ""},
				{"another account's id", id, intruder, "", 404, "not_found", ""},
				{"the other variant's id", otherID, auth, "", 404, "not_found", ""},
				{"unknown id", "999999", auth, "", 404, "not_found", ""},
			}
			for _, tc := range cases {
				t.Run(op+"/"+tc.name, func(t *testing.T) {
					r := e.do(t, "POST", fmt.Sprintf("%s/%s/%s", v.collection, tc.id, op), tc.auth, tc.body)
					r.expect(t, tc.status, tc.code)
					r.expectError(t, v, tc.status, tc.field)
				})
			}
		}
		for _, w := range []string{id, otherID} {
			if got := loadWebhook(t, e, w); got.Disabled() {
				t.Fatalf("a refused request disabled webhook %s", w)
			}
		}
	})
}

// TestWebhooksGaugeCountsDisabled: a disabled webhook counts as disabled in both variants.
func TestWebhooksGaugeCountsDisabled(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := newEnv(t, dbtest.SQLite(t), func(c *envConfig) { c.Registry, c.Gatherer = reg, reg })
	key := newKey(t, e.db)
	for _, v := range variants {
		auth := v.auth(key)
		for range 2 {
			e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).expect(t, http.StatusCreated, "")
		}
		id := jsonNumber(e.do(t, "POST", v.collection, auth, createBody("https://r.example.com/", v.eventType)).data(t)["id"])
		e.do(t, "POST", v.collection+"/"+id+"/disable", auth, "").expect(t, http.StatusOK, "")
	}
	m := e.do(t, "GET", "/metrics", nil, "")
	for _, want := range []string{
		`webhookd_webhooks{status="disabled",variant="A"} 1`,
		`webhookd_webhooks{status="pending",variant="A"} 2`,
		`webhookd_webhooks{status="disabled",variant="B"} 1`,
		`webhookd_webhooks{status="active",variant="B"} 2`,
	} {
		if !strings.Contains(string(m.raw), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}
