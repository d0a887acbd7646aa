//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestPortalNotifications is the portal's notifications page in Chromium, as an owner uses it:
// add an operational webhook (its secret shown once), send it a test notice, which its receiver
// gets and the page lists; markup typed into a channel's URL shows as text; a form posted
// without its CSRF token is refused and adds nothing.
func TestPortalNotifications(t *testing.T) {
	besideOthers(t)
	rc := startReceiver(t)
	stack := startDevStack(t, webhookdBinary(t), []string{"WEBHOOKD_ALLOW_PRIVATE_TARGETS=true", "WEBHOOKD_EXTRA_CA_FILE=" + rc.caFile})
	link := portalLink(t, stack)
	b := startBrowser(t)
	b.do("open the portal link", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("form.create")))

	// Add an operational webhook whose URL holds markup.
	hostile := rc.url(`/ops/"><script>alert(1)</script><img src=x onerror=alert(2)>`)
	b.do("open the notifications page", chromedp.Navigate(stack.apiURL+"/portal/notifications"), chromedp.WaitVisible(chromedp.CSS("form.create")))
	b.do("add an operational webhook",
		chromedp.SetValue(chromedp.CSS(`form.create select[name=kind]`), "webhook"),
		chromedp.SendKeys(chromedp.CSS(`form.create input[name=url]`), hostile),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)))
	b.do("the channel created", chromedp.WaitVisible(chromedp.CSS("pre.secret")))
	if secret := b.text("read the secret", "pre.secret"); !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the created channel's secret shows as %q", secret)
	}
	b.do("back to notifications", chromedp.Navigate(stack.apiURL+"/portal/notifications"), chromedp.WaitVisible(chromedp.CSS("table.channels")))
	if got := b.eval("read the channel's URL", `[...document.querySelectorAll("table.channels td.url")].map(td => td.innerText).join("\n")`); !strings.Contains(got, "<script>alert(1)</script>") {
		t.Fatalf("the channels' URLs show as %q, want the markup as text", got)
	}
	if n := b.eval("count injected elements", `document.querySelectorAll("img[src=x], script:not([src])").length + ""`); n != "0" {
		t.Fatalf("%s elements of the typed markup on the notifications page", n)
	}
	if strings.Contains(b.text("read the page", "main"), "whsec_") {
		t.Fatal("the notifications page shows a channel's secret again")
	}

	// Send it a test: its receiver gets a notice.test, and the page lists it.
	b.eval("send the operational webhook a test", `(document.querySelector('tr[id^=channel-]:last-child form[action$="/test"] button').click(), "sent")`)
	eventually(t, 30*time.Second, "the test notice at the receiver", func() bool {
		for _, r := range rc.requests("") {
			if strings.Contains(string(r.Body), `"type":"notice.test"`) {
				return true
			}
		}
		return false
	})
	b.do("reload notifications", chromedp.Navigate(stack.apiURL+"/portal/notifications"), chromedp.WaitVisible(chromedp.CSS("table.notices")))
	if got := b.text("read the notices", "table.notices"); !strings.Contains(got, "notice.test") {
		t.Fatalf("the notices list shows:\n%s", got)
	}
	b.screenshot("portal-notifications.png")

	// A form without its CSRF token: refused, nothing added.
	before := b.eval("count channels", `document.querySelectorAll("table.channels tbody tr").length + ""`)
	b.eval("remove the form's token", `(document.querySelector('form.create input[name=csrf]').remove(), "removed")`)
	b.do("post the add form without its token",
		chromedp.SendKeys(chromedp.CSS(`form.create input[name=url]`), rc.url("/forged")),
		chromedp.Click(chromedp.CSS(`form.create button[type=submit]`)))
	b.waitFor("the refusal", `document.title.startsWith("Form expired")`, nil)
	b.do("reload notifications", chromedp.Navigate(stack.apiURL+"/portal/notifications"), chromedp.WaitVisible(chromedp.CSS("table.channels")))
	if after := b.eval("count channels", `document.querySelectorAll("table.channels tbody tr").length + ""`); after != before {
		t.Fatalf("channels went from %s to %s after a forged form", before, after)
	}
}
