package openapitest_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/webhookd/webhookd/docs/openapitest"
)

// recorder stands in for a *testing.T so a test can see the failures Check reports without failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...) }

const (
	secret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/5pBqdvU1dc="
	webhookA  = `{"id":7,"url":"https://example.com/hook","eventType":"campaign.created","version":1,"status":"pending","disabled":false,"createdAt":"2026-11-23T06:42:12.123Z","updatedAt":"2026-11-23T06:42:12.123Z","rateLimit":null,"maxInFlight":null,"filter":null,"ordering":null,"headers":null,"auth":null,"tls":null,"destination":null}`
	webhookB  = `{"id":8,"url":"https://example.com/hook","eventType":"lead.captured","version":1,"status":"active","createdAt":"2026-11-23T06:42:12.123Z","lastTriggered":null,"lastStatus":null,"failureCount":0,"rateLimit":null,"maxInFlight":null,"filter":null,"ordering":null,"headers":null,"auth":null,"tls":null,"destination":null}`
	triggered = `{"id":9,"url":"https://example.com/hook","eventType":"website.published","version":1,"status":"failing","createdAt":"2026-11-23T06:42:12.123Z","lastTriggered":"2026-11-24T01:00:00.000Z","lastStatus":"failed","failureCount":3,"rateLimit":50,"maxInFlight":4,"filter":{"data":{"budget":{"$gte":1000}}},"ordering":{"key":"data.id"},"headers":{"X-Api-Token":"••••abcd"},"auth":{"type":"oauth2","tokenUrl":"https://idp.example.com/t","clientId":"c","clientSecret":"••••••••","scopes":null,"audience":null},"tls":{"caCert":null,"clientCert":{"subject":"CN=webhookd","issuer":"CN=Client CA","notAfter":"2027-01-01T00:00:00.000Z"},"clientKey":"••••••••"},"destination":{"type":"sqs","subject":null,"token":null,"exchange":null,"routingKey":null,"topic":null,"region":"us-east-1","accessKeyId":"AKIAEXAMPLE","secretAccessKey":"••••••••","sessionToken":null,"messageGroupId":null}}`
)

type exchange struct {
	name   string
	method string
	target string
	status int
	header map[string]string
	body   string
	// request is the request body, sent with Content-Type application/json (validated only when
	// the status is 2xx).
	request string
}

func (e exchange) check(v *openapitest.Validator, t testing.TB) {
	req := httptest.NewRequest(e.method, e.target, strings.NewReader(e.request))
	if e.request != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("X-Request-Id", "req_test")
	for k, val := range e.header {
		if val == "" {
			h.Del(k)
		} else {
			h.Set(k, val)
		}
	}
	var body []byte
	if e.body != "" {
		body = []byte(e.body)
	}
	v.Check(t, req, e.status, h, body)
}

