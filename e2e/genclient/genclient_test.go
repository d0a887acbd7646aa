// Package genclient_test drives a running webhookd through a client generated from
// docs/openapi.yaml by oapi-codegen, with no configuration: what an integrator gets first try.
//
// The client (client/client.gen.go) is not committed: e2e/genclient_test.go (TestGeneratedClient,
// build tag e2e) generates it, starts the stack and runs this test with its address and keys.
package genclient_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/oapi-codegen/nullable"

	"github.com/webhookd/webhookd/e2e/genclient/client"
)

// target is the stack under test, from the environment TestGeneratedClient sets.
type target struct {
	apiURL, keyA, bearerB, receiver string
	// readKey is a read key of the same account (docs/api.md, "Scoped API keys").
	readKey string
}

func targetFromEnv(t *testing.T) target {
	t.Helper()
	tg := target{
		apiURL:   os.Getenv("WEBHOOKD_API_URL"),
		keyA:     os.Getenv("WEBHOOKD_API_KEY_A"),
		bearerB:  os.Getenv("WEBHOOKD_BEARER_B"),
		receiver: os.Getenv("WEBHOOKD_RECEIVER_URL"),
		readKey:  os.Getenv("WEBHOOKD_READ_KEY"),
	}
	if tg.apiURL == "" || tg.keyA == "" || tg.bearerB == "" || tg.receiver == "" || tg.readKey == "" {
		t.Fatal("WEBHOOKD_API_URL, WEBHOOKD_API_KEY_A, WEBHOOKD_BEARER_B, WEBHOOKD_RECEIVER_URL and WEBHOOKD_READ_KEY must be set: " +
			"this test runs against a live stack, started by TestGeneratedClient (go test -tags e2e -run TestGeneratedClient ./e2e/ in the main module)")
	}
	return tg
}

