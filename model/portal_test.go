package model_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
)

func newPortalAccount(t *testing.T, db *model.DB, email string) (*model.Account, string) {
	t.Helper()
	key, account, err := model.CreateAPIKey(t.Context(), db, email, "test")
	if err != nil {
		t.Fatal(err)
	}
	return account, key
}

func TestPortalLinkExchange(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		account, _ := newPortalAccount(t, db, "owner@example.com")
		token, link, err := model.CreatePortalLink(ctx, db, model.NewPortalLink{AccountID: account.ID, Variant: model.VariantB, ReadOnly: true, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(token, model.PortalTokenPrefix) {
			t.Fatalf("token %q lacks its prefix", token)
		}
		if got := link.ExpiresAt.Sub(link.CreatedAt); got != time.Hour {
			t.Fatalf("ttl = %s, want the hour asked for", got)
		}
		// Only the hash is stored.
		var stored string
		if err := db.NewSelect().Table("portal_links").Column("token_hash").Where("id = ?", link.ID).Scan(ctx, &stored); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(stored, token) || strings.Contains(stored, token[len(model.PortalTokenPrefix):]) {
			t.Fatal("the token is stored in clear")
		}
		sid, session, err := model.ExchangePortalToken(ctx, db, token)
		if err != nil {
			t.Fatal(err)
		}
		if session.AccountID != account.ID || session.Variant != model.VariantB || !session.ReadOnly {
			t.Fatalf("session scope = %+v", session)
		}
		if got := session.ExpiresAt.Sub(session.CreatedAt); got != model.PortalSessionTTL {
			t.Fatalf("session ttl = %s", got)
		}
		got, err := model.PortalSessionByID(ctx, db, sid)
		if err != nil || got.ID != session.ID {
			t.Fatalf("session by id = %+v, %v", got, err)
		}
		if _, _, err := model.ExchangePortalToken(ctx, db, token); !errors.Is(err, model.ErrPortalTokenUsed) {
			t.Fatalf("second exchange: %v, want ErrPortalTokenUsed", err)
		}
		for _, forged := range []string{"", "wpt_nope", token + "x", strings.Replace(token, "wpt_", "wps_", 1), sid} {
			if _, _, err := model.ExchangePortalToken(ctx, db, forged); !errors.Is(err, model.ErrPortalTokenInvalid) {
				t.Fatalf("exchange of %q: %v, want ErrPortalTokenInvalid", forged, err)
			}
		}
		for _, forged := range []string{"", "wps_nope", token, sid + "x"} {
			if _, err := model.PortalSessionByID(ctx, db, forged); !errors.Is(err, model.ErrPortalSessionEnded) {
				t.Fatalf("session %q: %v, want ErrPortalSessionEnded", forged, err)
			}
		}
	})
}

func TestPortalLinkTTL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		account, _ := newPortalAccount(t, db, "owner@example.com")
		// The ttl's default and bounds, and the variant's check, are the use case's
		// (accounts.TestIssuePortalLink).
		token, link, err := model.CreatePortalLink(ctx, db, model.NewPortalLink{AccountID: account.ID, Variant: model.VariantA, TTL: 24 * time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		// Expire it.
		if _, err := db.NewUpdate().Table("portal_links").Set("expires_at = ?", model.Now().Add(-time.Second)).Where("id = ?", link.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, _, err := model.ExchangePortalToken(ctx, db, token); !errors.Is(err, model.ErrPortalTokenInvalid) {
			t.Fatalf("expired link: %v, want ErrPortalTokenInvalid", err)
		}
		// An expired session ends too.
		token, _, err = model.CreatePortalLink(ctx, db, model.NewPortalLink{AccountID: account.ID, Variant: model.VariantA, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		sid, session, err := model.ExchangePortalToken(ctx, db, token)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.NewUpdate().Table("portal_sessions").Set("expires_at = ?", model.Now().Add(-time.Second)).Where("id = ?", session.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := model.PortalSessionByID(ctx, db, sid); !errors.Is(err, model.ErrPortalSessionEnded) {
			t.Fatalf("expired session: %v", err)
		}
	})
}

func TestPortalExchangeRace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		account, _ := newPortalAccount(t, db, "owner@example.com")
		for range 5 {
			token, _, err := model.CreatePortalLink(ctx, db, model.NewPortalLink{AccountID: account.ID, Variant: model.VariantA, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			const n = 4
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _, err := model.ExchangePortalToken(context.WithoutCancel(ctx), db, token)
					errs <- err
				}()
			}
			wg.Wait()
			close(errs)
			won := 0
			for err := range errs {
				switch {
				case err == nil:
					won++
				case errors.Is(err, model.ErrPortalTokenUsed), model.IsBusy(err):
					// Lost the race: told it was used, or the database's lock refused it.
				default:
					t.Fatalf("exchange: %v", err)
				}
			}
			if won != 1 {
				t.Fatalf("%d exchanges of one token won, want 1", won)
			}
		}
	})
}

