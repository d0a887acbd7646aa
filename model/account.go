package model

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"strings"
	"time"

	"github.com/uptrace/bun"
)

// APIKeyPrefix marks a webhookd API key so secret scanners and humans recognise one.
const APIKeyPrefix = "whk_"

// apiKeyLookupLen is how many characters after the prefix are stored in clear as the key's lookup id.
// The rest of the key is only ever stored as part of its SHA-256, and compared in constant time.
const apiKeyLookupLen = 12

// ErrUnauthorized is returned for a missing, malformed, unknown or revoked API key.
var ErrUnauthorized = errors.New("unauthorized")

// Account owns webhooks and API keys. Its owner e-mail receives failure alerts.
type Account struct {
	bun.BaseModel `bun:"table:accounts"`

	ID         int64     `bun:"id,pk,autoincrement"`
	OwnerEmail string    `bun:"owner_email,notnull"`
	CreatedAt  time.Time `bun:"created_at,notnull"`
}

// APIKey is a credential of an account. Only its lookup id and SHA-256 are stored.
type APIKey struct {
	bun.BaseModel `bun:"table:api_keys"`

	ID        int64  `bun:"id,pk,autoincrement"`
	AccountID int64  `bun:"account_id,notnull"`
	Name      string `bun:"name,notnull"`
	Lookup    string `bun:"lookup,notnull"`
	KeyHash   string `bun:"key_hash,notnull"`
	// Scope is what the key may do (KeyScope): its routes are chosen in api/server.go.
	Scope     KeyScope   `bun:"scope,notnull"`
	CreatedAt time.Time  `bun:"created_at,notnull"`
	RevokedAt *time.Time `bun:"revoked_at"`
}

// KeyScope is what an API key may do (docs/api.md, "Scoped API keys").
type KeyScope string

const (
	// ScopeRead may only read.
	ScopeRead KeyScope = "read"
	// ScopePublish may publish events and read the event log.
	ScopePublish KeyScope = "publish"
	// ScopeManage may do everything: every key issued before scopes is one.
	ScopeManage KeyScope = "manage"
)

// KeyScopes lists the scopes, narrowest first.
var KeyScopes = []KeyScope{ScopeRead, ScopePublish, ScopeManage}

// Valid reports whether s is one of KeyScopes.
func (s KeyScope) Valid() bool { return slices.Contains(KeyScopes, s) }

// AuthenticatedKey is what Authenticate tells of the key a request presented.
type AuthenticatedKey struct {
	// ID is the key's row id: what it makes, such as a portal link, records it.
	ID    int64
	Scope KeyScope
}

// CreateAPIKey issues a new manage key (as every key was before scopes) for the account with that
// owner e-mail, creating the account when it does not exist yet: CreateScopedAPIKey with
// ScopeManage.
func CreateAPIKey(ctx context.Context, db bun.IDB, ownerEmail, name string) (plain string, account *Account, err error) {
	return CreateScopedAPIKey(ctx, db, ownerEmail, name, ScopeManage)
}

