package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestWebhookHeaders (issue 31): custom headers set at create are stored sealed and shown with
// their values redacted by every read; a PUT that leaves them out keeps them, null clears them, an
// object replaces them all, as PATCH does; a reserved, malformed or oversized header is refused
// naming it, and nothing is stored.
func TestWebhookHeaders(t *testing.T) {
	const token = "tok-0123456789-abcd" // 19 characters: shown as ••••abcd
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		created := e.do(t, "POST", v.collection, auth, limitsBody("https://h.example.com/", v.eventType,
			`"headers":{"X-Api-Token":"`+token+`","X-Short":"short"}`))
		created.expect(t, http.StatusCreated, "")
		want := `{"X-Api-Token":"••••abcd","X-Short":"••••••••"}`
		shows := func(what string, r response, want string) {
			t.Helper()
			if strings.Contains(string(r.raw), token) || strings.Contains(string(r.raw), `"short"`) {
				t.Fatalf("%s shows a header's value: %s", what, r.raw)
			}
			if got, _ := json.Marshal(r.data(t)["headers"]); string(got) != want {
				t.Fatalf("%s: headers = %s, want %s", what, got, want)
			}
		}
		shows("create", created, want)
		id := created.data(t)["id"]
		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(id))
		stored := loadWebhook(t, e, id)
		if stored.Headers == nil || strings.Contains(*stored.Headers, token) || strings.Contains(*stored.Headers, "X-Api-Token") {
			t.Fatalf("stored headers = %v, want ciphertext", stored.Headers)
		}
		shows("GET", e.do(t, "GET", one, auth, ""), want)
		list := e.do(t, "GET", v.collection, auth, "")
		list.expect(t, http.StatusOK, "")
		if strings.Contains(string(list.raw), token) || !strings.Contains(string(list.raw), "••••abcd") {
			t.Fatalf("list: %s", list.raw)
		}
		plain := e.do(t, "POST", v.collection, auth, createBody("https://p.example.com/", v.eventType))
		plain.expect(t, http.StatusCreated, "")
		if h, ok := plain.data(t)["headers"]; !ok || h != nil {
			t.Fatalf("a webhook without headers shows headers %v (present %v), want null", h, ok)
		}

		// PUT without headers keeps them; an object replaces them all; null clears them.
		shows("PUT without headers", e.do(t, "PUT", one, auth, `{"url":"https://h2.example.com/"}`), want)
		shows("PUT with an object", e.do(t, "PUT", one, auth, `{"url":"https://h2.example.com/","headers":{"Authorization":"Bearer abcdefghijkl"}}`),
			`{"Authorization":"••••ijkl"}`)
		cleared := e.do(t, "PUT", one, auth, `{"url":"https://h2.example.com/","headers":null}`)
		cleared.expect(t, http.StatusOK, "")
		if cleared.data(t)["headers"] != nil || loadWebhook(t, e, id).Headers != nil {
			t.Fatalf("PUT headers null: headers %v", cleared.data(t)["headers"])
		}
		// PATCH: an object sets them, leaving them out keeps them, {} and null remove them.
		shows("PATCH", e.do(t, "PATCH", one, auth, `{"headers":{"X-Api-Token":"`+token+`"}}`), `{"X-Api-Token":"••••abcd"}`)
		shows("PATCH without headers", e.do(t, "PATCH", one, auth, `{"rateLimit":5}`), `{"X-Api-Token":"••••abcd"}`)
		if got := e.do(t, "PATCH", one, auth, `{"headers":{}}`).data(t)["headers"]; got != nil {
			t.Fatalf("PATCH headers {}: headers %v", got)
		}
		shows("PATCH again", e.do(t, "PATCH", one, auth, `{"headers":{"X-Api-Token":"`+token+`"}}`), `{"X-Api-Token":"••••abcd"}`)
		if got := e.do(t, "PATCH", one, auth, `{"headers":null}`).data(t)["headers"]; got != nil {
			t.Fatalf("PATCH headers null: headers %v", got)
		}
		// The limits are inclusive: 20 headers, a value of 1024 bytes.
		twenty := make([]string, 20)
		for i := range twenty {
			twenty[i] = fmt.Sprintf(`"X-H%d":"v"`, i)
		}
		e.do(t, "PATCH", one, auth, `{"headers":{`+strings.Join(twenty, ",")+`}}`).expect(t, http.StatusOK, "")
		e.do(t, "PATCH", one, auth, `{"headers":{"X-Long":"`+strings.Repeat("v", 1024)+`"}}`).expect(t, http.StatusOK, "")
		e.do(t, "PATCH", one, auth, `{"headers":{"X-`+strings.Repeat("n", 254)+`":"v"}}`).expect(t, http.StatusOK, "") // a name of 256 bytes
		// Names that resemble refused ones but are the receiver's own.
		e.do(t, "PATCH", one, auth, `{"headers":{"X-Date":"d","Accept":"application/json","X-Content-Encoding":"e","Tenant":"t"}}`).expect(t, http.StatusOK, "")
		shows("PATCH before the refusals", e.do(t, "PATCH", one, auth, `{"headers":{"X-Kept":"kept-value-1234"}}`), `{"X-Kept":"••••1234"}`)
		sealed := *loadWebhook(t, e, id).Headers

		many := make([]string, 21)
		for i := range many {
			many[i] = fmt.Sprintf(`"X-H%d":"v"`, i)
		}
		for _, c := range []struct {
			name, headers string
			status        int
			field         string
		}{
			{"reserved", `{"Content-Type":"text/plain"}`, http.StatusBadRequest, "headers.Content-Type"},
			{"reserved in another case", `{"user-agent":"me"}`, http.StatusBadRequest, "headers.user-agent"},
			{"traceparent", `{"Traceparent":"00-x"}`, http.StatusBadRequest, "headers.Traceparent"},
			{"webhook-*", `{"Webhook-Signature":"v1,x"}`, http.StatusBadRequest, "headers.Webhook-Signature"},
			{"webhook-* lower case", `{"webhook-custom":"x"}`, http.StatusBadRequest, "headers.webhook-custom"},
			{"21 headers", "{" + strings.Join(many, ",") + "}", http.StatusUnprocessableEntity, "headers"},
			{"1025-byte value", `{"X-Long":"` + strings.Repeat("v", 1025) + `"}`, http.StatusUnprocessableEntity, "headers.X-Long"},
			// Issue 41: hop-by-hop names, and names that would change what the request means or
			// that Go's client drops or sets itself.
			{"Content-Encoding", `{"Content-Encoding":"gzip"}`, http.StatusBadRequest, "headers.Content-Encoding"},
			{"another Content-*", `{"content-language":"en"}`, http.StatusBadRequest, "headers.content-language"},
			{"Expect", `{"Expect":"100-continue"}`, http.StatusBadRequest, "headers.Expect"},
			{"Upgrade", `{"Upgrade":"websocket"}`, http.StatusBadRequest, "headers.Upgrade"},
			{"TE", `{"TE":"trailers"}`, http.StatusBadRequest, "headers.TE"},
			{"Trailer", `{"Trailer":"X-Sum"}`, http.StatusBadRequest, "headers.Trailer"},
			{"Keep-Alive", `{"Keep-Alive":"timeout=5"}`, http.StatusBadRequest, "headers.Keep-Alive"},
			{"Proxy-Connection", `{"Proxy-Connection":"keep-alive"}`, http.StatusBadRequest, "headers.Proxy-Connection"},
			{"Proxy-Authorization", `{"Proxy-Authorization":"Basic eDp5"}`, http.StatusBadRequest, "headers.Proxy-Authorization"},
			{"Proxy-Authenticate", `{"proxy-authenticate":"Basic"}`, http.StatusBadRequest, "headers.proxy-authenticate"},
			{"Date", `{"Date":"Tue, 01 Dec 2026 00:00:00 GMT"}`, http.StatusBadRequest, "headers.Date"},
			{"Accept-Encoding", `{"Accept-Encoding":"br"}`, http.StatusBadRequest, "headers.Accept-Encoding"},
			{"Host", `{"HOST":"other.example.com"}`, http.StatusBadRequest, "headers.HOST"},
			{"a refused name among good ones", `{"X-A":"1","Trailer":"X-A"}`, http.StatusBadRequest, "headers.Trailer"},
			// A refusal echoes at most 64 characters of the field (api's clip).
			{"257-byte name", `{"X-` + strings.Repeat("n", 255) + `":"v"}`, http.StatusBadRequest, "headers.X-" + strings.Repeat("n", 54) + "..."},
			{"5000-byte name", `{"X-` + strings.Repeat("n", 4998) + `":"v"}`, http.StatusBadRequest, "headers.X-" + strings.Repeat("n", 54) + "..."},
			{"bad name", `{"X Bad":"v"}`, http.StatusBadRequest, "headers.X Bad"},
			{"non-string value", `{"X-Num":12}`, http.StatusBadRequest, "headers.X-Num"},
			{"control character", `{"X-Nl":"a\nb"}`, http.StatusBadRequest, "headers.X-Nl"},
			{"twice", `{"X-A":"1","x-a":"2"}`, http.StatusBadRequest, "headers.x-a"},
			{"not an object", `["X-A"]`, http.StatusBadRequest, "headers"},
		} {
			t.Run(c.name, func(t *testing.T) {
				body := `{"headers":` + c.headers + `}`
				e.do(t, "PATCH", one, auth, body).expectError(t, v, c.status, c.field)
				e.do(t, "PUT", one, auth, `{"url":"https://h3.example.com/","headers":`+c.headers+`}`).expectError(t, v, c.status, c.field)
				before := len(e.do(t, "GET", v.collection, auth, "").body["data"].([]any))
				r := e.do(t, "POST", v.collection, auth, limitsBody("https://h4.example.com/", v.eventType, `"headers":`+c.headers))
				r.expectError(t, v, c.status, c.field)
				if after := len(e.do(t, "GET", v.collection, auth, "").body["data"].([]any)); after != before {
					t.Fatalf("a refused create stored a webhook: %d webhooks, were %d", after, before)
				}
				if w := loadWebhook(t, e, id); w.Headers == nil || *w.Headers != sealed || w.URL != "https://h2.example.com/" {
					t.Fatalf("a refused change changed the webhook: %+v", w)
				}
			})
		}
	})
}