func TestRevokePortalAccess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		account, _ := newPortalAccount(t, db, "owner@example.com")
		other, _ := newPortalAccount(t, db, "other@example.com")
		open := func(accountID int64) string {
			token, _, err := model.CreatePortalLink(ctx, db, model.NewPortalLink{AccountID: accountID, Variant: model.VariantA, TTL: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			sid, _, err := model.ExchangePortalToken(ctx, db, token)
			if err != nil {
				t.Fatal(err)
			}
			return sid
		}
		sid, otherSID := open(account.ID), open(other.ID)
		unused, _, err := model.CreatePortalLink(ctx, db, model.NewPortalLink{AccountID: account.ID, Variant: model.VariantB, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		// Revoking an API key leaves the links it did not make alone (these are an operator's).
		keys, err := model.ListAPIKeys(ctx, db, "owner@example.com")
		if err != nil {
			t.Fatal(err)
		}
		if _, n, err := model.RevokeAPIKey(ctx, db, keys[0].ID); err != nil || n != (model.PortalRevoked{}) {
			t.Fatalf("revoke the API key: %+v, %v; want no link or session touched", n, err)
		}
		if _, err := model.PortalSessionByID(ctx, db, sid); err != nil {
			t.Fatalf("session after the API key's revocation: %v", err)
		}
		got, err := model.RevokePortalAccess(ctx, db, account.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got != (model.PortalRevoked{Links: 1, Sessions: 1}) {
			t.Fatalf("revoked %+v, want 1 link and 1 session", got)
		}
		if _, err := model.PortalSessionByID(ctx, db, sid); !errors.Is(err, model.ErrPortalSessionEnded) {
			t.Fatalf("session after revocation: %v", err)
		}
		if _, _, err := model.ExchangePortalToken(ctx, db, unused); !errors.Is(err, model.ErrPortalTokenInvalid) {
			t.Fatalf("revoked link: %v", err)
		}
		if _, err := model.PortalSessionByID(ctx, db, otherSID); err != nil {
			t.Fatalf("another account's session: %v", err)
		}
	})
}

// TestRevokeAPIKeyEndsItsPortalAccess (issue 27): revoking a key revokes the unused links made
// with it and ends the live sessions they opened, in the revocation's transaction; links of the
// account's other key and an operator's links (no key) keep working. A link the key made while
// it was being revoked (its request authenticated just before) is refused when opened, though
// the revocation did not see it.
func TestRevokeAPIKeyEndsItsPortalAccess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		account, _ := newPortalAccount(t, db, "owner@example.com")
		if _, _, err := model.CreateAPIKey(ctx, db, "owner@example.com", "kept"); err != nil {
			t.Fatal(err)
		}
		keys, err := model.ListAPIKeys(ctx, db, "owner@example.com")
		if err != nil || len(keys) != 2 {
			t.Fatalf("keys %+v, %v", keys, err)
		}
		leaked, kept := keys[0].ID, keys[1].ID
		link := func(keyID int64) string {
			t.Helper()
			token, l, err := model.CreatePortalLink(ctx, db, model.NewPortalLink{AccountID: account.ID, Variant: model.VariantB, APIKeyID: keyID, TTL: time.Hour})
			if err != nil || l.APIKeyID != keyID {
				t.Fatalf("link of key %d: %+v, %v", keyID, l, err)
			}
			return token
		}
		open := func(keyID int64) (string, *model.PortalSession) {
			t.Helper()
			sid, s, err := model.ExchangePortalToken(ctx, db, link(keyID))
			if err != nil {
				t.Fatal(err)
			}
			return sid, s
		}
		leakedSID, _ := open(leaked)
		expiredSID, expired := open(leaked) // a session that ended by itself: not counted
		if _, err := db.NewUpdate().Table("portal_sessions").Set("expires_at = ?", model.Now().Add(-time.Second)).Where("id = ?", expired.ID).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		keptSID, _ := open(kept)
		operatorSID, _ := open(0)
		leakedUnused, keptUnused, operatorUnused := link(leaked), link(kept), link(0)

		key, n, err := model.RevokeAPIKey(ctx, db, leaked)
		if err != nil || key.RevokedAt == nil {
			t.Fatalf("revoke: %+v, %v", key, err)
		}
		if n != (model.PortalRevoked{Links: 1, Sessions: 1}) {
			t.Fatalf("revoked %+v, want 1 unused link and 1 live session", n)
		}
		for _, sid := range []string{leakedSID, expiredSID} {
			if _, err := model.PortalSessionByID(ctx, db, sid); !errors.Is(err, model.ErrPortalSessionEnded) {
				t.Fatalf("a session of the revoked key's link: %v, want ErrPortalSessionEnded", err)
			}
		}
		if _, _, err := model.ExchangePortalToken(ctx, db, leakedUnused); !errors.Is(err, model.ErrPortalTokenInvalid) {
			t.Fatalf("the revoked key's unused link: %v, want ErrPortalTokenInvalid", err)
		}
		// Made in flight: the request authenticated before the revocation, inserted after it.
		if _, _, err := model.ExchangePortalToken(ctx, db, link(leaked)); !errors.Is(err, model.ErrPortalTokenInvalid) {
			t.Fatalf("a link the revoked key made during its revocation: %v, want ErrPortalTokenInvalid", err)
		}
		for _, sid := range []string{keptSID, operatorSID} {
			if _, err := model.PortalSessionByID(ctx, db, sid); err != nil {
				t.Fatalf("a session of another key's or an operator's link: %v", err)
			}
		}
		for _, token := range []string{keptUnused, operatorUnused} {
			if _, _, err := model.ExchangePortalToken(ctx, db, token); err != nil {
				t.Fatalf("another key's or an operator's link: %v", err)
			}
		}
		// Revoking again marks the link made in flight, and keeps the first time; a third touches nothing.
		for _, want := range []model.PortalRevoked{{Links: 1}, {}} {
			again, n, err := model.RevokeAPIKey(ctx, db, leaked)
			if err != nil || n != want || !again.RevokedAt.Equal(*key.RevokedAt) {
				t.Fatalf("revoking again: %+v, %+v, %v; want %+v and the first time kept", again, n, err, want)
			}
		}
	})
}