func TestCheckAcceptsDocumentedResponses(t *testing.T) {
	v := openapitest.New(t)
	for _, e := range []exchange{
		{name: "A list with a next page", method: "GET", target: "http://127.0.0.1:54321/api/svc/v2/webhooks?limit=1&eventType=campaign.created",
			status: 200, header: map[string]string{"Link": `</api/svc/v2/webhooks?after=7&limit=1>; rel="next"`},
			body: `{"success":true,"data":[` + webhookA + `]}`},
		{name: "A empty list with message", method: "GET", target: "/api/svc/v2/webhooks", status: 200,
			body: `{"success":true,"data":[],"message":"Webhooks retrieved"}`},
		{name: "A create", method: "POST", target: "/api/svc/v2/webhooks", status: 201,
			request: `{"url":"https://example.com/hook","eventType":"campaign.created","rateLimit":null}`,
			body:    `{"success":true,"data":` + strings.TrimSuffix(webhookA, "}") + `,"secret":"` + secret + `"}}`},
		{name: "A delete", method: "DELETE", target: "http://example.com/api/svc/v2/webhooks/7", status: 200,
			body: `{"success":true,"message":"Webhook deleted"}`},
		{name: "A rate limited", method: "PUT", target: "/api/svc/v2/webhooks/7", status: 429, header: map[string]string{"Retry-After": "1"},
			body: `{"success":false,"message":"too many requests","code":"rate_limited"}`},
		{name: "B error naming a field", method: "POST", target: "http://example.com/v2/svc/v2/webhooks", status: 422,
			body: `{"data":null,"message":"url must use https","isError":true,"code":"validation_failed","field":"url"}`},
		{name: "B unauthorized on a bad id", method: "GET", target: "/v2/svc/v2/webhooks/abc", status: 401,
			body: `{"data":null,"message":"missing Authorization header","isError":true,"code":"unauthorized"}`},
		{name: "B list", method: "GET", target: "/v2/svc/v2/webhooks", status: 200,
			body: `{"data":[` + webhookB + `,` + triggered + `],"message":"Webhooks retrieved","isError":false}`},
		{name: "A refused request, not validated", method: "POST", target: "/api/svc/v2/webhooks", status: 422,
			request: `{"eventType":"no.such.type"}`,
			body:    `{"success":false,"message":"url is required","code":"validation_failed","field":"url"}`},
		{name: "A publish", method: "POST", target: "/api/svc/v2/events", status: 202,
			request: `{"eventType":"campaign.created","data":{"id":42,"name":"Spring","platform":"meta","status":"active",` +
				`"startDate":"2026-05-01T12:00:00.000Z","endDate":"2026-06-01T12:00:00.000Z","budget":2500.5}}`,
			body: `{"success":true,"data":{"id":3,"eventType":"campaign.created","matched":0}}`},
		{name: "A disable without a body", method: "POST", target: "/api/svc/v2/webhooks/7/disable", status: 200,
			body: `{"success":true,"data":` + webhookA + `,"message":"Webhook disabled"}`},
		{name: "B wrong method", method: "DELETE", target: "/v2/svc/v2/webhooks", status: 405, header: map[string]string{"Allow": "GET, POST"},
			body: `{"data":null,"message":"method not allowed on this path","isError":true,"code":"invalid_request"}`},
		{name: "B limits patched", method: "PATCH", target: "/v2/svc/v2/webhooks/9", status: 200,
			request: `{"rateLimit":50,"maxInFlight":null}`,
			body:    `{"data":` + triggered + `,"message":"Webhook updated","isError":false}`},
		{name: "B delete", method: "DELETE", target: "/v2/svc/v2/webhooks/8", status: 200,
			body: `{"data":null,"message":"Webhook deleted","isError":false}`},
		{name: "B rotate", method: "POST", target: "/v2/svc/v2/webhooks/8/secret/rotate", status: 200,
			body: `{"data":{"secret":"` + secret + `","previousSecretExpiresAt":"2026-11-24T06:42:12.123Z"},"message":"rotated","isError":false}`},
		{name: "readiness failing", method: "GET", target: "/readyz", status: 503,
			body: `{"status":"unavailable","checks":{"database":"unavailable","temporal":"ok"}}`},
		{name: "openapi document", method: "GET", target: "/openapi.yaml", status: 200,
			header: map[string]string{"Content-Type": "application/yaml"}, body: "openapi: 3.0.3\n"},
		{name: "metrics", method: "GET", target: "/metrics", status: 200,
			header: map[string]string{"Content-Type": "text/plain; version=0.0.4; charset=utf-8"}, body: "up 1\n"},
	} {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			e.check(v, rec)
			for _, msg := range rec.errors {
				t.Error(msg)
			}
		})
	}
}

