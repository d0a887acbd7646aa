package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
)

// TestWebhooksCommands: list shows an account's live webhooks of both variants, or of one, with
// their own limits ("-" for the worker's default) after the URL; retry
// and recover refuse bad arguments and unknown webhooks before they reach for Temporal. (Their
// retries on a real stack: e2e/operator_test.go.)
func TestWebhooksCommands(t *testing.T) {
	ctx := context.Background()
	key := bytes.Repeat([]byte{9}, 32)
	// MaxWebhooks and TemporalRequestTimeout as loadConfig's defaults: the commands read through the
	// use cases, which need both.
	cfg := Config{DatabaseURL: "sqlite:" + filepath.Join(t.TempDir(), "webhookd.db"), SecretKey: key,
		MaxWebhooks: 100, TemporalRequestTimeout: 3 * time.Second}
	cmd := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := webhooksCommand(ctx, cfg, args, &out, io.Discard, slog.New(slog.DiscardHandler))
		return out.String(), err
	}
	db, err := openDB(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, acc, err := model.CreateAPIKey(ctx, db, "ops@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	_, other, _ := model.CreateAPIKey(ctx, db, "other@example.com", "")
	rate, inFlight := 50, 4
	filter := `{"data":{"source":{"country":"DE"}}}`
	box, err := secretbox.New(key)
	if err != nil {
		t.Fatal(err)
	}
	headers, err := box.Seal(`{"X-Tenant":"t1","X-Api-Token":"tok-0123456789-abcd"}`)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := box.Seal(`{"type":"oauth2","tokenUrl":"https://idp.example.com/t","clientId":"c","clientSecret":"cs-0123456789"}`)
	if err != nil {
		t.Fatal(err)
	}
	tlsSealed, err := box.Seal(`{"caCert":"-----BEGIN CERTIFICATE-----","clientCert":"-----BEGIN CERTIFICATE-----","clientKey":"-----BEGIN PRIVATE KEY-----secret-key-body"}`)
	if err != nil {
		t.Fatal(err)
	}
	orderingKey := "data.campaignId"
	nats := `{"type":"nats","subject":"orders.created"}`
	for _, w := range []*model.Webhook{
		{AccountID: acc.ID, Variant: model.VariantA, URL: "https://a.example.com/", EventType: "campaign.created", Status: model.StatusPending},
		{AccountID: acc.ID, Variant: model.VariantA, URL: "tls://nats.example.com:4222", EventType: "campaign.created", Status: model.StatusPending, Destination: &nats},
		{AccountID: acc.ID, Variant: model.VariantB, URL: "https://b.example.com/", EventType: "lead.captured", Status: model.StatusActive,
			RateLimit: &rate, MaxInFlight: &inFlight, Filter: &filter, Headers: &headers, Auth: &auth, TLS: &tlsSealed, OrderingKey: &orderingKey},
		{AccountID: other.ID, Variant: model.VariantB, URL: "https://other.example.com/", EventType: "lead.captured", Status: model.StatusActive},
	} {
		w.Secret, w.CreatedAt, w.UpdatedAt = "v1:x", model.Now(), model.Now()
		if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
			t.Fatal(err)
		}
	}

	out, err := cmd("list", "--owner-email", "ops@example.com")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || lines[0] != "ID\tVARIANT\tEVENT TYPE\tVERSION\tSTATUS\tURL\tRATE LIMIT\tMAX IN FLIGHT\tFILTER\tHEADERS\tAUTH\tTLS\tORDERING\tDESTINATION" ||
		!strings.HasSuffix(lines[1], "\tA\tcampaign.created\t1\tpending\thttps://a.example.com/\t-\t-\t-\t-\t-\t\t-\thttps") ||
		!strings.HasSuffix(lines[2], "\tA\tcampaign.created\t1\tpending\ttls://nats.example.com:4222\t-\t-\t-\t-\t-\t\t-\tnats") ||
		!strings.HasSuffix(lines[3], "\tB\tlead.captured\t1\tactive\thttps://b.example.com/\t50\t4\t"+filter+"\tX-Api-Token,X-Tenant\toauth2\tmtls+ca\tdata.campaignId\thttps") ||
		strings.Contains(out, "tok-0123456789") || strings.Contains(out, "cs-0123456789") || strings.Contains(out, "secret-key-body") || strings.Contains(out, "idp.example.com") || strings.Contains(out, "other.example.com") {
		t.Fatalf("list printed:\n%s\nwant a header and the account's three webhooks with their limits, no other account's", out)
	}
	// The last line is the last webhook, its columns split by tabs.
	if f := strings.Split(lastLine(out), "\t"); len(f) != 14 || f[3] != "1" || f[5] != "https://b.example.com/" || f[6] != "50" || f[7] != "4" || f[8] != filter || f[9] != "X-Api-Token,X-Tenant" || f[10] != "oauth2" || f[11] != "mtls+ca" || f[12] != "data.campaignId" || f[13] != "https" {
		t.Fatalf("list's last line %q: want id, variant, event type, status, URL, rate limit, max in flight, filter, header names, auth type, tls, ordering key, destination type", lastLine(out))
	}
	out, err = cmd("list", "--owner-email", "ops@example.com", "--variant", "B")
	if err != nil || strings.Contains(out, "a.example.com") || !strings.Contains(out, "b.example.com") {
		t.Fatalf("list --variant B printed %q, %v", out, err)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{nil, "usage"},
		{[]string{"list"}, "--owner-email is required"},
		{[]string{"list", "--owner-email", "nobody@example.com"}, "no account"},
		{[]string{"list", "--owner-email", "ops@example.com", "--variant", "C"}, "--variant"},
		{[]string{"retry"}, "usage"},
		{[]string{"retry", "x"}, "not a webhook id"},
		{[]string{"retry", "999999"}, "no webhook with id 999999"},
		{[]string{"retry", "1", "--delivery", "0"}, "--delivery: 0 is not a delivery id"},
		{[]string{"retry", "1", "--delivery", "-3"}, "--delivery: -3 is not a delivery id"},
		{[]string{"recover", "1"}, "--since is required"},
		{[]string{"recover", "1", "--since", "yesterday"}, "not an ISO 8601 time"},
		{[]string{"recover", "1", "--since", "2026-01-02T00:00:00Z", "--until", "2026-01-01T00:00:00Z"}, "--since: must be before until"},
		{[]string{"recover", "1", "--since", "2999-01-01T00:00:00Z", "--until", "3000-01-01T00:00:00Z"}, "--since: must not be in the future"},
		{[]string{"forget", "1"}, "usage"},
	} {
		if _, err := cmd(bad.args...); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("webhooks %v: %v, want an error saying %q", bad.args, err, bad.want)
		}
	}
}
