package model

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// Portal links and sessions (issue 20, docs/portal.md). A link's token and a session's id are 32
// random bytes shown once and stored only as their SHA-256: a copy of the database opens nothing.
// They are looked up by that hash, a unique index over values an attacker cannot choose, and the
// hash found is compared again in constant time.
const (
	// PortalTokenPrefix and PortalSessionPrefix mark the two secrets, so scanners and humans
	// recognise one (and never mistake one for the other or for an API key).
	PortalTokenPrefix   = "wpt_"
	PortalSessionPrefix = "wps_"
	// PortalSessionTTL is how long a session lasts from the link's exchange, whatever the link's
	// ttl: the ttl is how long the link may sit in an e-mail or a page, not how long a person works.
	PortalSessionTTL = 12 * time.Hour
	// portalSecretLen bounds what is worth hashing: a value longer than any we issue is forged.
	portalSecretLen = 64
)

// Why a portal token does not open a session. A forged, expired or revoked token is
// ErrPortalTokenInvalid (who holds it proved nothing); a genuine token opened before is
// ErrPortalTokenUsed, so the page can tell a person that the link was single-use.
var (
	ErrPortalTokenInvalid = errors.New("portal link is invalid or expired")
	ErrPortalTokenUsed    = errors.New("portal link was already used")
	ErrPortalSessionEnded = errors.New("portal session is invalid, expired or revoked")
)

// PortalLink is a signed link's stored half: the hash of its single-use token and its scope.
type PortalLink struct {
	bun.BaseModel `bun:"table:portal_links"`

	ID        int64 `bun:"id,pk,autoincrement"`
	AccountID int64 `bun:"account_id,notnull"`
	// APIKeyID is the key that asked for the link (POST <prefix>/portal-sessions); 0 (NULL) for an
	// operator's link. Revoking the key revokes the link and ends the sessions it opened.
	APIKeyID  int64      `bun:"api_key_id,nullzero"`
	Variant   Variant    `bun:"variant,notnull"`
	ReadOnly  bool       `bun:"read_only,notnull"`
	TokenHash string     `bun:"token_hash,notnull"`
	CreatedAt time.Time  `bun:"created_at,notnull"`
	ExpiresAt time.Time  `bun:"expires_at,notnull"`
	UsedAt    *time.Time `bun:"used_at"`
	RevokedAt *time.Time `bun:"revoked_at"`
}

// PortalSession is what a link's exchange opens: the cookie holds its id, the table its hash.
type PortalSession struct {
	bun.BaseModel `bun:"table:portal_sessions"`

	ID          int64      `bun:"id,pk,autoincrement"`
	AccountID   int64      `bun:"account_id,notnull"`
	LinkID      int64      `bun:"link_id,notnull"`
	Variant     Variant    `bun:"variant,notnull"`
	ReadOnly    bool       `bun:"read_only,notnull"`
	SessionHash string     `bun:"session_hash,notnull"`
	CreatedAt   time.Time  `bun:"created_at,notnull"`
	ExpiresAt   time.Time  `bun:"expires_at,notnull"`
	RevokedAt   *time.Time `bun:"revoked_at"`
}

// Scope is what the session may see: its account's webhooks of its variant.
func (s *PortalSession) Scope() WebhookScope {
	return WebhookScope{AccountID: s.AccountID, Variant: s.Variant}
}

// NewPortalLink is what CreatePortalLink stores: the account, its variant, how long the link may
// wait to be opened (TTL; accounts.Service.IssuePortalLink holds its default and bounds), and the
// API key that asks for it (0: an operator, webhookd portal-link).
type NewPortalLink struct {
	AccountID int64
	APIKeyID  int64
	Variant   Variant
	ReadOnly  bool
	TTL       time.Duration
}

// CreatePortalLink stores a link and returns its plain token, shown once, with the link.
func CreatePortalLink(ctx context.Context, db bun.IDB, nl NewPortalLink) (token string, link *PortalLink, err error) {
	token, err = newToken(PortalTokenPrefix)
	if err != nil {
		return "", nil, err
	}
	now := Now()
	link = &PortalLink{
		AccountID: nl.AccountID, APIKeyID: nl.APIKeyID, Variant: nl.Variant, ReadOnly: nl.ReadOnly,
		TokenHash: hashToken(token), CreatedAt: now, ExpiresAt: now.Add(nl.TTL),
	}
	if _, err := db.NewInsert().Model(link).Returning("id").Exec(ctx); err != nil {
		return "", nil, fmt.Errorf("insert portal link: %w", err)
	}
	return token, link, nil
}