func TestCheckRejectsUndocumentedResponses(t *testing.T) {
	v := openapitest.New(t)
	for _, tc := range []struct {
		exchange
		want string // a fragment of the reported failure
	}{
		{exchange{name: "extra field", method: "GET", target: "/api/svc/v2/webhooks/7", status: 200,
			body: `{"success":true,"data":` + strings.TrimSuffix(webhookA, "}") + `,"secret":"` + secret + `"}}`}, "secret"},
		{exchange{name: "limits missing", method: "GET", target: "/v2/svc/v2/webhooks/8", status: 200,
			body: `{"data":` + strings.Replace(webhookB, `,"rateLimit":null,"maxInFlight":null,"filter":null,"ordering":null,"headers":null,"auth":null,"tls":null`, "", 1) + `,"message":"ok","isError":false}`}, "rateLimit"},
		{exchange{name: "limit out of range", method: "PATCH", target: "/api/svc/v2/webhooks/7", status: 200, request: `{}`,
			body: `{"success":true,"data":` + strings.Replace(webhookA, `"rateLimit":null`, `"rateLimit":0`, 1) + `}`}, "rateLimit"},
		{exchange{name: "missing field", method: "GET", target: "/v2/svc/v2/webhooks/8", status: 200,
			body: `{"data":` + webhookB + `,"isError":false}`}, "message"},
		{exchange{name: "status from the other variant", method: "GET", target: "/api/svc/v2/webhooks", status: 200,
			body: `{"success":true,"data":[` + strings.Replace(webhookA, `"pending"`, `"active"`, 1) + `]}`}, "status"},
		{exchange{name: "unknown error code", method: "DELETE", target: "/v2/svc/v2/webhooks/8", status: 404,
			body: `{"data":null,"message":"gone","isError":true,"code":"gone"}`}, "code"},
		{exchange{name: "undocumented status code", method: "DELETE", target: "/api/svc/v2/webhooks/7", status: 204}, "status is not supported"},
		{exchange{name: "404 on a collection", method: "GET", target: "/api/svc/v2/webhooks", status: 404,
			body: `{"success":false,"message":"no","code":"not_found"}`}, "status is not supported"},
		{exchange{name: "undocumented path", method: "GET", target: "/api/svc/v2/no-such-collection", status: 200,
			body: `{"success":true,"data":[]}`}, "undocumented route"},
		{exchange{name: "undocumented method", method: "POST", target: "/v2/svc/v2/webhooks/8", status: 200,
			body: `{"data":null,"message":"","isError":false}`}, "undocumented route"},
		{exchange{name: "429 without Retry-After", method: "GET", target: "/api/svc/v2/webhooks", status: 429,
			body: `{"success":false,"message":"slow down","code":"rate_limited"}`}, "Retry-After"},
		{exchange{name: "no X-Request-Id", method: "GET", target: "/healthz", status: 200,
			header: map[string]string{"X-Request-Id": ""}, body: `{"status":"ok"}`}, "X-Request-Id"},
		{exchange{name: "malformed secret", method: "GET", target: "/v2/svc/v2/webhooks/8/secret", status: 200,
			body: `{"data":{"secret":"whsec_short"},"message":"ok","isError":false}`}, "secret"},
		{exchange{name: "B error with data", method: "PUT", target: "/v2/svc/v2/webhooks/8", status: 400,
			body: `{"data":{},"message":"bad","isError":true,"code":"invalid_request"}`}, "data"},
		{exchange{name: "wrong content type", method: "GET", target: "/healthz", status: 200,
			header: map[string]string{"Content-Type": "text/html"}, body: `{"status":"ok"}`}, "Content-Type"},
		{exchange{name: "empty body", method: "GET", target: "/v2/svc/v2/webhooks", status: 200}, "decode"},
		{exchange{name: "accepted request without its url", method: "POST", target: "/api/svc/v2/webhooks", status: 201,
			request: `{"eventType":"campaign.created"}`,
			body:    `{"success":true,"data":` + strings.TrimSuffix(webhookA, "}") + `,"secret":"` + secret + `"}}`}, "request accepted"},
		{exchange{name: "accepted query out of range", method: "GET", target: "/api/svc/v2/webhooks?limit=500", status: 200,
			body: `{"success":true,"data":[]}`}, "limit"},
		{exchange{name: "accepted event of another variant", method: "POST", target: "/v2/svc/v2/events", status: 202,
			request: `{"event":"campaign.created","data":{}}`,
			body:    `{"data":{"id":3,"event":"lead.captured","matched":0},"message":"accepted","isError":false}`}, "request accepted"},
		{exchange{name: "405 without Allow", method: "DELETE", target: "/api/svc/v2/webhooks", status: 405,
			body: `{"success":false,"message":"method not allowed on this path","code":"invalid_request"}`}, "Allow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{TB: t}
			tc.check(v, rec)
			if len(rec.errors) != 1 {
				t.Fatalf("got %d failures, want 1: %q", len(rec.errors), rec.errors)
			}
			if !strings.Contains(rec.errors[0], tc.want) {
				t.Errorf("failure %q does not mention %q", rec.errors[0], tc.want)
			}
			t.Log(rec.errors[0])
		})
	}
}

func TestNewLoadsOnce(t *testing.T) {
	first, second := openapitest.New(t), openapitest.New(t)
	if first != second {
		t.Error("New built a second Validator")
	}
}
