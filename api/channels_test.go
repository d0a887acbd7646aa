package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

// channels is the variant's notification-endpoints collection.
func (v variantCase) channels() string {
	return strings.TrimSuffix(v.collection, "/webhooks") + "/notification-endpoints"
}

// notices is the variant's notices list.
func (v variantCase) notices() string {
	return strings.TrimSuffix(v.collection, "/webhooks") + "/notices"
}

func channelBody(kind, url string, types ...string) string {
	if types == nil {
		return fmt.Sprintf(`{"kind":%q,"url":%q}`, kind, url)
	}
	return fmt.Sprintf(`{"kind":%q,"url":%q,"types":["%s"]}`, kind, url, strings.Join(types, `","`))
}

// ids reads the ids of a list answer.
func ids(t *testing.T, r response) []string {
	t.Helper()
	var out []string
	for _, item := range r.list(t) {
		out = append(out, jsonNumber(item.(map[string]any)["id"]))
	}
	return out
}

// byKind finds the first item of a list answer of that kind.
func byKind(t *testing.T, r response, kind string) map[string]any {
	t.Helper()
	for _, item := range r.list(t) {
		if m := item.(map[string]any); m["kind"] == kind {
			return m
		}
	}
	return nil
}

// TestChannels (issue 30): an account's notification endpoints through the API of both variants on
// both databases: create (a secret for an operational webhook only), list with the e-mail, read,
// change, test and delete, and webhooks and endpoints never in each other's lists or lookups.
func TestChannels(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		key := newKey(t, e.db)
		auth := v.auth(key)

		r := e.do(t, "POST", v.channels(), auth, channelBody("webhook", "https://ops.example.com/notices"))
		r.expect(t, http.StatusCreated, "")
		v.okEnvelope(t, r)
		ops := r.data(t)
		if s, _ := ops["secret"].(string); !strings.HasPrefix(s, "whsec_") || ops["kind"] != "webhook" || len(ops["types"].([]any)) != len(model.DefaultNoticeTypes) {
			t.Fatalf("operational webhook: %s", r.raw)
		}
		opsID := jsonNumber(ops["id"])
		r = e.do(t, "POST", v.channels(), auth, channelBody("chat", "https://chat.example.com/in", model.NoticeExhausted, model.NoticeFailing))
		r.expect(t, http.StatusCreated, "")
		chat := r.data(t)
		if _, ok := chat["secret"]; ok || chat["kind"] != "chat" || fmt.Sprint(chat["types"]) != "[delivery.exhausted webhook.failing]" {
			t.Fatalf("chat: %s", r.raw)
		}
		chatID := jsonNumber(chat["id"])
		hook := e.do(t, "POST", v.collection, auth, createBody("https://receiver.example.com/", v.eventType))
		hook.expect(t, http.StatusCreated, "")
		hookID := jsonNumber(hook.data(t)["id"])

		list := e.do(t, "GET", v.channels(), auth, "")
		list.expect(t, http.StatusOK, "")
		v.okEnvelope(t, list)
		email := byKind(t, list, "email")
		if email == nil || !strings.HasPrefix(email["url"].(string), "mailto:owner") {
			t.Fatalf("no e-mail endpoint: %s", list.raw)
		}
		if got := ids(t, list); len(got) != 3 || slices.Contains(got, hookID) || !slices.Contains(got, opsID) || !slices.Contains(got, chatID) {
			t.Fatalf("endpoints %v, want the e-mail, %s and %s, not webhook %s", got, opsID, chatID, hookID)
		}
		hooks := e.do(t, "GET", v.collection, auth, "")
		if got := ids(t, hooks); len(got) != 1 || got[0] != hookID {
			t.Fatalf("webhooks %v, want only %s", got, hookID)
		}

		r = e.do(t, "GET", v.channels()+"/"+opsID, auth, "")
		r.expect(t, http.StatusOK, "")
		if _, ok := r.data(t)["secret"]; ok {
			t.Fatalf("get shows the secret: %s", r.raw)
		}
		e.do(t, "GET", v.channels()+"/"+hookID, auth, "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "GET", v.collection+"/"+opsID, auth, "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "DELETE", v.collection+"/"+opsID, auth, "").expectError(t, v, http.StatusNotFound, "")
		e.do(t, "GET", v.channels()+"/x1", auth, "").expectError(t, v, http.StatusBadRequest, "id")
		other := v.auth(newKey(t, e.db))
		for _, m := range []string{"GET", "DELETE"} {
			e.do(t, m, v.channels()+"/"+opsID, other, "").expectError(t, v, http.StatusNotFound, "")
		}
		e.do(t, "PATCH", v.channels()+"/"+opsID, other, `{"types":null}`).expectError(t, v, http.StatusNotFound, "")
		e.do(t, "POST", v.channels()+"/"+opsID+"/test", other, "").expectError(t, v, http.StatusNotFound, "")

		r = e.do(t, "PATCH", v.channels()+"/"+opsID, auth, `{"types":["delivery.exhausted"]}`)
		r.expect(t, http.StatusOK, "")
		if fmt.Sprint(r.data(t)["types"]) != "[delivery.exhausted]" || r.data(t)["url"] != "https://ops.example.com/notices" {
			t.Fatalf("patch types: %s", r.raw)
		}
		r = e.do(t, "PUT", v.channels()+"/"+opsID, auth, `{"url":"https://ops2.example.com/n","types":null}`)
		r.expect(t, http.StatusOK, "")
		if len(r.data(t)["types"].([]any)) != len(model.DefaultNoticeTypes) || r.data(t)["url"] != "https://ops2.example.com/n" {
			t.Fatalf("put url, reset types: %s", r.raw)
		}
		e.do(t, "PATCH", v.channels()+"/"+opsID, auth, `{"kind":"chat"}`).expectError(t, v, http.StatusUnprocessableEntity, "kind")
		for _, bad := range []string{`{"types":"webhook.failing"}`, `{"types":[1]}`, `{"url":5}`} {
			e.do(t, "PATCH", v.channels()+"/"+opsID, auth, bad).expectError(t, v, http.StatusBadRequest, strings.Split(bad, `"`)[1])
		}
		for _, bad := range []string{`{"types":[]}`, `{"types":["webhook.failing","webhook.failing"]}`, `{"url":"https://10.0.0.1/"}`} {
			e.do(t, "PUT", v.channels()+"/"+opsID, auth, bad).expectError(t, v, http.StatusUnprocessableEntity, strings.Split(bad, `"`)[1])
		}
		e.do(t, "PATCH", v.channels()+"/"+jsonNumber(email["id"]), auth, `{"url":"https://x.example.com/"}`).expectError(t, v, http.StatusUnprocessableEntity, "url")
		r = e.do(t, "PATCH", v.channels()+"/"+jsonNumber(email["id"]), auth, `{"types":["webhook.disabled"]}`)
		r.expect(t, http.StatusOK, "")

		r = e.do(t, "POST", v.channels()+"/"+chatID+"/test", auth, "")
		r.expect(t, http.StatusAccepted, "")
		sent := r.data(t)
		var d model.Delivery
		if err := e.db.NewSelect().Model(&d).Where("id = ?", jsonNumber(sent["deliveryId"])).Scan(context.Background()); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(d.WebhookID) != chatID || fmt.Sprint(d.EventID) != jsonNumber(sent["eventId"]) || sent["type"] != model.NoticeTest {
			t.Fatalf("test notice's delivery %+v for %s", d, r.raw)
		}
		n := e.do(t, "GET", v.notices()+"?limit=1", auth, "")
		n.expect(t, http.StatusOK, "")
		if got := n.list(t); len(got) != 1 || got[0].(map[string]any)["type"] != model.NoticeTest || jsonNumber(got[0].(map[string]any)["webhookId"]) != chatID {
			t.Fatalf("notices: %s", n.raw)
		}

		for _, id := range []string{chatID, jsonNumber(email["id"])} {
			r = e.do(t, "DELETE", v.channels()+"/"+id, auth, "")
			r.expect(t, http.StatusOK, "")
			v.okEnvelope(t, r)
			e.do(t, "GET", v.channels()+"/"+id, auth, "").expectError(t, v, http.StatusNotFound, "")
		}
		list = e.do(t, "GET", v.channels(), auth, "")
		if got := ids(t, list); len(got) != 1 || got[0] != opsID {
			t.Fatalf("after deleting the chat and the e-mail: %v, want only %s (the e-mail is not made again)", got, opsID)
		}
	})
}