func newClient(t *testing.T, tg target, header, value string) *client.ClientWithResponses {
	t.Helper()
	c, err := client.NewClientWithResponses(tg.apiURL,
		client.WithHTTPClient(&http.Client{Timeout: 10 * time.Second}),
		client.WithRequestEditorFn(func(_ context.Context, req *http.Request) error {
			req.Header.Set(header, value)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// must fails the test on a transport error or an unexpected status, quoting the body.
func must(t *testing.T, what string, err error, status, want int, body []byte) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if status != want {
		t.Fatalf("%s: status %d, want %d: %s", what, status, want, body)
	}
}

// example is the example data GET <prefix>/event-types gives for eventType, decoded into the
// generated data type (a map while the data schemas are placeholders, a struct once typed).
func example[T any](t *testing.T, types []client.EventType, eventType string) T {
	t.Helper()
	for _, et := range types {
		if et.Type != eventType {
			continue
		}
		raw, err := json.Marshal(et.Example)
		if err != nil {
			t.Fatal(err)
		}
		var data T
		if err := json.Unmarshal(raw, &data); err != nil {
			t.Fatalf("the example of %s does not decode into the generated type %T: %v", eventType, data, err)
		}
		return data
	}
	t.Fatalf("GET event-types lists no %s", eventType)
	var zero T
	return zero
}

// TestReadKey: a read key lists webhooks, is refused a change with 403 insufficient_scope in
// variant A's envelope (JSON403), and its portal link answers readOnly.
func TestReadKey(t *testing.T) {
	tg := targetFromEnv(t)
	c := newClient(t, tg, "x-api-key", tg.readKey)
	ctx := context.Background()

	list, err := c.ListWebhooksAWithResponse(ctx, &client.ListWebhooksAParams{})
	must(t, "list with a read key", err, list.StatusCode(), http.StatusOK, list.Body)

	created, err := c.CreateWebhookAWithResponse(ctx, client.CreateWebhookAJSONRequestBody{
		Url: tg.receiver + "/genclient-read", EventType: "campaign.created",
	})
	must(t, "create with a read key", err, created.StatusCode(), http.StatusForbidden, created.Body)
	if created.JSON403 == nil || created.JSON403.Code != client.ErrorCodeInsufficientScope || created.JSON403.Success {
		t.Fatalf("create with a read key: %s", created.Body)
	}

	link, err := c.CreatePortalSessionAWithResponse(ctx, client.CreatePortalSessionAJSONRequestBody{})
	must(t, "portal link with a read key", err, link.StatusCode(), http.StatusCreated, link.Body)
	if !link.JSON201.Data.ReadOnly {
		t.Fatalf("a read key's portal link is not read-only: %s", link.Body)
	}
}

func TestVariantA(t *testing.T) {
	tg := targetFromEnv(t)
	c := newClient(t, tg, "x-api-key", tg.keyA)
	ctx := context.Background()

	created, err := c.CreateWebhookAWithResponse(ctx, client.CreateWebhookAJSONRequestBody{
		Url: tg.receiver + "/genclient-a", EventType: "campaign.created",
	})
	must(t, "create", err, created.StatusCode(), http.StatusCreated, created.Body)
	id := created.JSON201.Data.Id
	if created.JSON201.Data.Secret == "" || !created.JSON201.Success {
		t.Fatalf("create: %s", created.Body)
	}

	list, err := c.ListWebhooksAWithResponse(ctx, &client.ListWebhooksAParams{})
	must(t, "list", err, list.StatusCode(), http.StatusOK, list.Body)
	found := false
	for _, w := range list.JSON200.Data {
		found = found || w.Id == id
	}
	if !found {
		t.Fatalf("list: no webhook %d: %s", id, list.Body)
	}

	got, err := c.GetWebhookAWithResponse(ctx, id)
	must(t, "get", err, got.StatusCode(), http.StatusOK, got.Body)
	if got.JSON200.Data.EventType != client.EventTypeACampaignCreated || got.JSON200.Data.RateLimit != nil {
		t.Fatalf("get: %s", got.Body)
	}

	// PUT: a new URL; the limits left out keep their values.
	put, err := c.UpdateWebhookAWithResponse(ctx, id, client.UpdateWebhookAJSONRequestBody{
		Url: tg.receiver + "/genclient-a2", MaxInFlight: nullable.NewNullableWithValue(3),
	})
	must(t, "put", err, put.StatusCode(), http.StatusOK, put.Body)
	if put.JSON200.Data.Url != tg.receiver+"/genclient-a2" || put.JSON200.Data.MaxInFlight == nil || *put.JSON200.Data.MaxInFlight != 3 {
		t.Fatalf("put: %s", put.Body)
	}

	// PATCH: set a limit, then clear it with null; the field left out is not sent, so it keeps
	// its value.
	patched, err := c.PatchWebhookAWithResponse(ctx, id, client.PatchWebhookAJSONRequestBody{RateLimit: nullable.NewNullableWithValue(50)})
	must(t, "patch rateLimit 50", err, patched.StatusCode(), http.StatusOK, patched.Body)
	if r := patched.JSON200.Data.RateLimit; r == nil || *r != 50 {
		t.Fatalf("patch rateLimit 50: %s", patched.Body)
	}
	cleared, err := c.PatchWebhookAWithResponse(ctx, id, client.PatchWebhookAJSONRequestBody{RateLimit: nullable.NewNullNullable[int]()})
	must(t, "patch rateLimit null", err, cleared.StatusCode(), http.StatusOK, cleared.Body)
	if d := cleared.JSON200.Data; d.RateLimit != nil || d.MaxInFlight == nil || *d.MaxInFlight != 3 {
		t.Fatalf("patch rateLimit null: want rateLimit null and maxInFlight 3 kept: %s", cleared.Body)
	}
	// PUT clears with null too.
	put, err = c.UpdateWebhookAWithResponse(ctx, id, client.UpdateWebhookAJSONRequestBody{
		Url: tg.receiver + "/genclient-a2", MaxInFlight: nullable.NewNullNullable[int](),
	})
	must(t, "put maxInFlight null", err, put.StatusCode(), http.StatusOK, put.Body)
	if put.JSON200.Data.MaxInFlight != nil {
		t.Fatalf("put maxInFlight null: %s", put.Body)
	}

	// Ordering (issue 43): PATCH sets it; the events of one key then go through a lane.
	ordered, err := c.PatchWebhookAWithResponse(ctx, id, client.PatchWebhookAJSONRequestBody{
		Ordering: nullable.NewNullableWithValue(client.Ordering{Key: "data.id"}),
	})
	must(t, "patch ordering", err, ordered.StatusCode(), http.StatusOK, ordered.Body)
	if o := ordered.JSON200.Data.Ordering; o == nil || o.Key != "data.id" {
		t.Fatalf("patch ordering: %s", ordered.Body)
	}

	// The operations without parameters send {} from their empty struct.
	disabled, err := c.DisableWebhookAWithResponse(ctx, id, client.DisableWebhookAJSONRequestBody{})
	must(t, "disable", err, disabled.StatusCode(), http.StatusOK, disabled.Body)
	enabled, err := c.EnableWebhookAWithResponse(ctx, id, client.EnableWebhookAJSONRequestBody{})
	must(t, "enable", err, enabled.StatusCode(), http.StatusOK, enabled.Body)

	types, err := c.ListEventTypesAWithResponse(ctx)
	must(t, "event types", err, types.StatusCode(), http.StatusOK, types.Body)
	var event client.PublishEventA
	if err := event.FromPublishCampaignCreated(client.PublishCampaignCreated{
		EventType: client.PublishCampaignCreatedEventTypeCampaignCreated,
		Data:      example[client.CampaignData](t, types.JSON200.Data, "campaign.created"),
	}); err != nil {
		t.Fatal(err)
	}
	published, err := c.PublishEventAWithResponse(ctx, nil, event)
	must(t, "publish campaign.created", err, published.StatusCode(), http.StatusAccepted, published.Body)
	if d := published.JSON202.Data; d.EventType != client.EventTypeACampaignCreated || d.Matched < 1 {
		t.Fatalf("publish: %s", published.Body)
	}

	// The delivery log across webhooks and replays (issue 46): the shapes, through the validating
	// proxy. The replay's window is in the past, before the webhook: it matches nothing.
	states := client.DeliveryLogStateParameter("pending,delivering,retrying,delivered,exhausted")
	webhookIDs := client.DeliveryLogWebhookIdParameter(strconv.FormatInt(id, 10))
	log, err := c.ListAccountDeliveriesAWithResponse(ctx, &client.ListAccountDeliveriesAParams{State: &states, WebhookId: &webhookIDs})
	must(t, "list the account's deliveries", err, log.StatusCode(), http.StatusOK, log.Body)
	if len(log.JSON200.Data) < 1 || log.JSON200.Data[0].WebhookId != id {
		t.Fatalf("the account's deliveries: %s", log.Body)
	}
	dry := true
	plan, err := c.CreateReplayAWithResponse(ctx, client.CreateReplayAJSONRequestBody{Since: time.Now().Add(-time.Hour), WebhookIds: &[]int64{id},
		StatusClasses: &[]client.StatusClass{client.StatusClassN2xx, client.StatusClassN5xx, client.StatusClassNone}, DryRun: &dry})
	must(t, "replay, dry run", err, plan.StatusCode(), http.StatusOK, plan.Body)
	until := time.Date(2020, 1, 2, 0, 0, 0, 0, time.UTC)
	replay, err := c.CreateReplayAWithResponse(ctx, client.CreateReplayAJSONRequestBody{Since: until.Add(-24 * time.Hour), Until: &until})
	must(t, "replay", err, replay.StatusCode(), http.StatusAccepted, replay.Body)
	if replay.JSON202.Data.Matched != 0 {
		t.Fatalf("replay of 2020: %s", replay.Body)
	}
	readReplay, err := c.GetReplayAWithResponse(ctx, replay.JSON202.Data.Id)
	must(t, "read the replay", err, readReplay.StatusCode(), http.StatusOK, readReplay.Body)
	canceled, err := c.CancelReplayAWithResponse(ctx, replay.JSON202.Data.Id)
	must(t, "cancel the replay", err, canceled.StatusCode(), http.StatusOK, canceled.Body)

	// The lanes: whether the event's lane still has a head depends on the receiver's pace, so
	// only the shapes are held here (docs/openapi.yaml, through the validating proxy); a lane that
	// does not exist is 404 whatever is asked of it.
	blocked := client.BlockedParameter(false)
	lanes, err := c.ListLanesAWithResponse(ctx, id, &client.ListLanesAParams{Blocked: &blocked})
	must(t, "list lanes", err, lanes.StatusCode(), http.StatusOK, lanes.Body)
	for _, l := range lanes.JSON200.Data {
		one, err := c.GetLaneAWithResponse(ctx, id, l.Id)
		must(t, "get lane", err, one.StatusCode(), http.StatusOK, one.Body)
	}
	head := client.LaneHeadParameter(1)
	missing, err := c.SkipLaneAWithResponse(ctx, id, 1<<40, &client.SkipLaneAParams{Head: &head}, client.SkipLaneAJSONRequestBody{})
	must(t, "skip a lane that does not exist", err, missing.StatusCode(), http.StatusNotFound, missing.Body)
	unordered, err := c.PatchWebhookAWithResponse(ctx, id, client.PatchWebhookAJSONRequestBody{Ordering: nullable.NewNullNullable[client.Ordering]()})
	must(t, "patch ordering null", err, unordered.StatusCode(), http.StatusOK, unordered.Body)
	if unordered.JSON200.Data.Ordering != nil {
		t.Fatalf("patch ordering null: %s", unordered.Body)
	}

	deleted, err := c.DeleteWebhookAWithResponse(ctx, id)
	must(t, "delete", err, deleted.StatusCode(), http.StatusOK, deleted.Body)
	gone, err := c.GetWebhookAWithResponse(ctx, id)
	must(t, "get after delete", err, gone.StatusCode(), http.StatusNotFound, gone.Body)
	if gone.JSON404 == nil || gone.JSON404.Code != client.ErrorCodeNotFound || gone.JSON404.Success {
		t.Fatalf("get after delete: %s", gone.Body)
	}

	// The audit log names the delete first, made with this key.
	limit := client.LimitParameter(5)
	audit, err := c.ListAuditLogAWithResponse(ctx, &client.ListAuditLogAParams{Limit: &limit})
	must(t, "audit log", err, audit.StatusCode(), http.StatusOK, audit.Body)
	if e := audit.JSON200.Data; len(e) == 0 || e[0].Action != "webhook.delete" || e[0].Actor.Kind != client.ApiKey ||
		e[0].Target.Id != strconv.FormatInt(id, 10) {
		t.Fatalf("audit log: want the delete of %d first, by an API key: %s", id, audit.Body)
	}
}

func TestVariantB(t *testing.T) {
	tg := targetFromEnv(t)
	c := newClient(t, tg, "Authorization", "Bearer "+tg.bearerB)
	ctx := context.Background()

	created, err := c.CreateWebhookBWithResponse(ctx, client.CreateWebhookBJSONRequestBody{
		Url: tg.receiver + "/genclient-b", EventType: "lead.captured",
	})
	must(t, "create", err, created.StatusCode(), http.StatusCreated, created.Body)
	id := created.JSON201.Data.Id
	if created.JSON201.Data.Secret == "" || created.JSON201.IsError {
		t.Fatalf("create: %s", created.Body)
	}

	list, err := c.ListWebhooksBWithResponse(ctx, &client.ListWebhooksBParams{})
	must(t, "list", err, list.StatusCode(), http.StatusOK, list.Body)
	found := false
	for _, w := range list.JSON200.Data {
		found = found || w.Id == id
	}
	if !found {
		t.Fatalf("list: no webhook %d: %s", id, list.Body)
	}

	got, err := c.GetWebhookBWithResponse(ctx, id)
	must(t, "get", err, got.StatusCode(), http.StatusOK, got.Body)
	if got.JSON200.Data.EventType != client.EventTypeBLeadCaptured || got.JSON200.Data.MaxInFlight != nil {
		t.Fatalf("get: %s", got.Body)
	}

	put, err := c.UpdateWebhookBWithResponse(ctx, id, client.UpdateWebhookBJSONRequestBody{
		Url: tg.receiver + "/genclient-b2", RateLimit: nullable.NewNullableWithValue(20),
	})
	must(t, "put", err, put.StatusCode(), http.StatusOK, put.Body)
	if put.JSON200.Data.Url != tg.receiver+"/genclient-b2" || put.JSON200.Data.RateLimit == nil || *put.JSON200.Data.RateLimit != 20 {
		t.Fatalf("put: %s", put.Body)
	}

	patched, err := c.PatchWebhookBWithResponse(ctx, id, client.PatchWebhookBJSONRequestBody{MaxInFlight: nullable.NewNullableWithValue(7)})
	must(t, "patch maxInFlight 7", err, patched.StatusCode(), http.StatusOK, patched.Body)
	if m := patched.JSON200.Data.MaxInFlight; m == nil || *m != 7 {
		t.Fatalf("patch maxInFlight 7: %s", patched.Body)
	}
	cleared, err := c.PatchWebhookBWithResponse(ctx, id, client.PatchWebhookBJSONRequestBody{MaxInFlight: nullable.NewNullNullable[int]()})
	must(t, "patch maxInFlight null", err, cleared.StatusCode(), http.StatusOK, cleared.Body)
	if d := cleared.JSON200.Data; d.MaxInFlight != nil || d.RateLimit == nil || *d.RateLimit != 20 {
		t.Fatalf("patch maxInFlight null: want maxInFlight null and rateLimit 20 kept: %s", cleared.Body)
	}
	cleared, err = c.PatchWebhookBWithResponse(ctx, id, client.PatchWebhookBJSONRequestBody{
		RateLimit: nullable.NewNullNullable[int](), Headers: nullable.NewNullNullable[map[string]string](),
	})
	must(t, "patch rateLimit and headers null", err, cleared.StatusCode(), http.StatusOK, cleared.Body)
	if d := cleared.JSON200.Data; d.RateLimit != nil || d.Headers != nil {
		t.Fatalf("patch rateLimit and headers null: %s", cleared.Body)
	}

	types, err := c.ListEventTypesBWithResponse(ctx)
	must(t, "event types", err, types.StatusCode(), http.StatusOK, types.Body)
	var event client.PublishEventB
	if err := event.FromPublishLeadCaptured(client.PublishLeadCaptured{
		Event: client.PublishLeadCapturedEventLeadCaptured,
		Data:  example[client.LeadCapturedData](t, types.JSON200.Data, "lead.captured"),
	}); err != nil {
		t.Fatal(err)
	}
	published, err := c.PublishEventBWithResponse(ctx, nil, event)
	must(t, "publish lead.captured", err, published.StatusCode(), http.StatusAccepted, published.Body)
	if d := published.JSON202.Data; d.Event != client.EventTypeBLeadCaptured || d.Matched < 1 {
		t.Fatalf("publish: %s", published.Body)
	}

	// The delivery log across webhooks and replays (issue 46).
	webhookIDs := client.DeliveryLogWebhookIdParameter(strconv.FormatInt(id, 10))
	log, err := c.ListAccountDeliveriesBWithResponse(ctx, &client.ListAccountDeliveriesBParams{WebhookId: &webhookIDs})
	must(t, "list the account's deliveries", err, log.StatusCode(), http.StatusOK, log.Body)
	if len(log.JSON200.Data) < 1 || log.JSON200.Data[0].WebhookId != id {
		t.Fatalf("the account's deliveries: %s", log.Body)
	}
	dry := true
	plan, err := c.CreateReplayBWithResponse(ctx, client.CreateReplayBJSONRequestBody{Since: time.Now().Add(-time.Hour), WebhookIds: &[]int64{id},
		States: &[]client.CreateReplayBJSONBodyStates{client.CreateReplayBJSONBodyStatesDelivered}, DryRun: &dry})
	must(t, "replay, dry run", err, plan.StatusCode(), http.StatusOK, plan.Body)
	until := time.Date(2020, 1, 2, 0, 0, 0, 0, time.UTC)
	replay, err := c.CreateReplayBWithResponse(ctx, client.CreateReplayBJSONRequestBody{Since: until.Add(-24 * time.Hour), Until: &until})
	must(t, "replay", err, replay.StatusCode(), http.StatusAccepted, replay.Body)
	readReplay, err := c.GetReplayBWithResponse(ctx, replay.JSON202.Data.Id)
	must(t, "read the replay", err, readReplay.StatusCode(), http.StatusOK, readReplay.Body)
	canceled, err := c.CancelReplayBWithResponse(ctx, replay.JSON202.Data.Id)
	must(t, "cancel the replay", err, canceled.StatusCode(), http.StatusOK, canceled.Body)

	deleted, err := c.DeleteWebhookBWithResponse(ctx, id)
	must(t, "delete", err, deleted.StatusCode(), http.StatusOK, deleted.Body)
	gone, err := c.GetWebhookBWithResponse(ctx, id)
	must(t, "get after delete", err, gone.StatusCode(), http.StatusNotFound, gone.Body)
	if gone.JSON404 == nil || gone.JSON404.Code != client.ErrorCodeNotFound || !gone.JSON404.IsError {
		t.Fatalf("get after delete: %s", gone.Body)
	}

	// The audit log names the delete first, made with this key.
	limit := client.LimitParameter(5)
	audit, err := c.ListAuditLogBWithResponse(ctx, &client.ListAuditLogBParams{Limit: &limit})
	must(t, "audit log", err, audit.StatusCode(), http.StatusOK, audit.Body)
	if e := audit.JSON200.Data; len(e) == 0 || e[0].Action != "webhook.delete" || e[0].Actor.Kind != client.ApiKey ||
		e[0].Target.Id != strconv.FormatInt(id, 10) {
		t.Fatalf("audit log: want the delete of %d first, by an API key: %s", id, audit.Body)
	}
}
