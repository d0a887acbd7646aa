package model_test

import (
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

// TestPurgePortalAccess: retention deletes the sessions and links that ended before its cutoff
// (expired, or revoked) and keeps those that still open something, or ended after it; a link stays
// while a session that came from it does; limit bounds each delete.
func TestPurgePortalAccess(t *testing.T) {
	for _, b := range dbtest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			db := b.Open(t)
			ctx := t.Context()
			_, acc, err := model.CreateAPIKey(ctx, db, "purge-portal@example.com", "")
			if err != nil {
				t.Fatal(err)
			}
			now := model.Now()
			cutoff := now.Add(-30 * 24 * time.Hour)
			// link creates a link and, when open, exchanges it for a session; then both expire (and,
			// when revoked is set, were revoked) at the given times.
			link := func(expires time.Time, open bool, revoked *time.Time) (int64, int64) {
				t.Helper()
				token, l, err := model.CreatePortalLink(ctx, db, model.NewPortalLink{AccountID: acc.ID, Variant: model.VariantB, TTL: time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				var sessionID int64
				if open { // exchanged while it was valid, then aged
					_, s, err := model.ExchangePortalToken(ctx, db, token)
					if err != nil {
						t.Fatal(err)
					}
					sessionID = s.ID
				}
				for table, id := range map[string]int64{"portal_links": l.ID, "portal_sessions": sessionID} {
					if _, err := db.NewUpdate().Table(table).Set("expires_at = ?", expires).Set("revoked_at = ?", revoked).Where("id = ?", id).Exec(ctx); err != nil {
						t.Fatal(err)
					}
				}
				return l.ID, sessionID
			}
			old := cutoff.Add(-time.Hour)
			oldLink, _ := link(old, false, nil)                                 // unused, expired before the cutoff: goes
			oldOpen, oldSession := link(old, true, nil)                         // used, its session expired before the cutoff: both go
			revokedLink, revokedSession := link(now.Add(time.Hour), true, &old) // revoked before the cutoff: the session goes; the link has not expired and stays
			recentLink, recentSession := link(cutoff.Add(time.Hour), true, nil) // ended after the cutoff: stays
			liveLink, liveSession := link(now.Add(time.Hour), true, nil)
			// A session lasts 12 hours from the exchange, past its link's expiry: the link expired
			// before the cutoff, its session after it. The session stays, and so does its link.
			heldLink, heldSession := link(old, true, nil)
			if _, err := db.NewUpdate().Table("portal_sessions").Set("expires_at = ?", cutoff.Add(time.Hour)).Where("id = ?", heldSession).Exec(ctx); err != nil {
				t.Fatal(err)
			} // live: stays

			if _, err := model.PurgePortalAccess(ctx, db, cutoff, 0); err == nil {
				t.Fatal("a batch size of 0 was accepted")
			}
			// One row of each kind per call: the second call finishes.
			first, err := model.PurgePortalAccess(ctx, db, cutoff, 1)
			if err != nil || first != (model.PortalRevoked{Links: 1, Sessions: 1}) {
				t.Fatalf("first batch: %+v, %v", first, err)
			}
			second, err := model.PurgePortalAccess(ctx, db, cutoff, 1)
			if err != nil || second != (model.PortalRevoked{Links: 1, Sessions: 1}) {
				t.Fatalf("second batch: %+v, %v", second, err)
			}
			if again, err := model.PurgePortalAccess(ctx, db, cutoff, 10); err != nil || again != (model.PortalRevoked{}) {
				t.Fatalf("third batch: %+v, %v", again, err)
			}
			exists := func(table string, id int64) bool {
				n, err := db.NewSelect().Table(table).Where("id = ?", id).Count(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return n == 1
			}
			for _, c := range []struct {
				table string
				id    int64
				want  bool
			}{
				{"portal_links", oldLink, false}, {"portal_links", oldOpen, false}, {"portal_sessions", oldSession, false},
				{"portal_sessions", revokedSession, false}, {"portal_links", revokedLink, true},
				{"portal_links", recentLink, true}, {"portal_sessions", recentSession, true},
				{"portal_links", liveLink, true}, {"portal_sessions", liveSession, true},
				{"portal_links", heldLink, true}, {"portal_sessions", heldSession, true},
			} {
				if got := exists(c.table, c.id); got != c.want {
					t.Errorf("%s %d kept = %v, want %v", c.table, c.id, got, c.want)
				}
			}
			if _, err := model.PortalSessionByID(ctx, db, "wps_nothing"); err == nil {
				t.Error("an unknown session id opened a session")
			}
		})
	}
}
