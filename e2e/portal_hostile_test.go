//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPortalHostileInputs is what a curious or hostile person tries in the portal, in Chromium: a
// link opened a second time, another account's endpoint and delivery by their ids, forms posted
// without their CSRF token, and markup in what they type and in an event's payload, also where the
// audit log and the failures page show it. Each is refused or shown as text, nothing they typed
// runs, and no page shows another account's data.
func TestPortalHostileInputs(t *testing.T) {
	besideOthers(t)
	rc := startReceiver(t)
	// Paths holding /fail answer 500: their deliveries fail and wait for their next attempt.
	rc.setRespond(func(_ int, path string, w http.ResponseWriter) {
		if strings.Contains(path, "/fail") {
			w.WriteHeader(http.StatusInternalServerError)
		}
	})
	stack := startDevStack(t, webhookdBinary(t), []string{"WEBHOOKD_ALLOW_PRIVATE_TARGETS=true", "WEBHOOKD_EXTRA_CA_FILE=" + rc.caFile})
	link := portalLink(t, stack)
	b := startBrowser(t)

	// 1. The link opens once; the second time it is refused, and the token is not in the address.
	b.do("open the portal link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("form.create")))
	b.do("open the link again", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := b.text("read the page", "main"); !strings.Contains(got, "already opened") {
		t.Fatalf("a link opened twice shows:\n%s", got)
	}

	// 2. Markup in the URL it registers: shown as text on the endpoints page, never run.
	hostile := rc.url(`/hook/"><script>alert(1)</script><img src=x onerror=alert(2)>`)
	b.do("open the endpoints page", chromedp.Navigate(stack.apiURL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("form.create")))
	b.do("register a URL with markup in it",
		chromedp.SendKeys(chromedp.CSS(`form.create input[name=url]`), hostile),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)))
	b.waitFor("the endpoint created", `document.title.startsWith("Endpoint created")`, nil)
	b.do("back to the endpoints page", chromedp.Navigate(stack.apiURL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("td.url a")))
	if got := b.text("read the URL", "td.url a"); !strings.Contains(got, "<script>alert(1)</script>") {
		t.Fatalf("the endpoint's URL shows as %q, want the markup as text", got)
	}
	if n := b.eval("count injected elements", `document.querySelectorAll("img[src=x], script:not([src])").length + ""`); n != "0" {
		t.Fatalf("%s elements of the typed markup on the endpoints page", n)
	}

	// 2b. Markup in an event's payload (a fan's name): the event's page shows it as text.
	var lead map[string]any
	for _, it := range devAPI(t, stack, stack.apiKey, "GET", "/v2/svc/v2/event-types", nil)["data"].([]any) {
		if info := it.(map[string]any); info["type"] == "lead.captured" {
			lead = info["example"].(map[string]any)
		}
	}
	lead["name"] = `</pre><script>alert(3)</script><img src=x onerror=alert(4)>`
	ev := devAPI(t, stack, stack.apiKey, "POST", "/v2/svc/v2/events", map[string]any{"event": "lead.captured", "data": lead})
	eventID := int64(ev["data"].(map[string]any)["id"].(float64))
	b.do("open the event", chromedp.Navigate(fmt.Sprintf("%s/portal/events/%d", stack.apiURL, eventID)), chromedp.WaitVisible(chromedp.CSS("pre")))
	if got := b.text("read the payload", "pre"); !strings.Contains(got, "<script>alert(3)</script>") {
		t.Fatalf("the event's payload shows as %q, want the markup as text", got)
	}
	if n := b.eval("count injected elements", `document.querySelectorAll("img[src=x], script:not([src])").length + ""`); n != "0" {
		t.Fatalf("%s elements of the payload's markup on the event's page", n)
	}
	b.screenshot("portal-hostile-payload.png")

	// 3. Another account's endpoint, by its id: not found, as an id that does not exist.
	other := createOtherAccountWebhook(t, stack, rc.url("/other"))
	b.do("open another account's endpoint", chromedp.Navigate(fmt.Sprintf("%s/portal/webhooks/%d", stack.apiURL, other)), chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := b.text("read the page", "main"); !strings.Contains(got, "no such endpoint") || strings.Contains(got, rc.url("/other")) {
		t.Fatalf("another account's endpoint shows:\n%s", got)
	}

	// 4. A form posted without its CSRF token (the hidden field removed, as a forged form would
	// lack it): refused, and nothing changes.
	b.do("open the endpoints page", chromedp.Navigate(stack.apiURL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("form.create")))
	b.eval("remove the form's token", `(document.querySelector('form.create input[name=csrf]').remove(), "removed")`)
	b.do("post the create form without its token",
		chromedp.SendKeys(chromedp.CSS(`form.create input[name=url]`), rc.url("/forged")),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)))
	b.waitFor("the refusal", `document.title.startsWith("Form expired")`, nil)
	if got := b.text("read the page", "main"); !strings.Contains(got, "did not come from your portal session") {
		t.Fatalf("a form without its token shows:\n%s", got)
	}
	b.do("open the endpoints page", chromedp.Navigate(stack.apiURL+"/portal/"), chromedp.WaitVisible(chromedp.CSS("form.create")))
	if n := b.eval("count the forged endpoints", `[...document.querySelectorAll("td.url a")].filter(a => a.innerText.includes("/forged")).length + ""`); n != "0" {
		t.Fatalf("the forged form made %s endpoints", n)
	}

	// 5. Markup in a URL whose deliveries fail: the failures page lists its test event's failed
	// delivery, the URL as text; another account's failed delivery is not listed, and opened by
	// its id it is not found.
	failing := rc.url(`/fail/"><script>alert(5)</script><img src=x onerror=alert(6)>`)
	b.do("register a failing URL with markup in it",
		chromedp.SendKeys(chromedp.CSS(`form.create input[name=url]`), failing),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)))
	b.waitFor("the endpoint created", `document.title.startsWith("Endpoint created")`, nil)
	otherFailing := createOtherAccountWebhook(t, stack, rc.url("/fail-other"))
	openFailures := chromedp.Navigate(stack.apiURL + "/portal/failures")
	b.do("open the failures page", openFailures)
	b.waitFor("the failed test delivery listed", `[...document.querySelectorAll("td.url a")].some(a => a.innerText.includes("alert(5)"))`, openFailures)
	eventually(t, time.Minute, "the other account's test delivery to fail", func() bool { return len(rc.requests("/fail-other")) > 0 })
	b.do("open the failures page again", openFailures, chromedp.WaitVisible(chromedp.CSS("table.deliveries")))
	if got := b.text("read the failures", "table.deliveries"); !strings.Contains(got, "<script>alert(5)</script>") || strings.Contains(got, "/fail-other") {
		t.Fatalf("the failures page shows:\n%s\nwant the markup as text and none of the other account's deliveries", got)
	}
	if n := b.eval("count injected elements", `document.querySelectorAll("img[src=x], script:not([src])").length + ""`); n != "0" {
		t.Fatalf("%s elements of the URL's markup on the failures page", n)
	}
	foreign := otherDelivery(t, stack, otherFailing)
	b.do("open another account's delivery", chromedp.Navigate(fmt.Sprintf("%s/portal/deliveries/%d", stack.apiURL, foreign)), chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := b.text("read the page", "main"); !strings.Contains(got, "no such page") || strings.Contains(got, "/fail-other") {
		t.Fatalf("another account's delivery shows:\n%s", got)
	}
	b.do("a failures page after another account's delivery", chromedp.Navigate(fmt.Sprintf("%s/portal/failures?before=%d", stack.apiURL, foreign+1)), chromedp.WaitVisible(chromedp.CSS("h1")))
	if got := b.text("read the page", "main"); strings.Contains(got, "/fail-other") {
		t.Fatalf("a failures page whose cursor follows another account's delivery shows it:\n%s", got)
	}

	// 6. The failed delivery's resend form posted without its CSRF token: refused, and no resend is
	// recorded (step 7; a scheduled retry may be attempted meanwhile, so the receiver cannot tell).
	b.do("open the failures page", openFailures, chromedp.WaitVisible(chromedp.CSS("table.deliveries")))
	b.do("open the failed delivery", chromedp.Click(chromedp.CSS(`table.deliveries tr td:nth-child(2) a`)),
		chromedp.WaitVisible(chromedp.CSS(`form[action$="/resend"]`)))
	b.eval("remove the form's token", `(document.querySelector('form[action$="/resend"] input[name=csrf]').remove(), "removed")`)
	b.do("post the resend form without its token", chromedp.Click(chromedp.CSS(`form[action$="/resend"] button[type=submit]`)))
	b.waitFor("the refusal", `document.title.startsWith("Form expired")`, nil)

	// 7. The audit log: the endpoints made here are listed, their URLs' markup as text; the other
	// account's are not, and neither is the forged resend.
	b.do("open the audit log", chromedp.Navigate(stack.apiURL+"/portal/audit"), chromedp.WaitVisible(chromedp.CSS("table.audit")))
	got := b.text("read the audit log", "table.audit")
	if !strings.Contains(got, "<script>alert(1)</script>") || !strings.Contains(got, "webhook.create") || strings.Contains(got, "/other") || strings.Contains(got, "/fail-other") || strings.Contains(got, "delivery.retry") {
		t.Fatalf("the audit log shows:\n%s\nwant this account's endpoints, markup as text, and none of the other account's", got)
	}
	if n := b.eval("count injected elements", `document.querySelectorAll("img[src=x], script:not([src])").length + ""`); n != "0" {
		t.Fatalf("%s elements of the URLs' markup on the audit log", n)
	}
	b.screenshot("portal-hostile-audit.png")
}

