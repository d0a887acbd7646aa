package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/secretbox"
)

// TestWebhookDestination (issue 44): a destination set at create is stored and shown with its
// secrets masked and the URL's password taken out; a PUT that names the stored user without a
// password keeps it, one that leaves destination out keeps the destination, PATCH changes the
// kind's members, and PUT with an https url and destination null makes an HTTPS endpoint again.
// Refusals name their field and change nothing; no answer holds a secret.
func TestWebhookDestination(t *testing.T) {
	const password, token = "pw-QUOKKA-1", "tok-WOMBAT-2"
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		box, err := secretbox.New(testKey)
		if err != nil {
			t.Fatal(err)
		}
		shown := func(r response) string {
			t.Helper()
			if strings.Contains(string(r.raw), password) || strings.Contains(string(r.raw), token) {
				t.Fatalf("an answer holds a secret: %s", r.raw)
			}
			d, _ := r.data(t)["destination"].(map[string]any)
			if d == nil {
				return "null"
			}
			for name, v := range d {
				if v == nil {
					delete(d, name) // every member is shown; the test reads those set
				}
			}
			b, _ := json.Marshal(d)
			return string(b)
		}
		created := e.do(t, "POST", v.collection, auth, limitsBody("tls://app:"+password+"@nats.example.com", v.eventType,
			`"destination":{"type":"nats","subject":"orders.events","token":"`+token+`"}`))
		created.expect(t, http.StatusCreated, "")
		if got := shown(created); got != `{"subject":"orders.events","token":"••••••••","type":"nats"}` {
			t.Fatalf("created destination = %s", got)
		}
		w := created.data(t)
		if w["url"] != "tls://app@nats.example.com" {
			t.Fatalf("url = %v", w["url"])
		}
		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(w["id"]))
		stored := loadWebhook(t, e, w["id"])
		if stored.DestinationCredentials == nil || strings.Contains(*stored.DestinationCredentials, password) {
			t.Fatalf("credentials stored as %v", stored.DestinationCredentials)
		}
		creds := func() string {
			c, err := box.WebhookDestination(loadWebhook(t, e, w["id"]))
			if err != nil {
				t.Fatal(err)
			}
			return c.Username + ":" + c.Password + ":" + c.Token
		}
		if got := creds(); got != "app:"+password+":"+token {
			t.Fatalf("credentials = %s", got)
		}
		if got := shown(e.do(t, "GET", one, auth, "")); !strings.Contains(got, `"subject":"orders.events"`) {
			t.Fatalf("GET destination = %s", got)
		}
		plain := e.do(t, "POST", v.collection, auth, limitsBody("https://p.example.com/", v.eventType, `"auth":{"type":"basic","username":"u","password":"p"}`))
		plain.expect(t, http.StatusCreated, "")
		plainOne := fmt.Sprintf("%s/%s", v.collection, jsonNumber(plain.data(t)["id"]))
		if got := shown(plain); got != "null" {
			t.Fatalf("an HTTPS webhook shows destination %s, want null", got)
		}

		steps := []struct {
			method, body, destination, url, creds string
		}{
			// The representation sent back as read: the stored user without a password keeps it.
			{"PUT", `{"url":"tls://app@nats.example.com"}`, `{"subject":"orders.events","token":"••••••••","type":"nats"}`, "tls://app@nats.example.com", "app:" + password + ":" + token},
			// Another user is another login: its password is what the url says (none).
			{"PUT", `{"url":"tls://ops@nats.example.com:4333"}`, `{"subject":"orders.events","token":"••••••••","type":"nats"}`, "tls://ops@nats.example.com:4333", "ops::" + token},
			// A destination sent back as read, its secret as the mask, keeps the secret.
			{"PATCH", `{"destination":{"type":"nats","subject":"orders.events","token":"••••••••"}}`, `{"subject":"orders.events","token":"••••••••","type":"nats"}`, "tls://ops@nats.example.com:4333", "ops::" + token},
			// A destination sent replaces the stored one whole, its secrets included.
			{"PATCH", `{"destination":{"type":"nats","subject":"orders.v2"}}`, `{"subject":"orders.v2","type":"nats"}`, "tls://ops@nats.example.com:4333", "ops::"},
			{"PATCH", `{"rateLimit":5}`, `{"subject":"orders.v2","type":"nats"}`, "tls://ops@nats.example.com:4333", "ops::"},
			{"PUT", `{"url":"amqps://mq.example.com/prod","destination":{"type":"rabbitmq","exchange":"events","routingKey":"orders"}}`, `{"exchange":"events","routingKey":"orders","type":"rabbitmq"}`, "amqps://mq.example.com/prod", "::"},
			{"PUT", `{"url":"https://back.example.com/","destination":null}`, "null", "https://back.example.com/", "::"},
		}
		for _, s := range steps {
			r := e.do(t, s.method, one, auth, s.body)
			r.expect(t, http.StatusOK, "")
			if got := shown(r); got != s.destination {
				t.Fatalf("%s %s: destination %s, want %s", s.method, s.body, got, s.destination)
			}
			if got := r.data(t)["url"]; got != s.url {
				t.Fatalf("%s %s: url %v, want %s", s.method, s.body, got, s.url)
			}
			if got := creds(); got != s.creds {
				t.Fatalf("%s %s: credentials %s, want %s", s.method, s.body, got, s.creds)
			}
		}

		// A broker webhook again, for the refusals.
		e.do(t, "PUT", one, auth, `{"url":"tls://nats.example.com","destination":{"type":"nats","subject":"x"}}`).expect(t, http.StatusOK, "")
		for _, c := range []struct {
			method, path, body string
			status             int
			field              string
		}{
			{"POST", v.collection, limitsBody("https://h.example.com/", v.eventType, `"destination":{"type":"nats","subject":"x"}`), http.StatusUnprocessableEntity, "url"},
			{"POST", v.collection, limitsBody("tls://127.0.0.1:4222", v.eventType, `"destination":{"type":"nats","subject":"x"}`), http.StatusUnprocessableEntity, "url"},
			{"POST", v.collection, limitsBody("tls://localhost", v.eventType, `"destination":{"type":"nats","subject":"x"}`), http.StatusUnprocessableEntity, "url"},
			{"POST", v.collection, limitsBody("nats://n.example.com", v.eventType, `"destination":{"type":"nats","subject":"x"}`), http.StatusUnprocessableEntity, "url"},
			{"POST", v.collection, limitsBody("kafka+tls://k.example.com,10.0.0.1:9093", v.eventType, `"destination":{"type":"kafka","topic":"t"}`), http.StatusUnprocessableEntity, "url"},
			{"POST", v.collection, limitsBody("tls://n.example.com", v.eventType, `"destination":{"type":"nats"}`), http.StatusBadRequest, "destination.subject"},
			{"POST", v.collection, limitsBody("tls://n.example.com", v.eventType, `"destination":"nats"`), http.StatusBadRequest, "destination"},
			{"POST", v.collection, limitsBody("tls://n.example.com", v.eventType, `"destination":{"type":"mqtt"}`), http.StatusUnprocessableEntity, "destination.type"},
			{"POST", v.collection, limitsBody("https://sqs.us-east-1.amazonaws.com/1/q", v.eventType, `"destination":{"type":"sqs","accessKeyId":"AKIA"}`), http.StatusBadRequest, "destination.secretAccessKey"},
			{"PUT", one, `{"url":"https://h.example.com/"}`, http.StatusUnprocessableEntity, "url"},
			{"PATCH", one, `{"destination":null}`, http.StatusUnprocessableEntity, "destination"},
			// An HTTPS receiver's authentication and TLS settings have no place beside a destination.
			{"POST", v.collection, limitsBody("tls://n.example.com", v.eventType, `"destination":{"type":"nats","subject":"x"},"auth":{"type":"basic","username":"u","password":"p"}`), http.StatusUnprocessableEntity, "auth"},
			{"PATCH", one, `{"auth":{"type":"basic","username":"u","password":"p"}}`, http.StatusUnprocessableEntity, "auth"},
			{"PUT", plainOne, `{"url":"tls://n.example.com","destination":{"type":"nats","subject":"x"}}`, http.StatusUnprocessableEntity, "auth"},
			// The stored destination holds no token: its mask names nothing.
			{"PATCH", one, `{"destination":{"type":"nats","subject":"x","token":"••••••••"}}`, http.StatusUnprocessableEntity, "destination.token"},
			{"PATCH", one, `{"destination":{"type":"kafka","topic":"t"}}`, http.StatusUnprocessableEntity, "url"},
		} {
			r := e.do(t, c.method, c.path, auth, c.body)
			r.expectError(t, v, c.status, c.field)
		}
		if stored := loadWebhook(t, e, w["id"]); stored.URL != "tls://nats.example.com" || stored.Destination == nil || !strings.Contains(*stored.Destination, `"subject":"x"`) {
			t.Fatalf("refused requests changed the webhook: %s %v", stored.URL, stored.Destination)
		}
	})
}

