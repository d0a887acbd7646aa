package api_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestWebhookLifecycle walks DESIGN.md's variant table: create, list, get, update, delete, with the
// variant's envelope, status values and status codes.
func TestWebhookLifecycle(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))

		created := e.do(t, "POST", v.collection, auth, createBody("https://hooks.example.com/in", v.eventType))
		created.expect(t, http.StatusCreated, "")
		v.okEnvelope(t, created)
		w := created.data(t)
		if w["status"] != v.initialStatus || w["url"] != "https://hooks.example.com/in" || w["eventType"] != v.eventType {
			t.Fatalf("created webhook = %v", w)
		}
		if s, _ := w["secret"].(string); !strings.HasPrefix(s, "whsec_") || len(s) != len("whsec_")+44 {
			t.Fatalf("secret = %q", w["secret"])
		}
		id := int64(w["id"].(float64))
		one := fmt.Sprintf("%s/%d", v.collection, id)

		got := e.do(t, "GET", one, auth, "")
		got.expect(t, http.StatusOK, "")
		v.okEnvelope(t, got)
		if _, leaked := got.data(t)["secret"]; leaked {
			t.Fatal("GET returns the secret; only create and GET /secret may")
		}

		list := e.do(t, "GET", v.collection, auth, "")
		list.expect(t, http.StatusOK, "")
		v.okEnvelope(t, list)
		if items := list.list(t); len(items) != 1 || items[0].(map[string]any)["id"] != w["id"] {
			t.Fatalf("list = %s", list.raw)
		}
		if v.name == "B" {
			item := list.list(t)[0].(map[string]any)
			if item["lastTriggered"] != nil || item["lastStatus"] != nil || item["failureCount"] != float64(0) {
				t.Fatalf("fresh B webhook delivery fields = %v", item)
			}
		}

		e.clock.Advance(time.Millisecond) // updatedAt has millisecond resolution on the wire
		updated := e.do(t, "PUT", one, auth, `{"url":"https://hooks.example.com/v2"}`)
		updated.expect(t, http.StatusOK, "")
		v.okEnvelope(t, updated)
		u := updated.data(t)
		if u["url"] != "https://hooks.example.com/v2" || u["status"] != v.initialStatus || u["eventType"] != v.eventType || u["id"] != w["id"] {
			t.Fatalf("updated webhook = %v", u)
		}
		if v.name == "A" && u["updatedAt"] == w["updatedAt"] {
			t.Fatalf("updatedAt unchanged: %v", u["updatedAt"])
		}

		deleted := e.do(t, "DELETE", one, auth, "")
		deleted.expect(t, http.StatusOK, "")
		v.okEnvelope(t, deleted)
		if msg, _ := deleted.body["message"].(string); msg == "" {
			t.Fatalf("delete message missing: %s", deleted.raw)
		}
		if v.name == "B" && deleted.body["data"] != nil {
			t.Fatalf("B delete data = %v, want null", deleted.body["data"])
		}
		e.do(t, "GET", one, auth, "").expect(t, http.StatusNotFound, "not_found")
		e.do(t, "DELETE", one, auth, "").expect(t, http.StatusNotFound, "not_found")
		if items := e.do(t, "GET", v.collection, auth, "").list(t); len(items) != 0 {
			t.Fatalf("deleted webhook still listed: %v", items)
		}
	}, withClock)
}

// TestUpdateResetsStatus proves PUT moves a webhook back to the initial status, whatever the
// delivery engine had set, and enables a disabled webhook (a new URL is a new receiver).
func TestUpdateResetsStatus(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		id := int64(e.do(t, "POST", v.collection, auth, createBody("https://a.example.com/", v.eventType)).data(t)["id"].(float64))
		failing := map[string]string{"A": model.StatusFailed, "B": model.StatusFailing}[v.name]
		if _, err := e.db.NewUpdate().Table("webhooks").Set("status = ?", failing).Where("id = ?", id).Exec(context.Background()); err != nil {
			t.Fatal(err)
		}
		e.do(t, "POST", fmt.Sprintf("%s/%d/disable", v.collection, id), auth, "").expect(t, http.StatusOK, "")
		r := e.do(t, "PUT", fmt.Sprintf("%s/%d", v.collection, id), auth, `{"url":"https://b.example.com/"}`)
		r.expect(t, http.StatusOK, "")
		if r.data(t)["status"] != v.initialStatus {
			t.Fatalf("status after update = %v, want %s", r.data(t)["status"], v.initialStatus)
		}
		checkDisabled(t, v, r.data(t), false, v.initialStatus)
	})
}