// ExchangePortalToken opens a session for a link's token and marks the link used, in one
// transaction. The mark is a compare-and-set on used_at, so of two exchanges of one token at
// once exactly one gets a session; the other gets ErrPortalTokenUsed. It returns the session's
// plain id, shown once (the cookie's value), and the session.
func ExchangePortalToken(ctx context.Context, db bun.IDB, token string) (sessionID string, session *PortalSession, err error) {
	hash, ok := portalSecretHash(PortalTokenPrefix, token)
	if !ok {
		return "", nil, ErrPortalTokenInvalid
	}
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		link := &PortalLink{}
		err := tx.NewSelect().Model(link).Where("token_hash = ?", hash).Where(portalLinkKeyLive).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrPortalTokenInvalid
		}
		if err != nil {
			return fmt.Errorf("load portal link: %w", err)
		}
		if subtle.ConstantTimeCompare([]byte(hash), []byte(link.TokenHash)) != 1 {
			return ErrPortalTokenInvalid
		}
		now := Now()
		switch {
		case link.RevokedAt != nil || !now.Before(link.ExpiresAt):
			return ErrPortalTokenInvalid
		case link.UsedAt != nil:
			return ErrPortalTokenUsed
		}
		r, err := tx.NewUpdate().Model((*PortalLink)(nil)).Set("used_at = ?", now).
			Where("id = ?", link.ID).Where("used_at IS NULL").Where("revoked_at IS NULL").Exec(ctx)
		if err != nil {
			return fmt.Errorf("mark portal link used: %w", err)
		}
		if n, err := r.RowsAffected(); err != nil {
			return fmt.Errorf("mark portal link used: %w", err)
		} else if n != 1 {
			return ErrPortalTokenUsed
		}
		if sessionID, err = newToken(PortalSessionPrefix); err != nil {
			return err
		}
		session = &PortalSession{
			AccountID: link.AccountID, LinkID: link.ID, Variant: link.Variant, ReadOnly: link.ReadOnly,
			SessionHash: hashToken(sessionID), CreatedAt: now, ExpiresAt: now.Add(PortalSessionTTL),
		}
		if _, err := tx.NewInsert().Model(session).Returning("id").Exec(ctx); err != nil {
			return fmt.Errorf("insert portal session: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	return sessionID, session, nil
}

// PortalSessionByID returns the live session with that plain id, or ErrPortalSessionEnded when it
// is unknown, expired or revoked.
func PortalSessionByID(ctx context.Context, db bun.IDB, sessionID string) (*PortalSession, error) {
	hash, ok := portalSecretHash(PortalSessionPrefix, sessionID)
	if !ok {
		return nil, ErrPortalSessionEnded
	}
	s := &PortalSession{}
	err := db.NewSelect().Model(s).Where("session_hash = ?", hash).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ErrPortalSessionEnded
	}
	if err != nil {
		return nil, fmt.Errorf("load portal session: %w", err)
	}
	if subtle.ConstantTimeCompare([]byte(hash), []byte(s.SessionHash)) != 1 || s.RevokedAt != nil || !Now().Before(s.ExpiresAt) {
		return nil, ErrPortalSessionEnded
	}
	return s, nil
}

// portalLinkKeyLive holds for a link that no key made, or whose key is not revoked. RevokeAPIKey
// revokes the key's links itself; this catches one the key made in flight, whose request
// authenticated before the revocation and whose insert came after it.
const portalLinkKeyLive = "portal_link.api_key_id IS NULL OR NOT EXISTS " +
	"(SELECT 1 FROM api_keys AS k WHERE k.id = portal_link.api_key_id AND k.revoked_at IS NOT NULL)"

// PortalRevoked counts links and sessions: what a revocation ended (unused links not yet expired,
// live sessions), or what retention deleted.
type PortalRevoked struct {
	Links, Sessions int64
}