// TestSQSDestinationHeaderRoom (issue 44): an SQS message carries at most 10 attributes and
// webhookd's own headers take 5 (7 on an ordered webhook's resend), so an SQS webhook may have 5
// headers of its own, 3 when it is ordered: more is 422 naming headers, on create, PUT and PATCH,
// whichever of the destination, the headers and the ordering changes; other kinds take them.
func TestSQSDestinationHeaderRoom(t *testing.T) {
	headers := func(n int) string {
		var parts []string
		for i := range n {
			parts = append(parts, fmt.Sprintf(`"X-H%d":"v"`, i))
		}
		return `{` + strings.Join(parts, ",") + `}`
	}
	const sqs = `{"type":"sqs","accessKeyId":"AKIA1","secretAccessKey":"s"}`
	const queue = "https://sqs.us-east-1.amazonaws.com/1/q"
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		e.do(t, "POST", v.collection, auth, limitsBody(queue, v.eventType, `"destination":`+sqs+`,"headers":`+headers(6))).
			expectError(t, v, http.StatusUnprocessableEntity, "headers")
		e.do(t, "POST", v.collection, auth, limitsBody(queue, v.eventType, `"destination":`+sqs+`,"ordering":{"key":"data.id"},"headers":`+headers(4))).
			expectError(t, v, http.StatusUnprocessableEntity, "headers")
		e.do(t, "POST", v.collection, auth, limitsBody("tls://n.example.com", v.eventType, `"destination":{"type":"nats","subject":"x"},"headers":`+headers(8))).
			expect(t, http.StatusCreated, "")
		created := e.do(t, "POST", v.collection, auth, limitsBody(queue, v.eventType, `"destination":`+sqs+`,"headers":`+headers(5)))
		created.expect(t, http.StatusCreated, "")
		one := fmt.Sprintf("%s/%s", v.collection, jsonNumber(created.data(t)["id"]))
		for _, c := range []struct{ method, body string }{
			{"PATCH", `{"headers":` + headers(6) + `}`},
			{"PATCH", `{"ordering":{"key":"data.id"}}`},
			{"PUT", `{"url":"` + queue + `","headers":` + headers(6) + `}`},
		} {
			e.do(t, c.method, one, auth, c.body).expectError(t, v, http.StatusUnprocessableEntity, "headers")
		}
		e.do(t, "PATCH", one, auth, `{"headers":`+headers(3)+`,"ordering":{"key":"data.id"}}`).expect(t, http.StatusOK, "")
		// An HTTPS webhook with many headers cannot become an SQS one without dropping some.
		plain := e.do(t, "POST", v.collection, auth, limitsBody("https://p.example.com/", v.eventType, `"headers":`+headers(7)))
		plain.expect(t, http.StatusCreated, "")
		plainOne := fmt.Sprintf("%s/%s", v.collection, jsonNumber(plain.data(t)["id"]))
		e.do(t, "PUT", plainOne, auth, `{"url":"`+queue+`","destination":`+sqs+`}`).expectError(t, v, http.StatusUnprocessableEntity, "headers")
	})
}