// TestChannelsRefused: each refusal of a create names its field, on both variants and databases,
// and the account's limit counts its e-mail.
func TestChannelsRefused(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		for _, c := range []struct {
			name, body string
			status     int
			field      string
		}{
			{"no kind", `{"url":"https://ops.example.com/"}`, 422, "kind"},
			{"e-mail", channelBody("email", "https://ops.example.com/"), 422, "kind"},
			{"unknown kind", channelBody("sms", "https://ops.example.com/"), 422, "kind"},
			{"no url", `{"kind":"webhook"}`, 422, "url"},
			{"private url", channelBody("webhook", "https://10.1.2.3/hook"), 422, "url"},
			{"loopback url", channelBody("chat", "https://127.0.0.1/hook"), 422, "url"},
			{"unknown type", channelBody("webhook", "https://ops.example.com/", "webhook.exploded"), 422, "types"},
			{"event type", channelBody("webhook", "https://ops.example.com/", v.eventType), 422, "types"},
			{"test type", channelBody("webhook", "https://ops.example.com/", model.NoticeTest), 422, "types"},
			{"twice", channelBody("webhook", "https://ops.example.com/", model.NoticeFailing, model.NoticeFailing), 422, "types"},
			{"empty types", `{"kind":"webhook","url":"https://ops.example.com/","types":[]}`, 422, "types"},
			{"types not strings", `{"kind":"webhook","url":"https://ops.example.com/","types":[1]}`, 400, "types"},
		} {
			r := e.do(t, "POST", v.channels(), auth, c.body)
			r.expectError(t, v, c.status, c.field)
			if strings.Contains(string(r.raw), "internal") {
				t.Errorf("%s: %s", c.name, r.raw)
			}
		}
		// The e-mail is the first of the ten.
		for i := range 9 {
			e.do(t, "POST", v.channels(), auth, channelBody("chat", fmt.Sprintf("https://chat%d.example.com/", i))).expect(t, http.StatusCreated, "")
		}
		e.do(t, "POST", v.channels(), auth, channelBody("chat", "https://one-too-many.example.com/")).expect(t, http.StatusUnprocessableEntity, "limit_exceeded")
		if got := ids(t, e.do(t, "GET", v.channels(), auth, "")); len(got) != 10 {
			t.Fatalf("%d endpoints, want 10", len(got))
		}
		e.do(t, "GET", v.notices()+"?limit=0", auth, "").expectError(t, v, http.StatusUnprocessableEntity, "limit")
		e.do(t, "GET", v.notices()+"?limit=x", auth, "").expectError(t, v, http.StatusBadRequest, "limit")
	})
}