// TestRevokedKeyIsRefusedAtOnce: a key revoked (webhookd apikey revoke) answers 401 on its very
// next request, in the variant's error envelope, while the account's other key keeps working.
func TestRevokedKeyIsRefusedAtOnce(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		ctx := context.Background()
		email := fmt.Sprintf("revoke-%s-%d@example.com", v.name, accountSeq.Add(1))
		key, _, err := model.CreateAPIKey(ctx, e.db, email, "to revoke")
		if err != nil {
			t.Fatal(err)
		}
		other, _, err := model.CreateAPIKey(ctx, e.db, email, "kept")
		if err != nil {
			t.Fatal(err)
		}
		e.do(t, "GET", v.collection, v.auth(key), "").expect(t, 200, "")
		keys, err := model.ListAPIKeys(ctx, e.db, email)
		if err != nil || len(keys) != 2 {
			t.Fatalf("keys %+v, %v", keys, err)
		}
		if _, _, err := model.RevokeAPIKey(ctx, e.db, keys[0].ID); err != nil {
			t.Fatal(err)
		}
		r := e.do(t, "GET", v.collection, v.auth(key), "")
		r.expect(t, 401, "unauthorized")
		v.errEnvelope(t, r)
		e.do(t, "GET", v.collection, v.auth(other), "").expect(t, 200, "")
	})
}

