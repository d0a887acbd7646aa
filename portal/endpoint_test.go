package portal_test

import (
	"bytes"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/portal"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/wire"
)

func testBox(t *testing.T) *secretbox.Box {
	t.Helper()
	box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	return box
}

func openSecret(t *testing.T, sealed string) (string, error) { return testBox(t).Open(sealed) }

// secretWebhook stores a webhook whose secret is sealed with the test env's key, so the portal
// can open it, and returns it with the plain secret.
func (e *env) secretWebhook(t *testing.T, accountID int64, v model.Variant, rawURL string) (*model.Webhook, string) {
	t.Helper()
	plain, sealed, err := testBox(t).NewSealedWebhookSecret()
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: accountID, Variant: v, URL: rawURL, EventType: v.EventTypes()[0],
		Status: v.InitialStatus(), Secret: sealed, CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(t.Context(), e.db, w, 100); err != nil {
		t.Fatal(err)
	}
	return w, plain
}

// endpointForm is what the tests of the endpoint page's forms start from: an account's webhook of
// variant v at https://r.example.com/, a session of its owner with its CSRF token, the page's path,
// and the webhook as stored now.
type endpointForm struct {
	account *model.Account
	webhook *model.Webhook
	cookie  *http.Cookie
	csrf    string
	page    string
	stored  func() *model.Webhook
}

