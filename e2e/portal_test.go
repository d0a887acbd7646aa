//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/webhookd/webhookd/wire"
)

// TestPortalEndpointFlow walks the owner's portal (issue 20, docs/portal.md) in headless Chromium on
// the `make run` stack, as a new customer would: it opens a link that `webhookd portal-link` made,
// adds an endpoint pointing at an HTTPS receiver that answers 500, sends it a test (which lands on
// the delivery's page), sees the failure on the endpoint's page (last delivery, chart, success
// rate), rotates the secret, and checks that the next delivery verifies with the new secret and
// still with the old one, which signs beside it for a day.
//
// It also embeds the portal in an iframe of a page on another origin of the same site (another
// 127.0.0.1 port): the origin WEBHOOKD_PORTAL_FRAME_ANCESTORS names shows the portal, another
// origin's frame does not render it.
//
// Screenshots of each page go to $WEBHOOKD_SCREENSHOTS when set (docs/portal.md shows them and
// says how to make them again), else to a temporary directory.
func TestPortalEndpointFlow(t *testing.T) {
	besideOthers(t)
	rc := startReceiver(t)
	var fixed atomic.Bool
	rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if path == "/hook" && !fixed.Load() {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"error":"receiver down"}`))
		}
	})
	// Two pages that embed the portal: the stack allows the first origin only. Both are on
	// 127.0.0.1 like the stack, so they are the same site as the portal, on another origin.
	var portalURL atomic.Value
	embedder := func(title string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><title>%s</title><h1>%s</h1><iframe id="portal" src="%s" width="1300" height="700"></iframe>`,
				title, title, portalURL.Load())
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	allowed, denied := embedder("An integrator's product"), embedder("Another site")

	stack := startDevStack(t, webhookdBinary(t), []string{
		"WEBHOOKD_RETRY_SCHEDULE=1s,1s", "WEBHOOKD_ALLOW_PRIVATE_TARGETS=true", "WEBHOOKD_EXTRA_CA_FILE=" + rc.caFile,
		"WEBHOOKD_PORTAL_FRAME_ANCESTORS='self' " + allowed.URL,
	})
	portalURL.Store(stack.apiURL + "/portal/")
	link := portalLink(t, stack)

	b := startBrowser(t)

	// 1. The link opens the endpoints page, without the token in the address.
	b.do("open the portal link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("form.create")))
	if at := b.location(); at != stack.apiURL+"/portal/" {
		t.Fatalf("the link leads to %s, want the endpoints page without the token", at)
	}
	b.screenshot("portal-1-endpoints.png")

	// 2. An endpoint at the receiver, which answers 500. The answer shows its secret once.
	b.do("add an endpoint",
		chromedp.SendKeys(chromedp.CSS(`form.create input[name=url]`), rc.url("/hook")),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS("pre.secret")))
	oldSecret := b.text("read the secret", "pre.secret")
	if !strings.HasPrefix(oldSecret, wire.SecretPrefix) {
		t.Fatalf("the created page shows %q as the secret", oldSecret)
	}
	b.screenshot("portal-2-created.png")

	// 3. The endpoint's page, from the link in its row.
	b.do("open the endpoint's page",
		chromedp.Click(chromedp.CSS(`a.button[href="/portal/"]`)),
		chromedp.WaitVisible(chromedp.CSS(`td.url a`)),
		chromedp.Click(chromedp.CSS(`td.url a`)),
		chromedp.WaitVisible(chromedp.CSS(`dl.endpoint`)))
	endpointPage := b.location()
	if !regexp.MustCompile(`/portal/webhooks/\d+$`).MatchString(endpointPage) {
		t.Fatalf("the row's link leads to %s", endpointPage)
	}

	// 4. Send a test: the answer is the delivery's page.
	before := len(rc.requests("/hook"))
	b.do("send a test", chromedp.Click(chromedp.CSS(`form[action$="/test"] button`)))
	b.waitFor("the delivery's page", `location.pathname.startsWith("/portal/deliveries/")`, nil)
	if at := b.location(); !regexp.MustCompile(`^` + regexp.QuoteMeta(stack.apiURL) + `/portal/deliveries/\d+$`).MatchString(at) {
		t.Fatalf("send a test leads to %s, want the delivery's page", at)
	}
	failedDelivery := b.location()
	eventually(t, time.Minute, "the test at the receiver", func() bool { return len(rc.requests("/hook")) > before })
	// The delivery's page follows it live (follow.js) until the failed attempt shows, with the
	// receiver's status and its answer; a test is not retried (spec 3.2), so it ends exhausted.
	b.waitFor("the failed attempt on the delivery's page",
		`!!document.querySelector("#attempt-1") && document.querySelector("#attempt-1").innerText.includes("500") && document.querySelector("#attempt-1 pre.response").innerText.includes("receiver down") && document.querySelector("span.status.state-exhausted") !== null`,
		chromedp.Reload())
	if got := b.eval("read the attempt", `document.querySelector("#attempt-1").innerText`); !strings.Contains(strings.ToLower(got), wire.HeaderID) ||
		strings.Contains(strings.ToLower(got), wire.HeaderSignature) {
		t.Fatalf("the attempt on the delivery's page should show its request headers without %s:\n%s", wire.HeaderSignature, got)
	}
	b.screenshot("portal-3-delivery-failed.png")

	// 5. The endpoint's page shows the failure: last delivery, the chart's failed attempts, and a
	// success rate below 100 %.
	b.do("open the endpoint's page again", chromedp.Navigate(endpointPage))
	b.waitFor("the failure on the endpoint's page",
		`document.querySelector("#last-delivery").innerText !== "never" && /[1-9]\d* retried|[1-9]\d* failed/.test(document.querySelector("svg.chart").getAttribute("aria-label")) && !!document.querySelector("meter")`,
		chromedp.Reload())
	if rate := b.eval("read the success rate", `document.querySelector("meter").value + ""`); rate != "0" {
		t.Fatalf("the success rate of an endpoint that answered only 500 is %s %%", rate)
	}
	b.screenshot("portal-3-endpoint-failing.png")

	// 5b. The receiver answers 200 again: the failed delivery is resent from its page, with the
	// same webhook-id, and its page turns delivered.
	fixed.Store(true)
	b.do("open the failed delivery", chromedp.Navigate(failedDelivery), chromedp.WaitVisible(chromedp.CSS(`form[action$="/resend"] button`)))
	resentAt := time.Now()
	b.do("resend it", chromedp.Click(chromedp.CSS(`form[action$="/resend"] button`)))
	b.waitFor("the resent delivery delivered", `document.querySelector("span.status.state-delivered") !== null && !!document.querySelector("#attempt-2")`,
		chromedp.Reload())
	b.screenshot("portal-3-delivery-resent.png")
	var firstID string
	eventually(t, time.Minute, "the resend at the receiver", func() bool {
		reqs := rc.requests("/hook")
		for _, r := range reqs {
			if r.At.After(resentAt) {
				firstID = reqs[len(reqs)-1].Header.Get(wire.HeaderID)
				return true
			}
		}
		return false
	})
	if original := rc.requests("/hook")[before].Header.Get(wire.HeaderID); firstID != original {
		t.Fatalf("the resend carried webhook-id %q, the failed attempt %q", firstID, original)
	}

	// 6. Rotate the secret: the answer shows the new one and how long the old one still signs.
	b.do("open the endpoint's page", chromedp.Navigate(endpointPage), chromedp.WaitVisible(chromedp.CSS(`form[action$="/rotate"] button`)))
	b.do("rotate the secret", chromedp.Click(chromedp.CSS(`form[action$="/rotate"] button`)), chromedp.WaitVisible(chromedp.CSS("pre.secret")))
	newSecret := b.text("read the new secret", "pre.secret")
	if newSecret == oldSecret || !strings.HasPrefix(newSecret, wire.SecretPrefix) {
		t.Fatalf("the rotation shows %q (the old secret was %q)", newSecret, oldSecret)
	}
	b.screenshot("portal-4-rotated.png")
	if at := b.location(); at != endpointPage+"/rotate" {
		t.Fatalf("the rotation's answer is at %s", at)
	}

	// 7. The receiver is fixed; the next test delivery is signed with the new secret, and with
	// the old one beside it. Every attempt loads the secrets when it starts, so any request that
	// arrives after the click (a retry of an earlier test as well) started after the rotation.
	fixed.Store(true)
	b.do("open the endpoint's page", chromedp.Navigate(endpointPage), chromedp.WaitVisible(chromedp.CSS(`form[action$="/test"] button`)))
	clicked := time.Now()
	b.do("send another test", chromedp.Click(chromedp.CSS(`form[action$="/test"] button`)))
	b.waitFor("the delivery's page", `location.pathname.startsWith("/portal/deliveries/")`, nil)
	var got receivedRequest
	eventually(t, time.Minute, "the second test at the receiver", func() bool {
		for _, r := range rc.requests("/hook") {
			if r.At.After(clicked) {
				got = r
				return true
			}
		}
		return false
	})
	ts, err := strconv.ParseInt(got.Header.Get(wire.HeaderTimestamp), 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", wire.HeaderTimestamp, err)
	}
	signatures := strings.Fields(got.Header.Get(wire.HeaderSignature))
	for name, secret := range map[string]string{"new": newSecret, "old": oldSecret} {
		want, err := wire.StandardSignature(got.Header.Get(wire.HeaderID), time.Unix(ts, 0), got.Body, secret)
		if err != nil {
			t.Fatal(err)
		}
		if !contains(signatures, want) {
			t.Fatalf("the delivery after the rotation is not signed with the %s secret: %s has %v, want %s", name, wire.HeaderSignature, signatures, want)
		}
	}
	if !strings.Contains(string(got.Body), "test event") {
		t.Fatalf("the delivery after the rotation is not the test: %s", got.Body)
	}

	// 8. The chart now holds a delivered attempt beside the failed ones.
	b.do("open the endpoint's page", chromedp.Navigate(endpointPage))
	b.waitFor("the delivery in the chart", `/[1-9]\d* delivered/.test(document.querySelector("svg.chart").getAttribute("aria-label")) && document.querySelector("meter").value > 0`,
		chromedp.Reload())
	b.screenshot("portal-5-endpoint.png")
	b.do("open the 7-day chart", chromedp.Click(chromedp.CSS(`p.range a`)), chromedp.WaitVisible(chromedp.CSS("svg.chart")))
	if !strings.HasSuffix(b.location(), "?range=7d") {
		t.Fatalf("the 7-day link leads to %s", b.location())
	}
	b.do("open the endpoints list", chromedp.Navigate(stack.apiURL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("td meter")))
	b.screenshot("portal-6-endpoints-rate.png")

	// 8b. The event log lists the tests, and an event opens to its payload and its deliveries; the
	// endpoint's recover page counts what a recovery would resend.
	b.do("open the event log", chromedp.Navigate(stack.apiURL+"/portal/events"), chromedp.WaitVisible(chromedp.CSS("table.events")))
	// Three tests: variant B's after the endpoint's registration, and the two sent by hand.
	if n := b.eval("count the events", `document.querySelectorAll("table.events tbody tr").length + ""`); n != "3" {
		t.Fatalf("the event log lists %s events, want the 3 tests", n)
	}
	b.screenshot("portal-10-event-log.png")
	b.do("open an event", chromedp.Click(chromedp.CSS(`table.events tbody tr td a`)), chromedp.WaitVisible(chromedp.CSS("pre")))
	if got := b.eval("read the payload", `document.querySelector("pre").innerText`); !strings.Contains(got, "webhook.test") {
		t.Fatalf("the event's payload is not the test's:\n%s", got)
	}
	b.screenshot("portal-11-event.png")
	b.do("open the recover page", chromedp.Navigate(endpointPage+"/recover"), chromedp.WaitVisible(chromedp.CSS("p.count")))
	b.screenshot("portal-12-recover.png")

	// 8c. The endpoint's payload filter: tried on the account's recent events of its type without
	// saving, a malformed one refused with the fault's path, then saved.
	b.do("open the endpoint's page", chromedp.Navigate(endpointPage), chromedp.WaitVisible(chromedp.CSS(`form.filter textarea`)))
	eventType := b.eval("read the endpoint's event type", `document.querySelectorAll("dl.endpoint dd")[1].innerText`)
	example := publishExamples(t, stack, eventType, 2)
	filterText := `{"event":"` + eventType + `"}`
	b.do("try a malformed filter",
		chromedp.SendKeys(chromedp.CSS(`form.filter textarea`), `{"data":{"$bogus":1}}`),
		chromedp.Click(chromedp.CSS(`form.filter button[value=test]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.filter-error`)))
	if got := b.text("read the refusal", "p.filter-error"); !strings.Contains(got, "filter.data.$bogus") {
		t.Fatalf("a malformed filter is answered %q, want the path of the fault", got)
	}
	b.do("try a filter on the recent events",
		chromedp.SetValue(chromedp.CSS(`form.filter textarea`), filterText),
		chromedp.Click(chromedp.CSS(`form.filter button[value=test]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.filter-trial`)))
	if got := b.text("read the trial", "p.filter-trial"); !strings.Contains(got, fmt.Sprintf("passes %d of the %d", example, example)) {
		t.Fatalf("the trial says %q, want the %d events published", got, example)
	}
	b.screenshot("portal-13-filter-tried.png")
	b.do("save the filter",
		chromedp.Click(chromedp.CSS(`form.filter button[value=save]`)),
		chromedp.WaitVisible(chromedp.CSS(`code.filter-current`)))
	if got := b.text("read the saved filter", "code.filter-current"); got != filterText {
		t.Fatalf("the endpoint shows the filter %q, want %q", got, filterText)
	}
	b.screenshot("portal-14-filter-saved.png")

	// 8d. The payload version: the type's versions listed, the endpoint's selected; choosing one
	// changes it through the same use case as PATCH {"version": n}.
	if got := b.eval("read the selected version", `document.querySelector("form.version select").value`); got != "1" {
		t.Fatalf("the version form selects %q, want the endpoint's version 1", got)
	}
	b.do("change the payload version",
		chromedp.Click(chromedp.CSS(`form.version button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.version-notice`)))
	if got := b.text("read the version notice", "p.version-notice"); !strings.Contains(got, "carry version 1 of the "+eventType+" data") {
		t.Fatalf("the version change says %q", got)
	}
	b.do("scroll to the version section", chromedp.ScrollIntoView(chromedp.CSS(`#payload-version`)))
	b.screenshot("portal-15-version.png")

	// 8e. Ordering (issue 43): a malformed key is refused naming ordering.key, then data.id is
	// saved through the same use case as PATCH {"ordering"}; the page then lists the endpoint's
	// blocked lanes, none.
	b.do("open the endpoint's page", chromedp.Navigate(endpointPage), chromedp.WaitVisible(chromedp.CSS(`form.ordering input[name=key]`)))
	b.do("save a malformed ordering key",
		chromedp.SendKeys(chromedp.CSS(`form.ordering input[name=key]`), "data..id"),
		chromedp.Click(chromedp.CSS(`form.ordering button[value=save]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.ordering-error`)))
	if got := b.text("read the refusal", "p.ordering-error"); !strings.Contains(got, "ordering.key") {
		t.Fatalf("a malformed ordering key is answered %q, want the field named", got)
	}
	b.do("save the ordering key",
		chromedp.SetValue(chromedp.CSS(`form.ordering input[name=key]`), "data.id"),
		chromedp.Click(chromedp.CSS(`form.ordering button[value=save]`)),
		chromedp.WaitVisible(chromedp.CSS(`code.ordering-current`)))
	if got := b.text("read the ordering key", "code.ordering-current"); got != "data.id" {
		t.Fatalf("the endpoint shows the ordering key %q, want data.id", got)
	}
	if got := b.text("read the blocked lanes", "span.lanes-none"); got != "No lane is blocked." {
		t.Fatalf("the blocked lanes section says %q", got)
	}
	b.do("scroll to the ordering section", chromedp.ScrollIntoView(chromedp.CSS(`#ordering`)))
	b.screenshot("portal-16-ordering.png")

	// 8f. A blocked lane, skipped by hand: with the receiver down again, two events of one lane;
	// the first runs out of its schedule (1s, 1s) and the page lists its lane as blocked, the second
	// waiting behind it. Skip gives the first up, and with the receiver back the lane goes on: no
	// lane is blocked, and the second event arrives.
	fixed.Store(false)
	sequences := func() []string { // the webhook-sequence of each request to the endpoint, in order
		var out []string
		for _, r := range rc.requests("/hook") {
			if seq := r.Header.Get("webhook-sequence"); seq != "" {
				out = append(out, seq)
			}
		}
		return out
	}
	publishExamples(t, stack, eventType, 2)
	// Looked at anew by GET: a reload of the page the last form answered would post it again.
	b.do("open the endpoint's page", chromedp.Navigate(endpointPage), chromedp.WaitVisible(chromedp.CSS(`#ordering`)))
	b.waitFor("wait for the blocked lane", `document.querySelector("tr.lane form[action$='/skip'] button") !== null`, chromedp.Navigate(endpointPage))
	b.do("scroll to the blocked lanes", chromedp.ScrollIntoView(chromedp.CSS(`#blocked-lanes`)))
	b.screenshot("portal-17-blocked-lane.png")
	head := b.text("read the head's sequence", "tr.lane td:nth-child(3)")
	if got := sequences(); len(got) < 3 || slices.ContainsFunc(got, func(s string) bool { return s != head }) {
		t.Fatalf("requests before the skip carry webhook-sequence %v, want the blocked head's %s on each of its 3 attempts and nothing behind it", got, head)
	}
	fixed.Store(true)
	b.do("skip the lane's head",
		chromedp.Click(chromedp.CSS(`tr.lane form[action$='/skip'] button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.lane-notice`)))
	if got := b.text("read the skip's notice", "p.lane-notice"); !strings.Contains(got, "skipped") {
		t.Fatalf("the skip is answered %q", got)
	}
	next, _ := strconv.Atoi(head)
	eventually(t, 30*time.Second, "the event behind the skipped head delivered", func() bool {
		return slices.Contains(sequences(), strconv.Itoa(next+1))
	})
	b.do("open the endpoint's page", chromedp.Navigate(endpointPage), chromedp.WaitVisible(chromedp.CSS(`#ordering`)))
	if got := b.text("read the blocked lanes", "span.lanes-none"); got != "No lane is blocked." {
		t.Fatalf("after the skip and the next event's delivery the blocked lanes section says %q", got)
	}
	b.do("scroll to the ordering section", chromedp.ScrollIntoView(chromedp.CSS(`#ordering`)))
	b.screenshot("portal-18-lane-skipped.png")

	// 8g. A destination beyond HTTP (issue 44). The HTTPS endpoint's page says it is one; a webhook
	// into a NATS subject, made with the API (no broker needs to run for its page), shows its type,
	// its subject, its URL without the password and its token as the mask, never a secret. A
	// subject holding markup is refused naming destination.subject, kept in its field as text; a
	// new subject is saved with the token's field left empty, and the token stays.
	if got := b.text("read the HTTPS endpoint's destination", "span.destination-current"); got != "HTTPS endpoint" {
		t.Fatalf("the HTTPS endpoint's destination section says %q", got)
	}
	const natsPassword, natsToken = "e2e-nats-password", "e2e-nats-token"
	created := devAPI(t, stack, stack.apiKey, "POST", "/v2/svc/v2/webhooks", map[string]any{
		"url": "tls://hooks:" + natsPassword + "@127.0.0.1:4222", "eventType": eventType,
		"destination": map[string]any{"type": "nats", "subject": "orders.created", "token": natsToken},
	})["data"].(map[string]any)
	natsHook := fmt.Sprintf("/v2/svc/v2/webhooks/%.0f", created["id"].(float64))
	natsPage := fmt.Sprintf("%s/portal/webhooks/%.0f", stack.apiURL, created["id"].(float64))
	noSecret := func(what string) {
		t.Helper()
		page := b.eval("read the page", `document.documentElement.outerHTML`)
		if strings.Contains(page, natsPassword) || strings.Contains(page, natsToken) {
			t.Fatalf("%s shows a secret of the destination", what)
		}
	}
	b.do("open the NATS endpoint's page", chromedp.Navigate(natsPage), chromedp.WaitVisible(chromedp.CSS(`form.destination input[name=subject]`)))
	noSecret("the NATS endpoint's page")
	if typ, u, shown := b.text("read the destination's type", "dd.destination-type"), b.text("read the URL", "dd.url"),
		b.eval("read the destination", `document.querySelector("dl.destination-current").innerText`); typ != "nats" || u != "tls://hooks@127.0.0.1:4222" ||
		!strings.Contains(shown, "orders.created") || !strings.Contains(shown, "••••••••") {
		t.Fatalf("the NATS endpoint's page shows type %q, URL %q and:\n%s", typ, u, shown)
	}
	const markup = `orders.<b>bold</b>`
	b.do("save a subject holding markup",
		chromedp.SetValue(chromedp.CSS(`form.destination input[name=subject]`), markup),
		chromedp.Click(chromedp.CSS(`form.destination button[value=save]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.destination-error`)))
	if got, kept, bold := b.text("read the refusal", "p.destination-error"), b.eval("read the subject kept", `document.querySelector("form.destination input[name=subject]").value`),
		b.eval("look for markup", `document.querySelectorAll("#destination ~ dl b, form.destination b").length + ""`); !strings.Contains(got, "destination.subject") || kept != markup || bold != "0" {
		t.Fatalf("a subject holding markup is answered %q, the field keeps %q, %s elements made of it", got, kept, bold)
	}
	noSecret("the refusal")
	b.do("save a new subject",
		chromedp.SetValue(chromedp.CSS(`form.destination input[name=subject]`), "orders.updated"),
		chromedp.Click(chromedp.CSS(`form.destination button[value=save]`)),
		chromedp.WaitVisible(chromedp.CSS(`p.destination-notice`)))
	noSecret("the answer to the save")
	d := devAPI(t, stack, stack.apiKey, "GET", natsHook, nil)["data"].(map[string]any)["destination"].(map[string]any)
	if d["subject"] != "orders.updated" || d["token"] != "••••••••" {
		t.Fatalf("after the portal's save the API shows the destination %v, want subject orders.updated and the token kept", d)
	}
	b.do("scroll to the destination section", chromedp.ScrollIntoView(chromedp.CSS(`#destination`)))
	b.screenshot("portal-19-destination.png")

	// 20. The audit log (issue 46): the nav's link opens it; the portal's own changes above are
	// there with this session as who made them, newest first, and no secret is on the page,
	// neither the signing secrets shown above nor the destination's credentials.
	b.do("open the audit log from the nav",
		chromedp.Navigate(stack.apiURL+"/portal/"),
		chromedp.Click(chromedp.CSS(`nav a[href="/portal/audit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.audit`)))
	audit := b.text("read the audit log", "table.audit")
	for _, want := range []string{"webhook.create", "webhook.secret.rotate", "webhook.settings", "portal"} {
		if !strings.Contains(audit, want) {
			t.Fatalf("the audit log does not show %q:\n%s", want, audit)
		}
	}
	if page := b.eval("read the page", `document.documentElement.outerHTML`); strings.Contains(page, oldSecret) || strings.Contains(page, newSecret) {
		t.Fatal("the audit log shows a signing secret")
	}
	noSecret("the audit log")
	b.screenshot("portal-20-audit.png")

	// 22. The failures page (issue 46): the nav's link lists the account's failed deliveries across
	// its endpoints (the NATS endpoint's, which fails), each linking to its delivery's page.
	b.do("open the failures from the nav", chromedp.Click(chromedp.CSS(`nav a[href="/portal/failures"]`)), chromedp.WaitVisible(chromedp.CSS(`p.message`)))
	b.waitFor("a failed delivery on the failures page",
		`!!document.querySelector("table.deliveries tbody tr span.state-exhausted, table.deliveries tbody tr span.state-retrying")`, chromedp.Reload())
	b.screenshot("portal-22-failures.png")
	b.do("open a failed delivery", chromedp.Click(chromedp.CSS(`table.deliveries tbody tr td a[href^="/portal/deliveries/"]`)))
	b.waitFor("the failed delivery's page", `location.pathname.startsWith("/portal/deliveries/")`, nil)

	// 21. A read key (issue 46), issued by the operator's CLI: its portal link opens a read-only
	// session, which shows the endpoints without the form to add one and says it is read-only.
	cmd := exec.Command(webhookdBinary(t), "apikey", "create", "--owner-email", "dev@localhost", "--name", "auditor", "--scope", "read")
	cmd.Env = append(os.Environ(), "WEBHOOKD_DATA_DIR="+stack.dataDir, "WEBHOOKD_LOG_LEVEL=warn")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("webhookd apikey create --scope read: %v\n%s", err, out)
	}
	readKey := strings.TrimSpace(string(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:]))
	made := devAPI(t, stack, readKey, "POST", "/v2/svc/v2/portal-sessions", map[string]any{})["data"].(map[string]any)
	if made["readOnly"] != true {
		t.Fatalf("a read key's portal link answers readOnly %v, want true", made["readOnly"])
	}
	b.do("open the read key's link", chromedp.Navigate(made["url"].(string)), chromedp.WaitVisible(chromedp.CSS(`span.badge`)))
	if got := b.text("read the badge", "span.badge"); got != "read-only" {
		t.Fatalf("the read key's session shows the badge %q, want read-only", got)
	}
	if n := b.eval("count the create forms", `document.querySelectorAll("form.create").length + ""`); n != "0" {
		t.Fatalf("the read key's session shows %s forms to add an endpoint", n)
	}
	b.screenshot("portal-21-read-key.png")

	// 9. Embedded: the allowed origin's frame shows the portal (the session cookie is sent, the
	// two origins being one site); the other origin's frame is refused by frame-ancestors.
	b.do("open the integrator's page", chromedp.Navigate(allowed.URL), chromedp.WaitReady(chromedp.CSS("iframe#portal")))
	const endpointsTitle = "Endpoints · webhookd"
	if title, at := b.frameTitle(t, func(title, _ string) bool { return title == endpointsTitle }); title != endpointsTitle || at != stack.apiURL+"/portal/" {
		t.Fatalf("the frame on the allowed origin %s shows %q at %s, want the endpoints page", allowed.URL, title, at)
	}
	b.screenshot("portal-7-embedded.png")
	b.do("open the other site's page", chromedp.Navigate(denied.URL), chromedp.WaitReady(chromedp.CSS("iframe#portal")))
	// Chromium replaces a frame that frame-ancestors refuses with its error page.
	title, at := b.frameTitle(t, func(title, at string) bool {
		return strings.HasPrefix(at, "chrome-error:") || strings.Contains(title, "webhookd")
	})
	if strings.Contains(title, "webhookd") || !strings.HasPrefix(at, "chrome-error:") {
		t.Fatalf("the frame on %s, an origin frame-ancestors does not allow, shows %q at %s, want the browser's error page", denied.URL, title, at)
	}
	b.screenshot("portal-8-refused.png")
}