// TestErrors covers every row of DESIGN.md's error table for both variants and both databases.
func TestErrors(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := newKey(t, e.db)
		auth := v.auth(key)
		id := int64(e.do(t, "POST", v.collection, auth, createBody("https://hooks.example.com/", v.eventType)).data(t)["id"].(float64))
		one := fmt.Sprintf("%s/%d", v.collection, id)
		cases := []struct {
			name, method, path string
			auth               func(*http.Request)
			body               string
			status             int
			code, field        string
		}{
			{"malformed JSON", "POST", v.collection, auth, `{"url": "https://x.example.com",`, 400, "invalid_request", ""},
			{"not an object", "POST", v.collection, auth, `["https://x.example.com"]`, 400, "invalid_request", ""},
			{"wrong type", "POST", v.collection, auth, `{"url": 42, "eventType": "` + v.eventType + `"}`, 400, "invalid_request", "url"},
			{"unknown field", "POST", v.collection, auth, `{"url": "https://x.example.com", "eventType": "` + v.eventType + `", "events": []}`, 400, "invalid_request", "events"},
			{"trailing data", "POST", v.collection, auth, createBody("https://x.example.com", v.eventType) + `{}`, 400, "invalid_request", ""},
			{"empty body", "POST", v.collection, auth, "", 400, "invalid_request", ""},
			{"wrong type on update", "PUT", one, auth, `{"url": true}`, 400, "invalid_request", "url"},
			{"non-numeric id", "GET", v.collection + "/abc", auth, "", 400, "invalid_request", "id"},
			{"limit not a number", "GET", v.collection + "?limit=ten", auth, "", 400, "invalid_request", "limit"},
			{"no key", "GET", v.collection, nil, "", 401, "unauthorized", ""},
			{"unknown key", "GET", v.collection, v.auth("whk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"), "", 401, "unauthorized", ""},
			{"malformed key", "GET", v.collection, v.auth("not-a-key"), "", 401, "unauthorized", ""},
			{"other variant's header", "GET", v.collection, v.wrongAuth(key), "", 401, "unauthorized", ""},
			{"unknown id", "GET", v.collection + "/999999", auth, "", 404, "not_found", ""},
			{"unknown id update", "PUT", v.collection + "/999999", auth, `{"url":"https://x.example.com"}`, 404, "not_found", ""},
			{"unknown id delete", "DELETE", v.collection + "/999999", auth, "", 404, "not_found", ""},
			{"unknown id secret", "GET", v.collection + "/999999/secret", auth, "", 404, "not_found", ""},
			{"too large", "POST", v.collection, auth, `{"url":"https://x.example.com/` + strings.Repeat("a", 70<<10) + `","eventType":"` + v.eventType + `"}`, 413, "payload_too_large", ""},
			{"missing url", "POST", v.collection, auth, `{"eventType":"` + v.eventType + `"}`, 422, "validation_failed", "url"},
			{"missing eventType", "POST", v.collection, auth, `{"url":"https://x.example.com"}`, 422, "validation_failed", "eventType"},
			{"unknown eventType", "POST", v.collection, auth, createBody("https://x.example.com", "campaign.exploded"), 422, "validation_failed", "eventType"},
			{"other variant's eventType", "POST", v.collection, auth, createBody("https://x.example.com", v.foreignEventType), 422, "validation_failed", "eventType"},
			{"webhook.test not registrable", "POST", v.collection, auth, createBody("https://x.example.com", "webhook.test"), 422, "validation_failed", "eventType"},
			{"http url", "POST", v.collection, auth, createBody("http://x.example.com", v.eventType), 422, "validation_failed", "url"},
			{"relative url", "POST", v.collection, auth, createBody("/hooks", v.eventType), 422, "validation_failed", "url"},
			{"userinfo", "POST", v.collection, auth, createBody("https://user:pass@x.example.com", v.eventType), 422, "validation_failed", "url"},
			{"url too long", "POST", v.collection, auth, createBody("https://x.example.com/"+strings.Repeat("a", 2048), v.eventType), 422, "validation_failed", "url"},
			{"loopback", "POST", v.collection, auth, createBody("https://127.0.0.1/hook", v.eventType), 422, "validation_failed", "url"},
			{"localhost", "POST", v.collection, auth, createBody("https://localhost:8443/hook", v.eventType), 422, "validation_failed", "url"},
			{"private", "POST", v.collection, auth, createBody("https://10.1.2.3/hook", v.eventType), 422, "validation_failed", "url"},
			{"link-local metadata", "POST", v.collection, auth, createBody("https://169.254.169.254/latest/meta-data", v.eventType), 422, "validation_failed", "url"},
			{"cgnat", "POST", v.collection, auth, createBody("https://100.64.0.1/hook", v.eventType), 422, "validation_failed", "url"},
			{"ipv4-mapped loopback", "POST", v.collection, auth, createBody("https://[::ffff:127.0.0.1]/hook", v.eventType), 422, "validation_failed", "url"},
			{"ipv6 loopback", "POST", v.collection, auth, createBody("https://[::1]/hook", v.eventType), 422, "validation_failed", "url"},
			{"decimal ip", "POST", v.collection, auth, createBody("https://2130706433/hook", v.eventType), 422, "validation_failed", "url"},
			{"hex ip", "POST", v.collection, auth, createBody("https://0x7f000001/hook", v.eventType), 422, "validation_failed", "url"},
			{"octal ip", "POST", v.collection, auth, createBody("https://0177.0.0.1/hook", v.eventType), 422, "validation_failed", "url"},
			{"short ip", "POST", v.collection, auth, createBody("https://127.1/hook", v.eventType), 422, "validation_failed", "url"},
			{"blocked url on update", "PUT", one, auth, `{"url":"https://192.168.1.1/"}`, 422, "validation_failed", "url"},
			{"eventType on update", "PUT", one, auth, `{"url":"https://x.example.com","eventType":"` + v.eventType + `"}`, 422, "validation_failed", "eventType"},
			{"missing url on update", "PUT", one, auth, `{}`, 422, "validation_failed", "url"},
			{"limit out of range", "GET", v.collection + "?limit=500", auth, "", 422, "validation_failed", "limit"},
			{"unknown status filter", "GET", v.collection + "?status=exploded", auth, "", 422, "validation_failed", "status"},
			{"unknown eventType filter", "GET", v.collection + "?eventType=nope", auth, "", 422, "validation_failed", "eventType"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				r := e.do(t, tc.method, tc.path, tc.auth, tc.body)
				r.expect(t, tc.status, tc.code)
				v.errEnvelope(t, r)
				if tc.field != "" && r.body["field"] != tc.field {
					t.Fatalf("field = %v, want %s: %s", r.body["field"], tc.field, r.raw)
				}
				if tc.field != "" && !strings.Contains(r.body["message"].(string), tc.field) {
					t.Fatalf("message does not name %s: %s", tc.field, r.raw)
				}
			})
		}
		// None of the refused writes changed the webhook.
		r := e.do(t, "GET", one, auth, "")
		r.expect(t, http.StatusOK, "")
		if r.data(t)["url"] != "https://hooks.example.com/" {
			t.Fatalf("a refused request changed the webhook: %s", r.raw)
		}
		if n := len(e.do(t, "GET", v.collection, auth, "").list(t)); n != 1 {
			t.Fatalf("refused creates left %d webhooks, want 1", n)
		}
	})
}