// otherDelivery is the id of a delivery of another account's webhook, read with that account's
// key (createOtherAccountWebhook's, the newest).
func otherDelivery(t *testing.T, stack devStack, webhook int64) int64 {
	t.Helper()
	key := otherAccountKey(t, stack)
	list := devAPI(t, stack, key, "GET", fmt.Sprintf("/v2/svc/v2/webhooks/%d/deliveries", webhook), nil)["data"].([]any)
	if len(list) == 0 {
		t.Fatalf("another account's webhook %d has no delivery", webhook)
	}
	return int64(list[0].(map[string]any)["id"].(float64))
}

// createOtherAccountWebhook registers a webhook of another account (its own API key, made by the
// operator's CLI) and returns its id.
func createOtherAccountWebhook(t *testing.T, stack devStack, url string) int64 {
	t.Helper()
	body := devAPI(t, stack, otherAccountKey(t, stack), "POST", "/v2/svc/v2/webhooks", map[string]any{"url": url, "eventType": "lead.captured"})
	return int64(body["data"].(map[string]any)["id"].(float64))
}

// otherAccountKey is a new API key of the other account (someone-else@example.com), made by the
// operator's CLI.
func otherAccountKey(t *testing.T, stack devStack) string {
	t.Helper()
	addr := strings.TrimPrefix(stack.apiURL, "http://")
	cmd := exec.Command(webhookdBinary(t), "apikey", "create", "--owner-email", "someone-else@example.com")
	cmd.Env = append(os.Environ(), "WEBHOOKD_DATA_DIR="+stack.dataDir, "WEBHOOKD_HTTP_ADDR="+addr, "WEBHOOKD_LOG_LEVEL=warn")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("webhookd apikey create: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
