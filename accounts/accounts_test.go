package accounts_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/accounts"
	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func newService(t *testing.T, db *model.DB, cfg accounts.Config) *accounts.Service {
	t.Helper()
	cfg.DB = db
	s, err := accounts.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestNewNeedsTheDatabase(t *testing.T) {
	if _, err := accounts.New(accounts.Config{}); err == nil || !strings.Contains(err.Error(), "DB") {
		t.Fatalf("New without DB: %v, want an error naming it", err)
	}
}

// TestAPIKeyLifecycle: a key issued once authenticates its account, is listed by its public id
// only, and after its revocation is refused; an unknown account or key is ErrNotFound.
func TestAPIKeyLifecycle(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		s := newService(t, db, accounts.Config{})
		plain, account, err := s.CreateAPIKey(ctx, " Owner@Example.com ", "ci", model.ScopeRead)
		if err != nil {
			t.Fatal(err)
		}
		if account.OwnerEmail != "owner@example.com" || !strings.HasPrefix(plain, model.APIKeyPrefix) {
			t.Fatalf("account %q, key %q", account.OwnerEmail, plain)
		}
		if _, _, err := s.CreateAPIKey(ctx, "Owner <owner@example.com>", "ci", model.ScopeManage); err == nil {
			t.Fatal("a named address was accepted as an owner e-mail")
		}
		var scopeErr *accounts.ScopeError
		if _, _, err := s.CreateAPIKey(ctx, "owner@example.com", "ci", "admin"); !errors.As(err, &scopeErr) || scopeErr.Scope != "admin" {
			t.Fatalf("scope admin: %v, want a ScopeError naming it", err)
		}
		got, authKey, err := s.Authenticate(ctx, plain)
		if err != nil || got.ID != account.ID || authKey.ID == 0 || authKey.Scope != model.ScopeRead {
			t.Fatalf("Authenticate = %+v, %+v, %v; want the read key", got, authKey, err)
		}
		keyID := authKey.ID
		if _, _, err := s.Authenticate(ctx, plain[:len(plain)-1]+"x"); !errors.Is(err, accounts.ErrUnauthorized) {
			t.Fatalf("a wrong key: %v, want ErrUnauthorized", err)
		}
		if a, err := s.Account(ctx, "OWNER@example.com"); err != nil || a.ID != account.ID {
			t.Fatalf("Account = %+v, %v", a, err)
		}
		if _, err := s.Account(ctx, "nobody@example.com"); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("Account of nobody: %v, want ErrNotFound", err)
		}
		keys, err := s.APIKeys(ctx, "owner@example.com")
		if err != nil || len(keys) != 1 || keys[0].ID != keyID || keys[0].Scope != model.ScopeRead || strings.Contains(keys[0].KeyID(), plain[len(model.APIKeyPrefix)+12:]) {
			t.Fatalf("APIKeys = %+v, %v", keys, err)
		}
		if _, err := s.APIKeys(ctx, "nobody@example.com"); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("APIKeys of nobody: %v, want ErrNotFound", err)
		}
		key, _, err := s.RevokeAPIKey(ctx, keyID)
		if err != nil || key.RevokedAt == nil {
			t.Fatalf("RevokeAPIKey = %+v, %v", key, err)
		}
		if _, _, err := s.Authenticate(ctx, plain); !errors.Is(err, accounts.ErrUnauthorized) {
			t.Fatalf("a revoked key: %v, want ErrUnauthorized", err)
		}
		if _, _, err := s.RevokeAPIKey(ctx, keyID+100); !errors.Is(err, accounts.ErrNotFound) {
			t.Fatalf("revoking no key: %v, want ErrNotFound", err)
		}
	})
}