func (e *env) endpointForm(t *testing.T, v model.Variant) endpointForm {
	t.Helper()
	account := e.account(t)
	w, _ := e.secretWebhook(t, account.ID, v, "https://r.example.com/")
	cookie := e.enter(t, e.link(t, account.ID, v, false))
	return endpointForm{account: account, webhook: w, cookie: cookie, csrf: e.csrf(t, cookie),
		page: fmt.Sprintf("/portal/webhooks/%d", w.ID),
		stored: func() *model.Webhook {
			got, err := model.GetWebhook(t.Context(), e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got
		}}
}

// attempts records one delivery of w with an attempt per outcome (true: delivered), an hour ago.
func (e *env) attempts(t *testing.T, w *model.Webhook, outcomes ...bool) {
	t.Helper()
	res, err := model.InsertEvent(t.Context(), e.db, model.NewEvent{AccountID: w.AccountID, Variant: w.Variant, EventType: w.EventType, Data: `{}`})
	if err != nil || len(res.Deliveries) == 0 {
		t.Fatalf("publish: %v", err)
	}
	at := model.Now().Add(-time.Hour)
	for i, ok := range outcomes {
		a := &model.Attempt{DeliveryID: res.Deliveries[0].ID, Attempt: i + 1, URL: w.URL, StartedAt: at.Add(time.Duration(i) * time.Second), LatencyMS: 5}
		if !ok {
			class, status := "http_status", 500
			a.ErrorClass, a.StatusCode = &class, &status
		}
		if _, err := e.db.NewInsert().Model(a).Exec(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEndpointPage: the page shows the webhook, its limits, last delivery, chart (24 h and 7 d), latency,
// the 24 h success rate (also on the list, with a link to the page) and the variant's signature
// snippets, and no secret.
func TestEndpointPage(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		account := e.account(t)
		w, secret := e.secretWebhook(t, account.ID, v, "https://r.example.com/hook")
		e.attempts(t, w, false, false, false, true)
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		path := fmt.Sprintf("/portal/webhooks/%d", w.ID)
		rec := e.do(t, "GET", path, cookie, nil)
		expect(t, rec, http.StatusOK)
		body := rec.Body.String()
		for _, want := range []string{
			"https://r.example.com/hook", w.EventType, "variant " + string(v), `status-` + v.InitialStatus() + `">` + v.InitialStatus() + "<",
			"<svg", "Last 24 hours</strong>", `href="` + path + `?range=7d"`,
			`<meter min="0" max="100" low="80" high="99" optimum="100" value="25"`, "25 % of 4",
			`<dd id="latency">p50 5 ms, p95 5 ms over 4 attempts</dd>`, `<dt>Version</dt><dd id="version">1</dd>`,
			"the service's default", `<pre><code>`, "Node.js", "Python", "<h3>Go</h3>", wire.HeaderSignature,
			`action="` + path + `/test"`, `action="` + path + `/secret"`, `action="` + path + `/rotate"`,
		} {
			if !strings.Contains(body, want) {
				t.Fatalf("the endpoint page lacks %q:\n%s", want, body)
			}
		}
		shown := codePattern.FindAllStringSubmatch(body, -1)
		snippets := portal.SignatureSnippets(v)
		if len(shown) != len(snippets) {
			t.Fatalf("%d snippets shown, want %d", len(shown), len(snippets))
		}
		for i, sn := range snippets {
			if got := html.UnescapeString(shown[i][1]); got != sn.Code {
				t.Fatalf("the %s snippet shown is not the variant's:\n%s", sn.Language, got)
			}
		}
		if shows(body, secret) || strings.Contains(body, "never") || strings.Contains(body, "would be disabled") {
			t.Fatalf("the page shows the secret or no last delivery:\n%s", body)
		}
		rec = e.do(t, "GET", path+"?range=7d", cookie, nil)
		expect(t, rec, http.StatusOK)
		if body := rec.Body.String(); !strings.Contains(body, "Last 7 days</strong>") || !strings.Contains(body, "last 7 days") || !strings.Contains(body, `value="25"`) {
			t.Fatalf("the 7-day page:\n%s", body)
		}
		list := e.do(t, "GET", "/portal/", cookie, nil).Body.String()
		if !strings.Contains(list, `<a href="`+path+`">https://r.example.com/hook</a>`) || !strings.Contains(list, `value="25"`) {
			t.Fatalf("the list has no link to the page or no success rate:\n%s", list)
		}
		// An endpoint without attempts says so.
		quiet, _ := e.secretWebhook(t, account.ID, v, "https://quiet.example.com/")
		if body := e.do(t, "GET", fmt.Sprintf("/portal/webhooks/%d", quiet.ID), cookie, nil).Body.String(); !strings.Contains(body, "no attempts in 24 h") || strings.Contains(body, "<meter") || !strings.Contains(body, `<dd id="latency">no attempts</dd>`) {
			t.Fatalf("an endpoint without attempts:\n%s", body)
		}
	})
}

// shows reports whether a page's text holds s, whatever escaping the template chose.
func shows(page, s string) bool { return strings.Contains(html.UnescapeString(page), s) }

var codePattern = regexp.MustCompile(`<pre><code>([^<]*)</code></pre>`)

var secretPattern = regexp.MustCompile(`<pre class="secret" id="secret">([^<]+)</pre>`)

// TestRevealAndRotate: the secret shows in the answer to the POST only; a rotation makes a new
// one, keeps the old one signing for model.SecretOverlap, and stops at the API's limit.
func TestRevealAndRotate(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		ctx := t.Context()
		account := e.account(t)
		w, secret := e.secretWebhook(t, account.ID, v, "https://r.example.com/")
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		csrf := e.csrf(t, cookie)
		path := fmt.Sprintf("/portal/webhooks/%d", w.ID)
		rec := e.do(t, "POST", path+"/secret", cookie, url.Values{"csrf": {csrf}})
		expect(t, rec, http.StatusOK)
		if m := secretPattern.FindStringSubmatch(rec.Body.String()); m == nil || html.UnescapeString(m[1]) != secret {
			t.Fatalf("reveal shows %v, want %q:\n%s", m, secret, rec.Body)
		}
		if shows(e.do(t, "GET", path, cookie, nil).Body.String(), secret) {
			t.Fatal("a GET after the reveal shows the secret")
		}

		before := model.Now()
		rec = e.do(t, "POST", path+"/rotate", cookie, url.Values{"csrf": {csrf}})
		expect(t, rec, http.StatusOK)
		m := secretPattern.FindStringSubmatch(rec.Body.String())
		if m != nil {
			m[1] = html.UnescapeString(m[1])
		}
		if m == nil || m[1] == secret || !strings.HasPrefix(m[1], wire.SecretPrefix) {
			t.Fatalf("rotate shows %v:\n%s", m, rec.Body)
		}
		if !strings.Contains(rec.Body.String(), "previous secret keeps signing") {
			t.Fatalf("rotate does not say how long the old secret signs:\n%s", rec.Body)
		}
		got, err := model.GetWebhook(ctx, e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := openSecret(t, got.Secret); err != nil || plain != m[1] {
			t.Fatalf("the stored secret is %q, %v; the page showed %q", plain, err, m[1])
		}
		var prev []model.PreviousSecret
		if err := e.db.NewSelect().Model(&prev).Where("webhook_id = ?", w.ID).Scan(ctx); err != nil || len(prev) != 1 {
			t.Fatalf("previous secrets: %v, %v", prev, err)
		}
		if exp := prev[0].ExpiresAt; exp.Before(before.Add(model.SecretOverlap-time.Minute)) || exp.After(model.Now().Add(model.SecretOverlap)) {
			t.Fatalf("the old secret expires at %v, want about %v after the rotation", exp, model.SecretOverlap)
		}
		if plain, err := openSecret(t, prev[0].Secret); err != nil || plain != secret {
			t.Fatalf("the previous secret is %q, %v; want the old one", plain, err)
		}

		// The API's limit: MaxPreviousSecrets still signing, the next rotation is refused.
		for i := 1; i < model.MaxPreviousSecrets; i++ {
			expect(t, e.do(t, "POST", path+"/rotate", cookie, url.Values{"csrf": {csrf}}), http.StatusOK)
		}
		rec = e.do(t, "POST", path+"/rotate", cookie, url.Values{"csrf": {csrf}})
		expect(t, rec, http.StatusConflict)
		if !strings.Contains(rec.Body.String(), "Rotate again after") || secretPattern.MatchString(rec.Body.String()) {
			t.Fatalf("a refused rotation:\n%s", rec.Body)
		}
	})
}

// TestSendTest: a test event to this endpoint alone, then the delivery's page.
func TestSendTest(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		ctx := t.Context()
		account := e.account(t)
		w, _ := e.secretWebhook(t, account.ID, v, "https://r.example.com/")
		e.secretWebhook(t, account.ID, v, "https://other.example.com/") // same type: gets nothing
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		rec := e.do(t, "POST", fmt.Sprintf("/portal/webhooks/%d/test", w.ID), cookie, url.Values{"csrf": {e.csrf(t, cookie)}})
		expect(t, rec, http.StatusSeeOther)
		var ds []model.Delivery
		if err := e.db.NewSelect().Model(&ds).Join("JOIN events AS e ON e.id = delivery.event_id").
			Where("e.account_id = ?", account.ID).Where("e.event_type = ?", model.EventTest).Scan(ctx); err != nil || len(ds) != 1 {
			t.Fatalf("test deliveries: %+v, %v", ds, err)
		}
		if ds[0].WebhookID != w.ID {
			t.Fatalf("the test went to webhook %d, want %d", ds[0].WebhookID, w.ID)
		}
		if loc, want := rec.Header().Get("Location"), fmt.Sprintf("/portal/deliveries/%d", ds[0].ID); loc != want {
			t.Fatalf("Location = %q, want %q", loc, want)
		}
	})
}