// RevokePortalAccess ends every live session of the account and revokes its unused links, so
// that nothing issued before opens the portal again. API keys are left alone.
func RevokePortalAccess(ctx context.Context, db bun.IDB, accountID int64) (PortalRevoked, error) {
	var out PortalRevoked
	err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var err error
		out, err = revokePortalLinks(ctx, tx, "account_id = ?", accountID)
		return err
	})
	return out, err
}

// revokePortalLinks revokes the unused live links that where (a condition on portal_links) picks
// and ends the live sessions they opened, at one time. Run it in a transaction.
func revokePortalLinks(ctx context.Context, tx bun.IDB, where string, arg any) (PortalRevoked, error) {
	var out PortalRevoked
	now := Now()
	r, err := tx.NewUpdate().Model((*PortalLink)(nil)).Set("revoked_at = ?", now).Where(where, arg).
		Where("used_at IS NULL").Where("revoked_at IS NULL").Where("expires_at > ?", now).Exec(ctx)
	if out.Links, err = affected(r, err); err != nil {
		return out, fmt.Errorf("revoke portal links: %w", err)
	}
	links := tx.NewSelect().Model((*PortalLink)(nil)).Column("id").Where(where, arg)
	r, err = tx.NewUpdate().Model((*PortalSession)(nil)).Set("revoked_at = ?", now).Where("link_id IN (?)", links).
		Where("revoked_at IS NULL").Where("expires_at > ?", now).Exec(ctx)
	if out.Sessions, err = affected(r, err); err != nil {
		return out, fmt.Errorf("revoke portal sessions: %w", err)
	}
	return out, nil
}

// portalSecretHash hashes a presented secret, or says it cannot be one of ours.
func portalSecretHash(prefix, plain string) (string, bool) {
	if !strings.HasPrefix(plain, prefix) || len(plain) > portalSecretLen {
		return "", false
	}
	return hashToken(plain), true
}

// PortalEnterPath is where a link's token is exchanged for a session.
const PortalEnterPath = "/portal/enter"

// PortalEnterURL is the link a person opens: publicURL (WEBHOOKD_PUBLIC_URL) and the token.
// The token is base64url, so it needs no escaping in a query.
func PortalEnterURL(publicURL, token string) string {
	return strings.TrimRight(publicURL, "/") + PortalEnterPath + "?token=" + token
}

// LastAttempts returns when the newest attempt of each of the webhooks started, by webhook id;
// a webhook never attempted is absent. The portal's endpoints page shows it for both variants
// (variant A keeps no last_triggered_at).
func LastAttempts(ctx context.Context, db bun.IDB, webhookIDs []int64) (map[int64]time.Time, error) {
	out := map[int64]time.Time{}
	if len(webhookIDs) == 0 {
		return out, nil
	}
	var rows []struct {
		WebhookID int64     `bun:"webhook_id"`
		StartedAt time.Time `bun:"started_at"`
	}
	newest := db.NewSelect().TableExpr("delivery_attempts AS a2").Join("JOIN deliveries AS d2 ON d2.id = a2.delivery_id").
		ColumnExpr("MAX(a2.id)").Where("d2.webhook_id IN (?)", bun.List(webhookIDs)).GroupExpr("d2.webhook_id")
	err := db.NewSelect().TableExpr("delivery_attempts AS a").Join("JOIN deliveries AS d ON d.id = a.delivery_id").
		ColumnExpr("d.webhook_id, a.started_at").Where("a.id IN (?)", newest).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("last attempts: %w", err)
	}
	for _, r := range rows {
		out[r.WebhookID] = r.StartedAt
	}
	return out, nil
}

// EndPortalSession ends one session (its owner signed out): it opens nothing from then on.
// Ending an ended session is harmless.
func EndPortalSession(ctx context.Context, db bun.IDB, id int64) error {
	if _, err := db.NewUpdate().Model((*PortalSession)(nil)).Set("revoked_at = ?", Now()).
		Where("id = ?", id).Where("revoked_at IS NULL").Exec(ctx); err != nil {
		return fmt.Errorf("end portal session: %w", err)
	}
	return nil
}