// TestIssuePortalLink: the one set of rules of a portal link, for the API and the CLI alike.
func TestIssuePortalLink(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		s := newService(t, db, accounts.Config{PublicURL: "https://hooks.example.com/"})
		_, account, err := s.CreateAPIKey(ctx, "owner@example.com", "ci", model.ScopeManage)
		if err != nil {
			t.Fatal(err)
		}
		ttl := func(d time.Duration) *time.Duration { return &d }
		for _, tc := range []struct {
			ttl  *time.Duration
			want time.Duration // 0: refused with ErrPortalTTLOutOfRange
		}{
			{nil, accounts.DefaultPortalLinkTTL},
			{ttl(time.Second), time.Second},
			{ttl(accounts.MaxPortalLinkTTL), accounts.MaxPortalLinkTTL},
			{ttl(0), 0},
			{ttl(-time.Second), 0},
			{ttl(accounts.MaxPortalLinkTTL + time.Second), 0},
		} {
			link, err := s.IssuePortalLink(ctx, accounts.PortalLinkRequest{AccountID: account.ID, Variant: model.VariantA, TTL: tc.ttl})
			if tc.want == 0 {
				if !errors.Is(err, accounts.ErrPortalTTLOutOfRange) {
					t.Errorf("ttl %v: %v, want ErrPortalTTLOutOfRange", *tc.ttl, err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := link.Link.ExpiresAt.Sub(link.Link.CreatedAt); got != tc.want {
				t.Errorf("ttl %v: the link expires after %s, want %s", tc.ttl, got, tc.want)
			}
			if !strings.HasPrefix(link.URL, "https://hooks.example.com"+model.PortalEnterPath+"?token="+model.PortalTokenPrefix) {
				t.Errorf("URL %q", link.URL)
			}
		}
		if _, err := s.IssuePortalLink(ctx, accounts.PortalLinkRequest{AccountID: account.ID, Variant: "C"}); !errors.As(err, new(*accounts.VariantError)) {
			t.Fatalf("variant C: %v, want a VariantError", err)
		}
		off := newService(t, db, accounts.Config{PortalOff: true})
		if err := off.PortalOn(); !errors.Is(err, accounts.ErrPortalOff) {
			t.Fatalf("PortalOn with the portal off: %v", err)
		}
		if _, err := off.IssuePortalLink(ctx, accounts.PortalLinkRequest{AccountID: account.ID, Variant: model.VariantB}); !errors.Is(err, accounts.ErrPortalOff) {
			t.Fatalf("a link with the portal off: %v, want ErrPortalOff", err)
		}
		var links int
		if err := db.NewSelect().Table("portal_links").ColumnExpr("COUNT(*)").Scan(ctx, &links); err != nil || links != 3 {
			t.Fatalf("%d links stored (%v), want the 3 issued", links, err)
		}
	})
}

// TestPortalSessionLifecycle: a link opens one session of its scope, read-only when asked; a
// second opening is ErrLinkUsed; signing out ends the session; revoking the account's access
// refuses its unused links and ends its sessions; revoking the key that asked for a link ends
// what the link opened.
func TestPortalSessionLifecycle(t *testing.T) {
	dbtest.ForEach(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		s := newService(t, db, accounts.Config{})
		_, account, err := s.CreateAPIKey(ctx, "owner@example.com", "ci", model.ScopeManage)
		if err != nil {
			t.Fatal(err)
		}
		enter := func(r accounts.PortalLinkRequest) (string, *model.PortalSession) {
			t.Helper()
			link, err := s.IssuePortalLink(ctx, r)
			if err != nil {
				t.Fatal(err)
			}
			token := link.URL[strings.Index(link.URL, "token=")+len("token="):]
			sid, session, err := s.EnterPortal(ctx, token)
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.EnterPortal(ctx, token); !errors.Is(err, accounts.ErrLinkUsed) {
				t.Fatalf("second opening: %v, want ErrLinkUsed", err)
			}
			return sid, session
		}
		if _, _, err := s.EnterPortal(ctx, model.PortalTokenPrefix+"forged"); !errors.Is(err, accounts.ErrLinkInvalid) {
			t.Fatalf("a forged token: %v, want ErrLinkInvalid", err)
		}
		sid, session := enter(accounts.PortalLinkRequest{AccountID: account.ID, Variant: model.VariantB, ReadOnly: true})
		if session.Scope() != (model.WebhookScope{AccountID: account.ID, Variant: model.VariantB}) || !session.ReadOnly {
			t.Fatalf("session %+v", session)
		}
		if got, err := s.PortalSession(ctx, sid); err != nil || got.ID != session.ID {
			t.Fatalf("PortalSession = %+v, %v", got, err)
		}
		if err := s.EndPortalSession(ctx, session); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PortalSession(ctx, sid); !errors.Is(err, accounts.ErrSessionEnded) {
			t.Fatalf("after sign-out: %v, want ErrSessionEnded", err)
		}
		if err := s.EndPortalSession(ctx, session); err != nil {
			t.Fatalf("ending an ended session: %v", err)
		}

		sid, _ = enter(accounts.PortalLinkRequest{AccountID: account.ID, Variant: model.VariantA})
		unused, err := s.IssuePortalLink(ctx, accounts.PortalLinkRequest{AccountID: account.ID, Variant: model.VariantA})
		if err != nil {
			t.Fatal(err)
		}
		ended, err := s.RevokePortalAccess(ctx, account.ID)
		if err != nil || ended != (model.PortalRevoked{Links: 1, Sessions: 1}) {
			t.Fatalf("RevokePortalAccess = %+v, %v", ended, err)
		}
		if _, err := s.PortalSession(ctx, sid); !errors.Is(err, accounts.ErrSessionEnded) {
			t.Fatalf("after RevokePortalAccess: %v, want ErrSessionEnded", err)
		}
		if _, _, err := s.EnterPortal(ctx, unused.URL[strings.Index(unused.URL, "token=")+len("token="):]); !errors.Is(err, accounts.ErrLinkInvalid) {
			t.Fatalf("a revoked link: %v, want ErrLinkInvalid", err)
		}
		// Recorded once, account-wide, with what it ended; revoking again ends nothing and records
		// nothing.
		if again, err := s.RevokePortalAccess(ctx, account.ID); err != nil || again != (model.PortalRevoked{}) {
			t.Fatalf("RevokePortalAccess again = %+v, %v", again, err)
		}
		for _, v := range []model.Variant{model.VariantA, model.VariantB} {
			page, err := model.ListAudit(ctx, db, model.WebhookScope{AccountID: account.ID, Variant: v}, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			var revokes []model.AuditEntry
			for _, e := range page.Entries {
				if e.Action == audit.PortalAccessRevoke {
					revokes = append(revokes, e)
				}
			}
			if len(revokes) != 1 || revokes[0].Changes != `{"linksRevoked":{"new":1},"sessionsEnded":{"new":1}}` || revokes[0].TargetType != audit.TargetAccount {
				t.Fatalf("variant %s's audit log holds %+v; want one portal_access.revoke of the account, 1 session and 1 link", v, revokes)
			}
		}

		plain, _, err := s.CreateAPIKey(ctx, "owner@example.com", "leaked", model.ScopeManage)
		if err != nil {
			t.Fatal(err)
		}
		_, key, err := s.Authenticate(ctx, plain)
		if err != nil {
			t.Fatal(err)
		}
		keyID := key.ID
		sid, _ = enter(accounts.PortalLinkRequest{AccountID: account.ID, APIKeyID: keyID, Variant: model.VariantB})
		if _, ended, err := s.RevokeAPIKey(ctx, keyID); err != nil || ended.Sessions != 1 {
			t.Fatalf("RevokeAPIKey ended %+v, %v", ended, err)
		}
		if _, err := s.PortalSession(ctx, sid); !errors.Is(err, accounts.ErrSessionEnded) {
			t.Fatalf("a session of a revoked key's link: %v, want ErrSessionEnded", err)
		}
	})
}
