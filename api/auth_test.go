package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestWebhookAuth (issue 31, part 2): an authentication to the receiver set at create is stored
// sealed and shown with its password or client secret redacted by every read; a PUT that leaves it
// out keeps it, null clears it, an object replaces it, as PATCH does; an unknown type, a missing
// field, a token URL the address rules refuse and a custom Authorization header beside it are
// refused naming the field, and nothing is stored.
func TestWebhookAuth(t *testing.T) {
	const password, clientSecret = "pw-0123456789-secret", "cs-9876543210-secret"
	basic := `{"type":"basic","username":"u","password":"` + password + `"}`
	oauth := `{"type":"oauth2","tokenUrl":"https://idp.example.com/token","clientId":"cid","clientSecret":"` + clientSecret +
		`","scopes":["a","b"],"audience":"https://api.example.com"}`
	basicShown := `{"password":"••••••••","type":"basic","username":"u"}` // as json.Marshal orders a map
	oauthShown := `{"audience":"https://api.example.com","clientId":"cid","clientSecret":"••••••••","scopes":["a","b"],"tokenUrl":"https://idp.example.com/token","type":"oauth2"}`
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := v.auth(newKey(t, e.db))
		shows := func(what string, r response, want string) {
			t.Helper()
			r.expect(t, r.status, "")
			if strings.Contains(string(r.raw), password) || strings.Contains(string(r.raw), clientSecret) {
				t.Fatalf("%s shows a secret: %s", what, r.raw)
			}
			if got, _ := json.Marshal(r.data(t)["auth"]); string(got) != want {
				t.Fatalf("%s: auth = %s, want %s", what, got, want)
			}
		}
		created := e.do(t, "POST", v.collection, key, limitsBody("https://h.example.com/", v.eventType, `"auth":`+basic))
		created.expect(t, http.StatusCreated, "")
		shows("create", created, basicShown)
		id := created.data(t)["id"]
		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(id))
		stored := loadWebhook(t, e, id)
		if stored.Auth == nil || strings.Contains(*stored.Auth, password) || strings.Contains(*stored.Auth, "basic") {
			t.Fatalf("stored auth = %v, want ciphertext", stored.Auth)
		}
		shows("GET", e.do(t, "GET", one, key, ""), basicShown)
		list := e.do(t, "GET", v.collection, key, "")
		list.expect(t, http.StatusOK, "")
		if strings.Contains(string(list.raw), password) || !strings.Contains(string(list.raw), `"type":"basic"`) {
			t.Fatalf("list: %s", list.raw)
		}
		plain := e.do(t, "POST", v.collection, key, createBody("https://p.example.com/", v.eventType))
		plain.expect(t, http.StatusCreated, "")
		if a, ok := plain.data(t)["auth"]; !ok || a != nil {
			t.Fatalf("a webhook without auth shows auth %v (present %v), want null", a, ok)
		}

		// PUT without auth keeps it; an object replaces it; null clears it.
		shows("PUT without auth", e.do(t, "PUT", one, key, `{"url":"https://h2.example.com/"}`), basicShown)
		shows("PUT with oauth2", e.do(t, "PUT", one, key, `{"url":"https://h2.example.com/","auth":`+oauth+`}`), oauthShown)
		if w := loadWebhook(t, e, id); w.Auth == nil || strings.Contains(*w.Auth, clientSecret) || strings.Contains(*w.Auth, "idp.example.com") {
			t.Fatalf("stored auth = %v, want ciphertext", w.Auth)
		}
		cleared := e.do(t, "PUT", one, key, `{"url":"https://h2.example.com/","auth":null}`)
		cleared.expect(t, http.StatusOK, "")
		if cleared.data(t)["auth"] != nil || loadWebhook(t, e, id).Auth != nil {
			t.Fatalf("PUT auth null: auth %v", cleared.data(t)["auth"])
		}
		// PATCH: an object sets it, leaving it out keeps it, null removes it.
		shows("PATCH", e.do(t, "PATCH", one, key, `{"auth":`+oauth+`}`), oauthShown)
		shows("PATCH without auth", e.do(t, "PATCH", one, key, `{"rateLimit":5}`), oauthShown)
		if got := e.do(t, "PATCH", one, key, `{"auth":null}`).data(t)["auth"]; got != nil {
			t.Fatalf("PATCH auth null: auth %v", got)
		}
		minimal := `{"type":"oauth2","tokenUrl":"https://idp.example.com/t","clientId":"c","clientSecret":"s"}`
		shows("PATCH oauth2 without scopes", e.do(t, "PATCH", one, key, `{"auth":`+minimal+`}`),
			`{"audience":null,"clientId":"c","clientSecret":"••••••••","scopes":null,"tokenUrl":"https://idp.example.com/t","type":"oauth2"}`)
		shows("PATCH before the refusals", e.do(t, "PATCH", one, key, `{"auth":`+basic+`}`), basicShown)
		sealed := *loadWebhook(t, e, id).Auth

		// A custom Authorization header beside auth, whichever of the two the request holds.
		e.do(t, "PATCH", one, key, `{"headers":{"authorization":"Bearer x"}}`).expectError(t, v, http.StatusBadRequest, "headers.authorization")
		e.do(t, "POST", v.collection, key, limitsBody("https://h5.example.com/", v.eventType,
			`"auth":`+basic+`,"headers":{"Authorization":"Bearer x"}`)).expectError(t, v, http.StatusBadRequest, "headers.Authorization")
		withHeader := e.do(t, "POST", v.collection, key, limitsBody("https://h6.example.com/", v.eventType, `"headers":{"Authorization":"Bearer abcdefghijkl"}`))
		withHeader.expect(t, http.StatusCreated, "")
		other := fmt.Sprintf("%s/%s", v.collection, jsonNumber(withHeader.data(t)["id"]))
		e.do(t, "PATCH", other, key, `{"auth":`+basic+`}`).expectError(t, v, http.StatusBadRequest, "headers.Authorization")
		e.do(t, "PUT", other, key, `{"url":"https://h6.example.com/","auth":`+basic+`}`).expectError(t, v, http.StatusBadRequest, "headers.Authorization")
		// Both in one request: the header removed, auth set.
		shows("PATCH headers null with auth", e.do(t, "PATCH", other, key, `{"headers":null,"auth":`+basic+`}`), basicShown)

		for _, c := range []struct {
			name, auth, field string
		}{
			{"unknown type", `{"type":"digest","username":"u","password":"p"}`, "auth.type"},
			{"no type", `{"username":"u","password":"p"}`, "auth.type"},
			{"basic without password", `{"type":"basic","username":"u"}`, "auth.password"},
			{"basic without username", `{"type":"basic","password":"p"}`, "auth.username"},
			{"basic with a colon", `{"type":"basic","username":"a:b","password":"p"}`, "auth.username"},
			{"oauth2 without tokenUrl", `{"type":"oauth2","clientId":"c","clientSecret":"s"}`, "auth.tokenUrl"},
			{"oauth2 without clientId", `{"type":"oauth2","tokenUrl":"https://idp.example.com/t","clientSecret":"s"}`, "auth.clientId"},
			{"oauth2 without clientSecret", `{"type":"oauth2","tokenUrl":"https://idp.example.com/t","clientId":"c"}`, "auth.clientSecret"},
			{"http token URL", `{"type":"oauth2","tokenUrl":"http://idp.example.com/t","clientId":"c","clientSecret":"s"}`, "auth.tokenUrl"},
			{"loopback token URL", `{"type":"oauth2","tokenUrl":"https://127.0.0.1/t","clientId":"c","clientSecret":"s"}`, "auth.tokenUrl"},
			{"metadata token URL", `{"type":"oauth2","tokenUrl":"https://169.254.169.254/t","clientId":"c","clientSecret":"s"}`, "auth.tokenUrl"},
			{"scopes not a list", `{"type":"oauth2","tokenUrl":"https://idp.example.com/t","clientId":"c","clientSecret":"s","scopes":"a b"}`, "auth.scopes"},
			{"unknown field", `{"type":"basic","username":"u","password":"p","realm":"x"}`, "auth"},
			{"not an object", `"basic"`, "auth"},
		} {
			t.Run(c.name, func(t *testing.T) {
				e.do(t, "PATCH", one, key, `{"auth":`+c.auth+`}`).expectError(t, v, http.StatusBadRequest, c.field)
				e.do(t, "PUT", one, key, `{"url":"https://h3.example.com/","auth":`+c.auth+`}`).expectError(t, v, http.StatusBadRequest, c.field)
				before := len(e.do(t, "GET", v.collection, key, "").body["data"].([]any))
				e.do(t, "POST", v.collection, key, limitsBody("https://h4.example.com/", v.eventType, `"auth":`+c.auth)).
					expectError(t, v, http.StatusBadRequest, c.field)
				if after := len(e.do(t, "GET", v.collection, key, "").body["data"].([]any)); after != before {
					t.Fatalf("a refused create stored a webhook: %d webhooks, were %d", after, before)
				}
				if w := loadWebhook(t, e, id); w.Auth == nil || *w.Auth != sealed || w.URL != "https://h2.example.com/" {
					t.Fatalf("a refused change changed the webhook: %+v", w)
				}
			})
		}
	})
}
