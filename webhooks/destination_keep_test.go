package webhooks_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/webhooks"
)

// TestDestinationKeepSecrets (issue 44): with KeepSecrets (the portal's form), a destination sent
// without a secret member keeps the stored secret, a secret sent empty is removed, and a sent one
// replaces it; without it (the API), the destination replaces the stored one whole, so the same
// request is refused for its missing secretAccessKey. A destination of another type carries no
// stored secret over.
func TestDestinationKeepSecrets(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 100)
	box, err := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	scope := scopeOf(t, db, model.VariantA)
	edit := func(keep bool, members map[string]string) webhooks.Settings {
		raw, _ := json.Marshal(members)
		return webhooks.Settings{Destination: webhooks.DestinationEdit{Set: true, JSON: raw, KeepSecrets: keep}}
	}
	w, _, err := s.Create(t.Context(), scope, webhooks.Registration{URL: "https://sqs.eu-west-1.amazonaws.com/123456789012/orders", EventType: "campaign.created",
		Settings: edit(false, map[string]string{"type": "sqs", "accessKeyId": "AKIAOLD", "secretAccessKey": "aws-secret", "sessionToken": "aws-session"})})
	if err != nil {
		t.Fatal(err)
	}
	stored := func() (destination.Settings, destination.Credentials) {
		t.Helper()
		got, err := s.Get(t.Context(), scope, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		settings, err := destination.Of(got.Destination)
		if err != nil || settings == nil {
			t.Fatalf("destination %v, %v", settings, err)
		}
		c, err := box.WebhookDestination(got)
		if err != nil {
			t.Fatal(err)
		}
		return *settings, c
	}
	field := func(err error) string {
		var invalid *webhooks.InvalidError
		if !errors.As(err, &invalid) {
			t.Fatalf("err = %v, want a refusal", err)
		}
		return invalid.Field
	}

	_, err = s.SetSettings(t.Context(), scope, w.ID, edit(false, map[string]string{"type": "sqs", "accessKeyId": "AKIANEW"}))
	if f := field(err); f != "destination.secretAccessKey" {
		t.Fatalf("without KeepSecrets, a destination without its secret is refused naming %s", f)
	}
	if _, err := s.SetSettings(t.Context(), scope, w.ID, edit(true, map[string]string{"type": "sqs", "accessKeyId": "AKIANEW"})); err != nil {
		t.Fatal(err)
	}
	if d, c := stored(); d.AccessKeyID != "AKIANEW" || c.SecretAccessKey != "aws-secret" || c.SessionToken != "aws-session" {
		t.Fatalf("after a change with KeepSecrets: %+v, %+v", d, c)
	}
	if _, err := s.SetSettings(t.Context(), scope, w.ID, edit(true, map[string]string{"type": "sqs", "accessKeyId": "AKIANEW", "sessionToken": ""})); err != nil {
		t.Fatal(err)
	}
	if _, c := stored(); c.SecretAccessKey != "aws-secret" || c.SessionToken != "" {
		t.Fatalf("a session token sent empty was not removed, or the secret access key was lost: %+v", c)
	}
	if _, err := s.SetSettings(t.Context(), scope, w.ID, edit(true, map[string]string{"type": "sqs", "accessKeyId": "AKIANEW", "secretAccessKey": "aws-new"})); err != nil {
		t.Fatal(err)
	}
	if _, c := stored(); c.SecretAccessKey != "aws-new" {
		t.Fatalf("a secret access key sent did not replace the stored one: %+v", c)
	}
	// Another type: the SQS secrets are not members of it, and are not carried over; the URL is
	// what refuses it.
	_, err = s.SetSettings(t.Context(), scope, w.ID, edit(true, map[string]string{"type": "kafka", "topic": "orders"}))
	if f := field(err); f != "url" {
		t.Fatalf("a kafka destination on an sqs webhook refused naming %s, want url", f)
	}
}
