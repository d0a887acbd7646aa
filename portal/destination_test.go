package portal_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/webhooks/webhookstest"
)

// toDestination points f's webhook at a broker through the use case, as the API's PUT does.
func (e *env) toDestination(t *testing.T, f endpointForm, rawURL, dest string) {
	t.Helper()
	uses := webhookstest.New(t, e.db, testBox(t), slog.New(slog.NewTextHandler(io.Discard, nil)), webhookstest.Config{MaxWebhooks: 100})
	if _, err := uses.Update(t.Context(), model.WebhookScope{AccountID: f.account.ID, Variant: f.webhook.Variant}, f.webhook.ID, rawURL,
		webhooks.Settings{Destination: webhooks.DestinationEdit{Set: true, JSON: json.RawMessage(dest)}}); err != nil {
		t.Fatalf("PUT %s %s: %v", rawURL, dest, err)
	}
}

// destinationNow is f's webhook's destination as stored: its settings and its opened secrets.
func destinationNow(t *testing.T, f endpointForm) (destination.Settings, destination.Credentials) {
	t.Helper()
	w := f.stored()
	s, err := destination.Of(w.Destination)
	if err != nil || s == nil {
		t.Fatalf("stored destination %v, %v", s, err)
	}
	c, err := testBox(t).WebhookDestination(w)
	if err != nil {
		t.Fatal(err)
	}
	return *s, c
}

// TestDestinationForm (issue 44): an HTTPS endpoint's page says so and has no destination form; a
// NATS endpoint's page shows its type, subject, URL without the password and its token only as the
// mask. The form changes the subject and keeps the stored token when its field is left empty,
// sets a new one, and removes it; a refused subject shows the use case's reason with the subject as
// sent, escaped, and no secret typed. Without the CSRF token, from another account or in a
// read-only session nothing changes.
func TestDestinationForm(t *testing.T) {
	const password, token, typed, newToken = "pw-secret-1234", "tok-secret-5678", "tok-typed-0000", "tok-new-9999"
	secrets := []string{password, token, typed, newToken}
	noSecret := func(t *testing.T, what, body string) {
		t.Helper()
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Fatalf("%s shows the secret %s:\n%s", what, s, body)
			}
		}
	}
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		f := e.endpointForm(t, v)
		path := f.page + "/destination"

		rec := e.do(t, "GET", f.page, f.cookie, nil)
		expect(t, rec, http.StatusOK)
		if !shows(rec.Body.String(), `<span class="destination-current">HTTPS endpoint</span>`) || strings.Contains(rec.Body.String(), `action="`+path+`"`) {
			t.Fatalf("an HTTPS endpoint's page:\n%s", rec.Body)
		}
		expect(t, e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "subject": {"orders"}}), http.StatusBadRequest)
		if f.stored().Destination != nil {
			t.Fatal("a destination form made an HTTPS endpoint a broker's")
		}

		e.toDestination(t, f, "tls://hooks:"+password+"@nats.example.com:4222", `{"type":"nats","subject":"orders.created","token":"`+token+`"}`)
		rec = e.do(t, "GET", f.page, f.cookie, nil)
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		noSecret(t, "the page", body)
		for _, want := range []string{`<dd class="url">tls://hooks@nats.example.com:4222</dd>`, `<dd class="destination-type">nats</dd>`,
			"<dt>Subject</dt><dd>orders.created</dd>", "<dt>Token</dt><dd>" + webhooks.AuthMask + "</dd>", `action="` + path + `"`,
			`name="subject" value="orders.created"`, `name="remove-token"`} {
			if !shows(body, want) {
				t.Fatalf("the page lacks %s:\n%s", want, body)
			}
		}

		// The subject changed, the token's field left empty: the stored token and password stay.
		rec = e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "subject": {" orders.updated "}, "token": {""}})
		expect(t, rec, http.StatusOK)
		noSecret(t, "the answer to a save", rec.Body.String())
		s, c := destinationNow(t, f)
		if s.Subject != "orders.updated" || c.Token != token || c.Password != password || c.Username != "hooks" ||
			!shows(rec.Body.String(), "The destination was saved") || !shows(rec.Body.String(), "<dt>Subject</dt><dd>orders.updated</dd>") {
			t.Fatalf("after a save: %+v, token kept %v, password kept %v; the page:\n%s", s, c.Token == token, c.Password == password, rec.Body)
		}
		if f.stored().URL != "tls://hooks@nats.example.com:4222" {
			t.Fatalf("a save changed the URL to %s", f.stored().URL)
		}

		// Refused: the reason, the subject as sent (escaped), no secret typed, nothing changed.
		for _, bad := range []string{`orders.<script>alert(1)</script>`, "orders..created", ""} {
			rec = e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "subject": {bad}, "token": {typed}})
			expect(t, rec, http.StatusUnprocessableEntity)
			body := rec.Body.String()
			noSecret(t, "a refusal", body)
			if !shows(body, "The destination cannot be used: destination.subject") || strings.Contains(body, "<script>alert(1)") ||
				!strings.Contains(body, `name="subject" value="`+attr(bad)+`"`) {
				t.Fatalf("subject %q refused with the page:\n%s", bad, body)
			}
			if s, c := destinationNow(t, f); s.Subject != "orders.updated" || c.Token != token {
				t.Fatalf("a refused save stored %+v (token kept: %v)", s, c.Token == token)
			}
		}

		// A new token replaces the stored one; the remove box removes it.
		rec = e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "subject": {"orders.updated"}, "token": {newToken}})
		expect(t, rec, http.StatusOK)
		noSecret(t, "the answer to a new token", rec.Body.String())
		if _, c := destinationNow(t, f); c.Token != newToken || c.Password != password {
			t.Fatal("a new token was not stored, or the password was lost")
		}
		rec = e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "subject": {"orders.updated"}, "remove-token": {"1"}})
		expect(t, rec, http.StatusOK)
		if _, c := destinationNow(t, f); c.Token != "" || c.Password != password || !shows(rec.Body.String(), "<dt>Token</dt><dd>none</dd>") {
			t.Fatalf("the token was not removed, or the password was lost:\n%s", rec.Body)
		}

		// Refused before the use case: no CSRF token, a bogus button, another account, a read-only
		// session.
		before := *f.stored().Destination
		expect(t, e.do(t, "POST", path, f.cookie, url.Values{"do": {"save"}, "subject": {"other"}}), http.StatusForbidden)
		expect(t, e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"bogus"}, "subject": {"other"}}), http.StatusBadRequest)
		other := e.endpointForm(t, v)
		expect(t, e.do(t, "POST", path, other.cookie, url.Values{"csrf": {other.csrf}, "do": {"save"}, "subject": {"other"}}), http.StatusNotFound)
		ro := e.enter(t, e.link(t, f.account.ID, v, true))
		expect(t, e.do(t, "POST", path, ro, url.Values{"csrf": {e.csrf(t, ro)}, "do": {"save"}, "subject": {"other"}}), http.StatusForbidden)
		rec = e.do(t, "GET", f.page, ro, nil)
		if strings.Contains(rec.Body.String(), `action="`+path+`"`) || !shows(rec.Body.String(), "<dt>Subject</dt><dd>orders.updated</dd>") {
			t.Fatalf("a read-only page offers the destination form, or hides the destination:\n%s", rec.Body)
		}
		if got := *f.stored().Destination; got != before {
			t.Fatalf("a refused form changed the destination to %s", got)
		}
	})
}

