package portal_test

import (
	"bytes"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/portal"
)

// formOfSize is a form carrying csrf and a field pad that makes it exactly size bytes, URL-encoded
// or multipart, with its Content-Type.
func formOfSize(t *testing.T, csrf string, size int, multi bool) (contentType string, body []byte) {
	t.Helper()
	build := func(pad string) (string, []byte) {
		if !multi {
			return "application/x-www-form-urlencoded", []byte(url.Values{"csrf": {csrf}, "pad": {pad}}.Encode())
		}
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		if err := w.SetBoundary("webhookd-test-boundary"); err != nil {
			t.Fatal(err)
		}
		for _, f := range [][2]string{{"csrf", csrf}, {"pad", pad}} {
			if err := w.WriteField(f[0], f[1]); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return w.FormDataContentType(), b.Bytes()
	}
	_, empty := build("")
	return build(strings.Repeat("x", size-len(empty)))
}

// TestFormLimitNamed (issue 27): a form one byte over the portal's 64 KiB is 413, on a page that
// names the limit, on every POST route, whether the request announced its length or sent its body
// chunked, URL-encoded or multipart. A form of exactly 64 KiB is read whole: its CSRF token counts.
func TestFormLimitNamed(t *testing.T) {
	const limit = 64 << 10
	e := newEnv(t, dbtest.SQLite(t))
	account := e.account(t)
	f := e.eventFixture(t, account.ID, model.VariantB)
	posts := 0
	for _, rt := range portal.Routes(e.srv) {
		if rt.Method != http.MethodPost {
			continue
		}
		posts++
		id := f.webhook.ID
		if strings.HasPrefix(rt.Path, portal.Prefix+"deliveries/") {
			id = f.delivery
		}
		path := strings.Replace(rt.Path, ":id", fmt.Sprint(id), 1)
		t.Run(rt.Path, func(t *testing.T) {
			for _, multi := range []bool{false, true} {
				for _, chunked := range []bool{false, true} {
					// Over the limit first: at the limit, delete and logout do what they say.
					for _, size := range []int{limit + 1, limit} {
						cookie := e.enter(t, e.link(t, account.ID, model.VariantB, false))
						ct, body := formOfSize(t, csrfOf(cookie), size, multi)
						var rd io.Reader = bytes.NewReader(body)
						if chunked {
							rd = io.MultiReader(rd) // no length known: httptest sends it as a chunked body does
						}
						req := httptest.NewRequest(http.MethodPost, path, rd)
						if chunked {
							req.TransferEncoding = []string{"chunked"}
						}
						req.Header.Set("Content-Type", ct)
						req.AddCookie(cookie)
						rec := e.serve(t, req)
						what := fmt.Sprintf("multipart %v, chunked %v, %d bytes", multi, chunked, size)
						if size == limit {
							if rec.Code == http.StatusRequestEntityTooLarge || rec.Code == http.StatusForbidden {
								t.Errorf("%s: %d, want the form read whole:\n%s", what, rec.Code, rec.Body)
							}
							continue
						}
						if rec.Code != http.StatusRequestEntityTooLarge || !strings.HasPrefix(rec.Header().Get("Content-Type"), "text/html") ||
							!strings.Contains(rec.Body.String(), "64 KiB") {
							t.Errorf("%s: %d %q, want a 413 page naming 64 KiB:\n%s", what, rec.Code, rec.Header().Get("Content-Type"), rec.Body)
						}
					}
				}
			}
		})
	}
	if posts == 0 {
		t.Fatal("the portal routes no POST")
	}
}