// portalLink runs `webhookd portal-link` against the stack's database, as an operator would, and
// returns the link it prints last.
func portalLink(t *testing.T, stack devStack) string {
	t.Helper()
	addr := strings.TrimPrefix(stack.apiURL, "http://")
	cmd := exec.Command(webhookdBinary(t), "portal-link", "--owner-email", "dev@localhost")
	cmd.Env = append(os.Environ(), "WEBHOOKD_DATA_DIR="+stack.dataDir, "WEBHOOKD_HTTP_ADDR="+addr, "WEBHOOKD_LOG_LEVEL=warn")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("webhookd portal-link: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	link := lines[len(lines)-1]
	if !strings.HasPrefix(link, stack.apiURL+"/portal/enter?token=") {
		t.Fatalf("webhookd portal-link printed %q", out)
	}
	return link
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// text is the text of the first element matching css.
func (b *browser) text(step, css string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, uiStepTimeout)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(css)))
	if err != nil {
		b.fatal(step, err)
	}
	return strings.TrimSpace(v)
}

// frameTitle is the document title and address of the page's first iframe, the title read in an isolated world of that
// frame (the parent page, on another origin, may not read it), or "" when the frame has no
// document of its own. It polls until done holds, or a step's time has passed.
func (b *browser) frameTitle(t *testing.T, done func(title, frameURL string) bool) (title, frameURL string) {
	t.Helper()
	read := func(ctx context.Context, tg *chromedp.Target) (string, error) {
		tree, err := cdp.Call(ctx, tg, page.GetFrameTree, cdp.Empty{})
		if err != nil {
			return "", err
		}
		if len(tree.FrameTree.ChildFrames) == 0 {
			return "", fmt.Errorf("the page has no frame")
		}
		frame := tree.FrameTree.ChildFrames[0].Frame
		frameURL = frame.URL
		world, err := cdp.Call(ctx, tg, page.CreateIsolatedWorld, page.CreateIsolatedWorldParams{FrameID: frame.ID, WorldName: "portal-test"})
		if err != nil {
			return "", nil // no document to run in: not the portal
		}
		byValue := true
		res, err := cdp.Call(ctx, tg, runtime.Evaluate, runtime.EvaluateParams{Expression: "document.title", ContextID: world.ExecutionContextID, ReturnByValue: &byValue})
		if err != nil || res.ExceptionDetails != nil || res.Result == nil {
			return "", err
		}
		var title string
		if err := json.Unmarshal(res.Result.Value, &title); err != nil {
			return "", err
		}
		return title, nil
	}
	deadline := time.Now().Add(uiStepTimeout)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, uiStepTimeout)
		title, err := chromedp.Run(ctx, read)
		cancel()
		if err == nil && done(title, frameURL) {
			return title, frameURL
		}
		if time.Now().After(deadline) {
			if err != nil {
				b.fatal("read the frame's title", err)
			}
			return title, frameURL
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestPortalEmbeddedAcrossSites: a page of another site (localhost, beside the portal on
// 127.0.0.1) that WEBHOOKD_PORTAL_FRAME_ANCESTORS allows embeds a portal link. The link is
// exchanged inside the frame and the portal's pages open there: the session cookie is SameSite=None
// and Partitioned, as a Lax cookie is sent in no cross-site frame.
func TestPortalEmbeddedAcrossSites(t *testing.T) {
	besideOthers(t)
	var link atomic.Value
	product := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>An integrator's product</title><iframe id="portal" src="%s" width="1300" height="700"></iframe>`, link.Load())
	}))
	t.Cleanup(product.Close)
	_, port, err := net.SplitHostPort(strings.TrimPrefix(product.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	productURL := "http://localhost:" + port // another site than 127.0.0.1
	stack := startDevStack(t, webhookdBinary(t), []string{"WEBHOOKD_PORTAL_FRAME_ANCESTORS='self' " + productURL})
	link.Store(portalLink(t, stack))

	b := startBrowser(t)
	b.do("open the integrator's page", chromedp.Navigate(productURL), chromedp.WaitReady(chromedp.CSS("iframe#portal")))
	// A frame of another site runs in a process of its own: it is a target of its own, not a
	// child in the page's frame tree.
	var frame *target.Info
	eventually(t, uiStepTimeout, "the cross-site frame at the endpoints page", func() bool {
		targets, err := chromedp.Targets(b.ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range targets {
			if tg.Type == "iframe" && tg.URL == stack.apiURL+"/portal/" {
				frame = tg
				return true
			}
		}
		return false
	})
	b.screenshot("portal-9-embedded-cross-site.png")
	// Its document is the endpoints page, not the page that asks for a new link (the session
	// cookie was not sent) nor an error page. Attached last: leaving the frame's target ends the tab.
	ctx, cancel := chromedp.NewContext(b.ctx, chromedp.WithTargetID(frame.TargetID))
	defer cancel()
	if title, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.title")); err != nil || title != "Endpoints · webhookd" {
		t.Fatalf("the frame on %s shows %q (%v), want the endpoints page", productURL, title, err)
	}
}

// publishExamples publishes n events of eventType (the catalog's example of its data) through
// variant B's API with the dev stack's key, and returns n once the API accepted them all.
func publishExamples(t *testing.T, stack devStack, eventType string, n int) int {
	t.Helper()
	var example any
	for _, it := range devAPI(t, stack, stack.apiKey, "GET", "/v2/svc/v2/event-types", nil)["data"].([]any) {
		if info := it.(map[string]any); info["type"] == eventType {
			example = info["example"]
		}
	}
	if example == nil {
		t.Fatalf("no example of %s in the catalog", eventType)
	}
	for range n {
		devAPI(t, stack, stack.apiKey, "POST", "/v2/svc/v2/events", map[string]any{"event": eventType, "data": example})
	}
	return n
}

// devAPI calls variant B's API of the dev stack with key, and fails the test on anything but a
// success.
func devAPI(t *testing.T, stack devStack, key, method, path string, body any) map[string]any {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, stack.apiURL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %v %v", method, path, resp.StatusCode, out, err)
	}
	return out
}