// TestTenancy proves another account's webhook is 404 for every operation and is left untouched.
func TestTenancy(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		owner := v.auth(newKey(t, e.db))
		intruder := v.auth(newKey(t, e.db))
		created := e.do(t, "POST", v.collection, owner, createBody("https://owner.example.com/", v.eventType)).data(t)
		one := fmt.Sprintf("%s/%d", v.collection, int64(created["id"].(float64)))

		e.do(t, "GET", one, intruder, "").expect(t, 404, "not_found")
		e.do(t, "PUT", one, intruder, `{"url":"https://intruder.example.com/"}`).expect(t, 404, "not_found")
		e.do(t, "PUT", one, intruder, `{"url":"http://bad"}`).expect(t, 404, "not_found")
		e.do(t, "PATCH", one, intruder, `{"rateLimit":1,"maxInFlight":1}`).expect(t, 404, "not_found")
		e.do(t, "PATCH", one, intruder, `{}`).expect(t, 404, "not_found")
		e.do(t, "DELETE", one, intruder, "").expect(t, 404, "not_found")
		e.do(t, "GET", one+"/secret", intruder, "").expect(t, 404, "not_found")
		e.do(t, "POST", one+"/secret/rotate", intruder, "").expect(t, 404, "not_found")
		if n := len(e.do(t, "GET", v.collection, intruder, "").list(t)); n != 0 {
			t.Fatalf("intruder lists %d webhooks", n)
		}

		after := e.do(t, "GET", one, owner, "")
		after.expect(t, 200, "")
		for _, f := range []string{"url", "status", "createdAt", "updatedAt", "rateLimit", "maxInFlight"} {
			if after.data(t)[f] != created[f] {
				t.Fatalf("%s changed from %v to %v", f, created[f], after.data(t)[f])
			}
		}
		if s := e.do(t, "GET", one+"/secret", owner, "").data(t)["secret"]; s != created["secret"] {
			t.Fatal("secret changed by another account")
		}
	})
}

// TestVariantIsolation: one account's webhooks of one variant are invisible through the other.
func TestVariantIsolation(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t))
			key := newKey(t, e.db)
			a, bv := variants[0], variants[1]
			id := int64(e.do(t, "POST", a.collection, a.auth(key), createBody("https://x.example.com/", a.eventType)).data(t)["id"].(float64))
			e.do(t, "GET", fmt.Sprintf("%s/%d", bv.collection, id), bv.auth(key), "").expect(t, 404, "not_found")
			e.do(t, "PATCH", fmt.Sprintf("%s/%d", bv.collection, id), bv.auth(key), `{"rateLimit":1}`).expect(t, 404, "not_found")
			if r := e.do(t, "GET", fmt.Sprintf("%s/%d", a.collection, id), a.auth(key), ""); r.data(t)["rateLimit"] != nil {
				t.Fatalf("variant B changed a variant A webhook's limit: %s", r.raw)
			}
			if n := len(e.do(t, "GET", bv.collection, bv.auth(key), "").list(t)); n != 0 {
				t.Fatalf("variant B lists %d variant A webhooks", n)
			}
		})
	}
}