// TestChannelReceivesNotices: a notice recorded about a webhook of the account (as the engine
// records one) gets a delivery to each endpoint created through the API that wants its type, and
// none to one that does not; GET <prefix>/notices lists it.
func TestChannelReceivesNotices(t *testing.T) {
	forEach(t, func(t *testing.T, e *testEnv, v variantCase) {
		auth := v.auth(newKey(t, e.db))
		wants := jsonNumber(e.do(t, "POST", v.channels(), auth, channelBody("webhook", "https://ops.example.com/")).data(t)["id"])
		deaf := jsonNumber(e.do(t, "POST", v.channels(), auth, channelBody("chat", "https://chat.example.com/", model.NoticeExhausted)).data(t)["id"])
		hookID := jsonNumber(e.do(t, "POST", v.collection, auth, createBody("https://receiver.example.com/", v.eventType)).data(t)["id"])
		var w model.Webhook
		ctx := context.Background()
		if err := e.db.NewSelect().Model(&w).Where("id = ?", hookID).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		res, err := model.RecordNotice(ctx, e.db, notices.Rules{}, model.Notice{Type: model.NoticeFailing, Webhook: &w})
		if err != nil || res == nil {
			t.Fatalf("record notice: %v, %v", res, err)
		}
		var to []string
		for _, d := range res.Deliveries {
			to = append(to, fmt.Sprint(d.WebhookID))
		}
		if !slices.Contains(to, wants) || slices.Contains(to, deaf) || len(to) != 2 {
			t.Fatalf("deliveries to %v, want the e-mail and %s, not %s", to, wants, deaf)
		}
		n := e.do(t, "GET", v.notices(), auth, "")
		n.expect(t, http.StatusOK, "")
		got := n.list(t)
		if len(got) != 1 {
			t.Fatalf("notices: %s", n.raw)
		}
		first := got[0].(map[string]any)
		if first["type"] != model.NoticeFailing || jsonNumber(first["webhookId"]) != hookID || first["data"].(map[string]any)["url"] != "https://receiver.example.com/" {
			t.Fatalf("notice: %s", n.raw)
		}
	})
}