// TestEndpointSecurity: the page and its actions are 404 outside the session's scope, 403 without
// the CSRF token or in a read-only session (which sees the page without any action), and a URL
// holding markup shows as text.
func TestEndpointSecurity(t *testing.T) {
	forEach(t, func(t *testing.T, e *env, v model.Variant) {
		ctx := t.Context()
		account, stranger := e.account(t), e.account(t)
		other := model.VariantA
		if v == model.VariantA {
			other = model.VariantB
		}
		evil := `https://example.com/a?q=<script>alert(1)</script>&r="><img src=x onerror=alert(2)>`
		mine, secret := e.secretWebhook(t, account.ID, v, evil)
		theirs, _ := e.secretWebhook(t, stranger.ID, v, "https://theirs.example.com/")
		otherVariant, _ := e.secretWebhook(t, account.ID, other, "https://other-variant.example.com/")
		cookie := e.enter(t, e.link(t, account.ID, v, false))
		csrf := e.csrf(t, cookie)
		actions := []string{"/secret", "/rotate", "/test"}

		// Tenancy.
		for _, w := range []*model.Webhook{theirs, otherVariant} {
			path := fmt.Sprintf("/portal/webhooks/%d", w.ID)
			expect(t, e.do(t, "GET", path, cookie, nil), http.StatusNotFound)
			expect(t, e.do(t, "GET", path+"?range=7d", cookie, nil), http.StatusNotFound)
			for _, a := range actions {
				rec := e.do(t, "POST", path+a, cookie, url.Values{"csrf": {csrf}})
				expect(t, rec, http.StatusNotFound)
				if strings.Contains(rec.Body.String(), "secret\">") {
					t.Fatalf("POST %s%s shows a secret:\n%s", path, a, rec.Body)
				}
			}
		}
		for _, bad := range []string{"0", "-1", "01", "x"} {
			expect(t, e.do(t, "GET", "/portal/webhooks/"+bad, cookie, nil), http.StatusNotFound)
		}

		// XSS: the URL is text.
		path := fmt.Sprintf("/portal/webhooks/%d", mine.ID)
		body := e.do(t, "GET", path, cookie, nil).Body.String()
		if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") || !strings.Contains(body, html.EscapeString("<script>alert(1)</script>")) {
			t.Fatalf("the URL is not escaped on the endpoint page:\n%s", body)
		}

		// CSRF: missing, wrong, another session's, or in the query string.
		otherCSRF := e.csrf(t, e.enter(t, e.link(t, account.ID, v, false)))
		for _, a := range actions {
			for _, token := range []string{"", "wrong", otherCSRF} {
				form := url.Values{}
				if token != "" {
					form.Set("csrf", token)
				}
				rec := e.do(t, "POST", path+a, cookie, form)
				expect(t, rec, http.StatusForbidden)
				if shows(rec.Body.String(), secret) {
					t.Fatalf("POST %s without a valid CSRF token shows the secret", a)
				}
			}
			expect(t, e.do(t, "POST", path+a+"?csrf="+url.QueryEscape(csrf), cookie, url.Values{}), http.StatusForbidden)
		}

		// Read-only: the page without actions, every action 403.
		ro := e.enter(t, e.link(t, account.ID, v, true))
		rec := e.do(t, "GET", path, ro, nil)
		expect(t, rec, http.StatusOK)
		// The page's own content, below the header (which may carry the session's sign-out form).
		body, content, _ := strings.Cut(rec.Body.String(), "<main>")
		body += content
		if !strings.Contains(body, "read-only") || !strings.Contains(content, "<svg") ||
			strings.Contains(content, "<form") || strings.Contains(content, "<button") || strings.Contains(content, "/edit\"") {
			t.Fatalf("the read-only endpoint page:\n%s", body)
		}
		for _, a := range actions {
			rec := e.do(t, "POST", path+a, ro, url.Values{"csrf": {csrfOf(ro)}})
			expect(t, rec, http.StatusForbidden)
			if !strings.Contains(rec.Body.String(), "read-only") || shows(rec.Body.String(), secret) {
				t.Fatalf("POST %s in a read-only session:\n%s", a, rec.Body)
			}
		}

		// Nothing changed: the same secret, no previous one, no test event.
		got, err := model.GetWebhook(ctx, e.db, model.WebhookScope{AccountID: account.ID, Variant: v}, mine.ID)
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := openSecret(t, got.Secret); err != nil || plain != secret {
			t.Fatalf("a refused rotation changed the secret: %q, %v", plain, err)
		}
		for _, w := range []*model.Webhook{mine, theirs, otherVariant} {
			n, err := e.db.NewSelect().Model((*model.PreviousSecret)(nil)).Where("webhook_id = ?", w.ID).Count(ctx)
			if err != nil || n != 0 {
				t.Fatalf("webhook %d has %d previous secrets after refused rotations, %v", w.ID, n, err)
			}
			n, err = e.db.NewSelect().Model((*model.Delivery)(nil)).Where("webhook_id = ?", w.ID).Count(ctx)
			if err != nil || n != 0 {
				t.Fatalf("webhook %d has %d deliveries after refused tests, %v", w.ID, n, err)
			}
		}
	})
}