func TestPaginationAndFilters(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		types := map[string][]string{"A": {"campaign.created", "campaign.updated"}, "B": {"lead.captured", "website.published"}}[v.name]
		var ids []float64
		for i := 0; i < 5; i++ {
			r := e.do(t, "POST", v.collection, auth, createBody(fmt.Sprintf("https://h%d.example.com/", i), types[i%2]))
			r.expect(t, 201, "")
			ids = append(ids, r.data(t)["id"].(float64))
		}
		var seen []float64
		path := v.collection + "?limit=2"
		for pages := 0; path != ""; pages++ {
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
			r := e.do(t, "GET", path, auth, "")
			r.expect(t, 200, "")
			for _, it := range r.list(t) {
				seen = append(seen, it.(map[string]any)["id"].(float64))
			}
			path = ""
			if link := r.header.Get("Link"); link != "" {
				path = strings.TrimSuffix(strings.TrimPrefix(strings.Split(link, ";")[0], "<"), ">")
			}
		}
		if fmt.Sprint(seen) != fmt.Sprint(ids) {
			t.Fatalf("paged ids = %v, want %v", seen, ids)
		}
		filtered := e.do(t, "GET", v.collection+"?eventType="+types[1], auth, "").list(t)
		if len(filtered) != 2 {
			t.Fatalf("eventType filter returned %d, want 2", len(filtered))
		}
		if n := len(e.do(t, "GET", v.collection+"?status="+v.initialStatus, auth, "").list(t)); n != 5 {
			t.Fatalf("status filter returned %d, want 5", n)
		}
		other := map[string]string{"A": "failed", "B": "failing"}[v.name]
		if n := len(e.do(t, "GET", v.collection+"?status="+other, auth, "").list(t)); n != 0 {
			t.Fatalf("status=%s returned %d, want 0", other, n)
		}
	})
}

func TestWebhookLimit(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			e := newEnv(t, b.Open(t), func(c *envConfig) { c.MaxWebhooks = 2 })
			v := variants[0]
			auth := v.auth(newKey(t, e.db))
			for i := 0; i < 2; i++ {
				e.do(t, "POST", v.collection, auth, createBody("https://x.example.com/", v.eventType)).expect(t, 201, "")
			}
			e.do(t, "POST", v.collection, auth, createBody("https://x.example.com/", v.eventType)).expect(t, 422, "limit_exceeded")
		})
	}
}

// TestSecrets: the secret is returned at create and by GET /secret, rotation replaces it, and
// neither the plain secret nor the plain API key is anywhere in the database.
func TestSecrets(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := newKey(t, e.db)
		auth := v.auth(key)
		created := e.do(t, "POST", v.collection, auth, createBody("https://x.example.com/", v.eventType)).data(t)
		one := fmt.Sprintf("%s/%d", v.collection, int64(created["id"].(float64)))
		secret := created["secret"].(string)

		got := e.do(t, "GET", one+"/secret", auth, "")
		got.expect(t, 200, "")
		if got.data(t)["secret"] != secret {
			t.Fatalf("GET secret = %v, want the create response's", got.data(t)["secret"])
		}
		rotated := e.do(t, "POST", one+"/secret/rotate", auth, "")
		rotated.expect(t, 200, "")
		next := rotated.data(t)["secret"].(string)
		if next == secret || !strings.HasPrefix(next, "whsec_") {
			t.Fatalf("rotated secret = %q", next)
		}
		if e.do(t, "GET", one+"/secret", auth, "").data(t)["secret"] != next {
			t.Fatal("GET secret after rotation is not the new secret")
		}

		dump := dumpDatabase(t, e)
		for name, plain := range map[string]string{"api key": key, "secret": secret, "rotated secret": next} {
			if strings.Contains(dump, plain) {
				t.Fatalf("the plain %s is stored in the database", name)
			}
		}
		// Guard against a dump that sees nothing: the webhook's URL must be in it.
		if !strings.Contains(dump, "https://x.example.com/") {
			t.Fatal("database dump is empty; the test would prove nothing")
		}
	})
}

// dumpDatabase renders every cell of every table of interest as text.
func dumpDatabase(t *testing.T, e *testEnv) string {
	t.Helper()
	var b strings.Builder
	for _, table := range []string{"accounts", "api_keys", "webhooks", "webhook_previous_secrets"} {
		rows, err := e.db.QueryContext(context.Background(), "SELECT * FROM "+table)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			for _, v := range vals {
				b.WriteString(v.String)
				b.WriteByte('\n')
			}
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}
