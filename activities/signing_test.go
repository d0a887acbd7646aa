package activities

import (
	"slices"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/wire"
)

// TestSigningSecretsAcrossRotations (issue 8, #5): the current secret signs first, then every
// rotated-out secret still inside its own overlap, newest first; an expired one no longer signs.
func TestSigningSecretsAcrossRotations(t *testing.T) {
	box, err := secretbox.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	seal := func(plain string) string {
		t.Helper()
		sealed, err := box.Seal(plain)
		if err != nil {
			t.Fatal(err)
		}
		return sealed
	}
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	w := &model.Webhook{ID: 7, Secret: seal("s3"), PreviousSecrets: []model.PreviousSecret{
		{ID: 3, Secret: seal("s2"), ExpiresAt: now.Add(23 * time.Hour)},
		{ID: 2, Secret: seal("s1"), ExpiresAt: now.Add(time.Hour)},
		{ID: 1, Secret: seal("s0"), ExpiresAt: now}, // expires exactly now: no longer signs
	}}
	a := &Activities{Secrets: box, Now: func() time.Time { return now }}
	got, err := a.signingSecrets(w)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"s3", "s2", "s1"}; !slices.Equal(got, want) {
		t.Fatalf("signing secrets = %v, want %v", got, want)
	}

	// A day later only the current secret signs.
	a.Now = func() time.Time { return now.Add(24 * time.Hour) }
	if got, err := a.signingSecrets(w); err != nil || !slices.Equal(got, []string{"s3"}) {
		t.Fatalf("signing secrets after every overlap = %v, %v", got, err)
	}

	w.PreviousSecrets[0].Secret = "v1:not-sealed"
	a.Now = func() time.Time { return now }
	if _, err := a.signingSecrets(w); err == nil {
		t.Fatal("a previous secret that does not open was ignored")
	}
}

// TestSecretPrefixesAgree: secrets are made and checked with model's prefix and read by wire's,
// which may not import model; the two must be one string.
func TestSecretPrefixesAgree(t *testing.T) {
	if wire.SecretPrefix != secretbox.SecretPrefix {
		t.Fatalf("wire.SecretPrefix %q, secretbox.SecretPrefix %q", wire.SecretPrefix, secretbox.SecretPrefix)
	}
}