// CreateScopedAPIKey issues a new key of that scope for the account with that owner e-mail,
// creating the account when it does not exist yet. The plain key is returned once and never
// stored.
func CreateScopedAPIKey(ctx context.Context, db bun.IDB, ownerEmail, name string, scope KeyScope) (plain string, account *Account, err error) {
	if !scope.Valid() {
		return "", nil, fmt.Errorf("api key scope %q is not one of read, publish, manage", scope)
	}
	addr, err := mail.ParseAddress(strings.TrimSpace(ownerEmail))
	if err != nil || addr.Name != "" {
		return "", nil, fmt.Errorf("owner e-mail %q is not a plain e-mail address", ownerEmail)
	}
	ownerEmail = strings.ToLower(addr.Address)
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		account = &Account{OwnerEmail: ownerEmail, CreatedAt: Now()}
		if _, err := tx.NewInsert().Model(account).On("CONFLICT (owner_email) DO NOTHING").Exec(ctx); err != nil {
			return fmt.Errorf("insert account: %w", err)
		}
		if err := tx.NewSelect().Model(account).Where("owner_email = ?", ownerEmail).Scan(ctx); err != nil {
			return fmt.Errorf("load account: %w", err)
		}
		if plain, err = newToken(APIKeyPrefix); err != nil {
			return fmt.Errorf("api key: %w", err)
		}
		key := &APIKey{
			AccountID: account.ID,
			Name:      name,
			Lookup:    plain[len(APIKeyPrefix) : len(APIKeyPrefix)+apiKeyLookupLen],
			KeyHash:   hashToken(plain),
			Scope:     scope,
			CreatedAt: Now(),
		}
		if _, err := tx.NewInsert().Model(key).Exec(ctx); err != nil {
			return fmt.Errorf("insert api key: %w", err)
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	return plain, account, nil
}

// Authenticate returns the account a plain API key belongs to and the key's id and scope, or
// ErrUnauthorized.
func Authenticate(ctx context.Context, db bun.IDB, plain string) (account *Account, key AuthenticatedKey, err error) {
	if !strings.HasPrefix(plain, APIKeyPrefix) || len(plain) < len(APIKeyPrefix)+apiKeyLookupLen+16 || len(plain) > 128 {
		return nil, AuthenticatedKey{}, ErrUnauthorized
	}
	lookup := plain[len(APIKeyPrefix) : len(APIKeyPrefix)+apiKeyLookupLen]
	// One query per request: the key's id and hash with its account.
	var rows []struct {
		KeyID    int64    `bun:"key_id"`
		KeyHash  string   `bun:"key_hash"`
		KeyScope KeyScope `bun:"key_scope"`
		Account  `bun:",extend"`
	}
	s := statementsOf(db)
	if err := s.query(ctx, db, &rows, s.text.authenticate, lookup); err != nil {
		return nil, AuthenticatedKey{}, fmt.Errorf("load api key: %w", err)
	}
	if len(rows) == 0 {
		// Compare anyway so an unknown lookup id costs the same as a wrong key.
		subtle.ConstantTimeCompare([]byte(hashToken(plain)), []byte(hashToken("")))
		return nil, AuthenticatedKey{}, ErrUnauthorized
	}
	row := rows[0]
	if subtle.ConstantTimeCompare([]byte(hashToken(plain)), []byte(row.KeyHash)) != 1 {
		return nil, AuthenticatedKey{}, ErrUnauthorized
	}
	return &row.Account, AuthenticatedKey{ID: row.KeyID, Scope: row.KeyScope}, nil
}

// KeyID is how an API key is shown once issued: its prefix and public lookup id, never the
// secret part.
func (k *APIKey) KeyID() string { return APIKeyPrefix + k.Lookup }

// ListAPIKeys returns the keys of the account with that owner e-mail, revoked ones too, oldest
// first; ErrNotFound when there is no such account.
func ListAPIKeys(ctx context.Context, db bun.IDB, ownerEmail string) ([]APIKey, error) {
	account, err := AccountByEmail(ctx, db, ownerEmail)
	if err != nil {
		return nil, err
	}
	keys := []APIKey{}
	if err := db.NewSelect().Model(&keys).Where("account_id = ?", account.ID).OrderExpr("id ASC").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// RevokeAPIKey revokes the key with that id: from its next request on it answers 401, since
// Authenticate reads the key on every request. In the same transaction it revokes the unused
// portal links the key asked for and ends the sessions they opened (docs/portal.md): a leaked key
// may have made them already. Links an operator made are left alone. Revoking a revoked key keeps
// its first revocation time. It returns the key and what it ended of the portal; ErrNotFound
// when there is no key with that id.
func RevokeAPIKey(ctx context.Context, db bun.IDB, id int64) (key *APIKey, ended PortalRevoked, err error) {
	err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if _, err := tx.NewUpdate().Model((*APIKey)(nil)).Set("revoked_at = ?", Now()).
			Where("id = ?", id).Where("revoked_at IS NULL").Exec(ctx); err != nil {
			return fmt.Errorf("revoke api key: %w", err)
		}
		key = &APIKey{}
		if _, err := ScanOne(ctx, key, tx.NewSelect().Model(key).Where("id = ?", id), "api key"); err != nil {
			return err
		}
		ended, err = revokePortalLinks(ctx, tx, "api_key_id = ?", id)
		return err
	})
	if err != nil {
		return nil, PortalRevoked{}, err
	}
	return key, ended, nil
}

// AccountByEmail loads the account with that owner e-mail, or ErrNotFound.
func AccountByEmail(ctx context.Context, db bun.IDB, ownerEmail string) (*Account, error) {
	account := &Account{}
	return ScanOne(ctx, account, db.NewSelect().Model(account).Where("owner_email = ?", strings.ToLower(strings.TrimSpace(ownerEmail))), "account")
}

// GetAccount loads an account by id.
func GetAccount(ctx context.Context, db bun.IDB, id int64) (*Account, error) {
	account := &Account{}
	return ScanOne(ctx, account, db.NewSelect().Model(account).Where("id = ?", id), "account")
}

// newToken is a credential webhookd hands out once (an API key, a portal link's token, a portal
// session id): prefix and 32 random bytes in base64url. Only its hashToken is stored.
func newToken(prefix string) (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(raw), nil
}

// hashToken is what is stored of a token newToken made: its SHA-256, in hex.
func hashToken(plain string) string {
	sum := sha256.Sum256([]byte(plain))
	return hex.EncodeToString(sum[:])
}

// APIKeyLookup returns the public lookup id of a key, safe to use as a rate-limit or log label.
func APIKeyLookup(plain string) string {
	if len(plain) < len(APIKeyPrefix)+apiKeyLookupLen {
		return ""
	}
	return plain[len(APIKeyPrefix) : len(APIKeyPrefix)+apiKeyLookupLen]
}

// lockAccountForCount holds the account's row for the rest of tx, so that a count of its rows
// against a limit and the insert it allows are one step (CreateWebhook, CreateReplay): SQLite
// transactions here already hold the database write lock; PostgreSQL needs the account row locked
// so that concurrent creates cannot both pass the count.
func lockAccountForCount(ctx context.Context, tx bun.Tx, accountID int64) error {
	if !IsPostgres(tx) {
		return nil
	}
	if _, err := tx.NewSelect().Model((*Account)(nil)).Column("id").Where("id = ?", accountID).For("UPDATE").Exec(ctx); err != nil {
		return fmt.Errorf("lock account: %w", err)
	}
	return nil
}