// TestDestinationFormKinds (issue 44): each kind's form takes its own members. A RabbitMQ routing
// key that holds markup is stored and shown as text; an SQS destination's access key id changes
// with the secret access key's field left empty (which the use case would refuse without the
// stored one kept), and a new session token is set and never shown.
func TestDestinationFormKinds(t *testing.T) {
	const awsSecret, sessionToken = "aws-secret-abcdefgh", "aws-session-ijklmnop"
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		f := e.endpointForm(t, v)
		path := f.page + "/destination"
		e.toDestination(t, f, "amqps://mq.example.com", `{"type":"rabbitmq","exchange":"events","routingKey":"created"}`)
		hostile := `<script>alert(1)</script>`
		rec := e.do(t, "POST", path, f.cookie, url.Values{"csrf": {f.csrf}, "do": {"save"}, "exchange": {""}, "routingKey": {hostile}})
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		if s, _ := destinationNow(t, f); s.Exchange != "" || s.RoutingKey != hostile || strings.Contains(body, "<script>alert(1)") ||
			!shows(body, "<dt>Exchange</dt><dd>the default exchange</dd>") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Fatalf("rabbitmq after a save: %+v; the page:\n%s", s, body)
		}

		g := e.endpointForm(t, v)
		e.toDestination(t, g, "https://sqs.eu-west-1.amazonaws.com/123456789012/orders",
			`{"type":"sqs","accessKeyId":"AKIAOLD","secretAccessKey":"`+awsSecret+`"}`)
		rec = e.do(t, "POST", g.page+"/destination", g.cookie, url.Values{"csrf": {g.csrf}, "do": {"save"},
			"region": {"eu-west-1"}, "accessKeyId": {"AKIANEW"}, "secretAccessKey": {""}, "sessionToken": {sessionToken}, "messageGroupId": {"g1"}})
		expect(t, rec, http.StatusOK)
		body = rec.Body.String()
		s, c := destinationNow(t, g)
		if s.AccessKeyID != "AKIANEW" || s.Region != "eu-west-1" || s.MessageGroupID != "g1" || c.SecretAccessKey != awsSecret || c.SessionToken != sessionToken {
			t.Fatalf("sqs after a save: %+v, secret kept %v, session token set %v", s, c.SecretAccessKey == awsSecret, c.SessionToken == sessionToken)
		}
		if strings.Contains(body, awsSecret) || strings.Contains(body, sessionToken) ||
			!shows(body, "<dt>Secret access key</dt><dd>"+webhooks.AuthMask+"</dd>") || !shows(body, "<dt>Session token</dt><dd>"+webhooks.AuthMask+"</dd>") {
			t.Fatalf("the sqs page:\n%s", body)
		}
		// Another kind's member is not read: the form of an SQS destination sends no subject.
		rec = e.do(t, "POST", g.page+"/destination", g.cookie, url.Values{"csrf": {g.csrf}, "do": {"save"}, "accessKeyId": {"AKIANEW"}, "subject": {"x"}})
		expect(t, rec, http.StatusOK)
		if s, c := destinationNow(t, g); s.Subject != "" || s.Region != "" || c.SecretAccessKey != awsSecret || c.SessionToken != sessionToken {
			t.Fatalf("sqs after a save of other members: %+v", s)
		}
	})
}

// attr is s as html/template writes it in an attribute's value.
func attr(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}
