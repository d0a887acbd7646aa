package api_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// auditKey makes an account with a key and returns the key, its row id and the owner's e-mail.
func auditKey(t *testing.T, e *testEnv) (key, id, email string) {
	t.Helper()
	email = fmt.Sprintf("audit%d@example.com", accountSeq.Add(1))
	key, _, err := model.CreateAPIKey(context.Background(), e.db, email, "audit")
	if err != nil {
		t.Fatal(err)
	}
	keys, err := model.ListAPIKeys(context.Background(), e.db, email)
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	return key, strconv.FormatInt(keys[0].ID, 10), email
}

// auditEntries follows GET <prefix>/audit-log's pages of limit entries to the end.
func auditEntries(t *testing.T, e *testEnv, v variantCase, auth func(*http.Request), limit int) []map[string]any {
	t.Helper()
	var out []map[string]any
	path := strings.TrimSuffix(v.collection, "/webhooks") + "/audit-log?limit=" + strconv.Itoa(limit)
	for path != "" {
		r := e.do(t, "GET", path, auth, "")
		r.expect(t, http.StatusOK, "")
		v.okEnvelope(t, r)
		page := r.list(t)
		if len(page) > limit {
			t.Fatalf("a page of %d entries, limit %d", len(page), limit)
		}
		for _, x := range page {
			out = append(out, x.(map[string]any))
		}
		path = ""
		if link := r.header.Get("Link"); link != "" {
			target := strings.TrimSuffix(strings.TrimPrefix(strings.Split(link, ";")[0], "<"), ">")
			u, err := url.Parse(target)
			if err != nil {
				t.Fatal(err)
			}
			path = u.RequestURI()
		}
	}
	return out
}

// TestAuditLogAPI: every change made through the API appears once in GET <prefix>/audit-log, newest
// first across pages, with the key as its actor and the fields it changed; a change that changes
// nothing and a refused one leave no entry; another account and the other variant see none of it;
// and no secret or header value made in the changes is anywhere in the table.
func TestAuditLogAPI(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key, keyID, email := auditKey(t, e)
		auth := v.auth(key)
		headerValue, headerValue2, password := "hv-"+v.name+"-first-header-value", "hv-"+v.name+"-second-header-value", "pw-"+v.name+"-basic-password"
		raw := make([]byte, 32)
		if _, err := rand.Read(raw); err != nil {
			t.Fatal(err)
		}
		own := "whsec_" + base64.StdEncoding.EncodeToString(raw)
		secrets := []string{key, headerValue, headerValue2, password, own}

		created := e.do(t, "POST", v.collection, auth, fmt.Sprintf(`{"url":"https://r.example.com/a","eventType":%q,"headers":{"X-Token":%q},"auth":{"type":"basic","username":"u","password":%q}}`,
			v.eventType, headerValue, password))
		created.expect(t, http.StatusCreated, "")
		hookID := jsonNumber(created.data(t)["id"])
		hook := v.collection + "/" + hookID
		secrets = append(secrets, created.data(t)["secret"].(string))
		e.do(t, "PUT", hook, auth, `{"url":"https://r.example.com/b"}`).expect(t, http.StatusOK, "")
		e.do(t, "PATCH", hook, auth, fmt.Sprintf(`{"rateLimit":5,"headers":{"X-Token":%q}}`, headerValue2)).expect(t, http.StatusOK, "")
		e.do(t, "POST", hook+"/secret/rotate", auth, fmt.Sprintf(`{"secret":%q}`, own)).expect(t, http.StatusOK, "")
		e.do(t, "POST", hook+"/disable", auth, "").expect(t, http.StatusOK, "")
		e.do(t, "POST", hook+"/disable", auth, "").expect(t, http.StatusOK, "") // already disabled: no change
		e.do(t, "POST", hook+"/enable", auth, "").expect(t, http.StatusOK, "")
		e.do(t, "POST", hook+"/retry", auth, "").expect(t, http.StatusServiceUnavailable, "") // no Temporal: nothing done
		ch := e.do(t, "POST", v.channels(), auth, `{"kind":"webhook","url":"https://ops.example.com/n"}`)
		ch.expect(t, http.StatusCreated, "")
		chID := jsonNumber(ch.data(t)["id"])
		secrets = append(secrets, ch.data(t)["secret"].(string))
		e.do(t, "PATCH", v.channels()+"/"+chID, auth, `{"types":["webhook.failing"]}`).expect(t, http.StatusOK, "")
		e.do(t, "DELETE", v.channels()+"/"+chID, auth, "").expect(t, http.StatusOK, "")
		link := e.do(t, "POST", portalPath(v), auth, `{"readOnly":true}`)
		link.expect(t, http.StatusCreated, "")
		secrets = append(secrets, link.data(t)["url"].(string))
		e.do(t, "DELETE", hook, auth, "").expect(t, http.StatusOK, "")

		entries := auditEntries(t, e, v, auth, 3)
		want := []struct{ action, target, id string }{
			{"webhook.delete", "webhook", hookID},
			{"portal_link.create", "portal_link", ""},
			{"channel.delete", "channel", chID},
			{"channel.update", "channel", chID},
			{"channel.create", "channel", chID},
			{"webhook.enable", "webhook", hookID},
			{"webhook.disable", "webhook", hookID},
			{"webhook.secret.rotate", "webhook", hookID},
			{"webhook.settings", "webhook", hookID},
			{"webhook.update", "webhook", hookID},
			{"webhook.create", "webhook", hookID},
		}
		var got []string
		for _, en := range entries {
			got = append(got, en["action"].(string))
		}
		if len(entries) != len(want) {
			t.Fatalf("entries %v, want %d: %v", got, len(want), want)
		}
		last := int64(1 << 62)
		for i, w := range want {
			en := entries[i]
			target := en["target"].(map[string]any)
			if en["action"] != w.action || target["type"] != w.target || w.id != "" && target["id"] != w.id {
				t.Errorf("entry %d: %v on %v, want %s on %s %s (all: %v)", i, en["action"], target, w.action, w.target, w.id, got)
			}
			actor := en["actor"].(map[string]any)
			if !reflect.DeepEqual(actor, map[string]any{"kind": "api_key", "id": keyID, "label": email}) {
				t.Errorf("entry %d (%s): actor %v, want the key %s of %s", i, w.action, actor, keyID, email)
			}
			id := int64(en["id"].(float64))
			if id >= last {
				t.Errorf("entry %d (%s): id %d after %d: not newest first", i, w.action, id, last)
			}
			last = id
		}
		changes := func(action string) map[string]any {
			for _, en := range entries {
				if en["action"] == action {
					return en["changes"].(map[string]any)
				}
			}
			return nil
		}
		if c := changes("webhook.settings"); !reflect.DeepEqual(c["rateLimit"], map[string]any{"new": float64(5)}) ||
			!reflect.DeepEqual(c["headers"], map[string]any{"redacted": true}) {
			t.Errorf("webhook.settings changes %v: want rateLimit set to 5 (no old: there was none) and headers redacted", c)
		}
		if c := changes("webhook.update"); !reflect.DeepEqual(c["url"], map[string]any{"old": "https://r.example.com/a", "new": "https://r.example.com/b"}) {
			t.Errorf("webhook.update changes %v: want the url's old and new", c)
		}
		if c := changes("webhook.create"); !reflect.DeepEqual(c["auth"], map[string]any{"redacted": true}) || !reflect.DeepEqual(c["secret"], map[string]any{"redacted": true}) {
			t.Errorf("webhook.create changes %v: want auth and secret redacted", c)
		}
		if c := changes("channel.create"); !reflect.DeepEqual(c["kind"], map[string]any{"new": "webhook"}) ||
			!reflect.DeepEqual(c["url"], map[string]any{"new": "https://ops.example.com/n"}) {
			t.Errorf("channel.create changes %v: want its kind and url", c)
		}
		if c := changes("channel.update"); !reflect.DeepEqual(c["types"], map[string]any{"new": []any{"webhook.failing"}}) {
			t.Errorf("channel.update changes %v: want its types from the defaults (no old) to the one named", c)
		}
		if c := changes("webhook.secret.rotate"); !reflect.DeepEqual(c, map[string]any{"secret": map[string]any{"redacted": true}}) {
			t.Errorf("webhook.secret.rotate changes %v: want the secret alone, redacted", c)
		}

		// Another account, and this account's other variant, see none of it.
		other, _, _ := auditKey(t, e)
		if n := len(auditEntries(t, e, v, v.auth(other), 50)); n != 0 {
			t.Errorf("another account's audit log holds %d entries", n)
		}
		for _, ov := range variants {
			if ov.name != v.name {
				if n := len(auditEntries(t, e, ov, ov.auth(key), 50)); n != 0 {
					t.Errorf("variant %s's audit log holds %d entries of variant %s", ov.name, n, v.name)
				}
			}
		}

		// No secret, anywhere in the table: neither a plain value nor the sealed one stored.
		var hooks []model.Webhook
		if err := e.db.NewSelect().Model(&hooks).WhereAllWithDeleted().Where("account_id = (SELECT account_id FROM webhooks WHERE id = ?)", hookID).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, h := range hooks {
			for _, sealed := range []*string{&h.Secret, h.Headers, h.Auth} {
				if sealed != nil && *sealed != "" {
					secrets = append(secrets, *sealed)
				}
			}
		}
		var rows []model.AuditEntry
		if err := e.db.NewSelect().Model(&rows).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		table := fmt.Sprintf("%+v", rows)
		for _, s := range secrets {
			if s == "" || strings.Contains(table, s) {
				t.Errorf("the audit log holds a secret or header value %q", s)
			}
		}
		if !slices.ContainsFunc(rows, func(r model.AuditEntry) bool {
			return strings.Contains(r.Changes, "X-Token") || strings.Contains(r.Changes, "headers")
		}) {
			t.Errorf("no entry names the headers that changed")
		}
	})
}

// TestAuditLogParams: a malformed cursor or limit is refused naming the field.
func TestAuditLogParams(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key, _, _ := auditKey(t, e)
		path := strings.TrimSuffix(v.collection, "/webhooks") + "/audit-log"
		e.do(t, "GET", path+"?before=x", v.auth(key), "").expectError(t, v, http.StatusBadRequest, "before")
		e.do(t, "GET", path+"?before=0", v.auth(key), "").expectError(t, v, http.StatusBadRequest, "before")
		e.do(t, "GET", path+"?limit=201", v.auth(key), "").expectError(t, v, http.StatusUnprocessableEntity, "limit")
	})
}
