package model

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// The kinds of actor an audit entry names (docs/api.md, "Audit log").
const (
	ActorKindAPIKey = "api_key"
	ActorKindPortal = "portal"
	ActorKindCLI    = "cli"
	// ActorKindSystem is a change no front door asked for (none today): a use case called without
	// an actor still records its change.
	ActorKindSystem = "system"
)

// AccountWide is the variant of an audit entry about the whole account (an API key): both
// variants list it.
const AccountWide Variant = ""

// AuditEntry is one row of the audit log: a change of an account's resources, who made it, and
// the fields it changed (Changes: a JSON object that never holds a secret or a header value;
// package audit builds it).
type AuditEntry struct {
	bun.BaseModel `bun:"table:audit_log,alias:audit_entry"`

	ID         int64     `bun:"id,pk,autoincrement"`
	AccountID  int64     `bun:"account_id,notnull"`
	Variant    Variant   `bun:"variant,notnull"`
	At         time.Time `bun:"at,notnull"`
	ActorKind  string    `bun:"actor_kind,notnull"`
	ActorID    string    `bun:"actor_id,notnull"`
	ActorLabel string    `bun:"actor_label,notnull"`
	Action     string    `bun:"action,notnull"`
	TargetType string    `bun:"target_type,notnull"`
	TargetID   string    `bun:"target_id,notnull"`
	Changes    string    `bun:"changes,notnull"`
}

// InsertAudit stores e, in db's transaction when db is one (the change's own).
func InsertAudit(ctx context.Context, db bun.IDB, e *AuditEntry) error {
	if _, err := db.NewInsert().Model(e).Returning("id").Exec(ctx); err != nil {
		return fmt.Errorf("insert audit entry: %w", err)
	}
	return nil
}

// AuditPage is a page of the audit log, newest first. More: an older entry follows Last.
type AuditPage struct {
	Entries []AuditEntry
	More    bool
	Last    int64
}

// ListAudit reads up to limit entries of the scope's account, newest first: those of its variant
// and those about the whole account, before the entry with id before (0: from the newest).
func ListAudit(ctx context.Context, db bun.IDB, scope WebhookScope, before, limit int64) (*AuditPage, error) {
	var entries []AuditEntry
	q := db.NewSelect().Model(&entries).
		Where("account_id = ?", scope.AccountID).
		Where("variant IN (?, ?)", scope.Variant, AccountWide)
	if before > 0 {
		q = q.Where("id < ?", before)
	}
	if err := q.OrderExpr("id DESC").Limit(limit + 1).Scan(ctx); err != nil {
		return nil, fmt.Errorf("list audit entries: %w", err)
	}
	page := &AuditPage{Entries: entries}
	if int64(len(entries)) > limit {
		page.Entries, page.More = entries[:limit], true
		page.Last = page.Entries[limit-1].ID
	}
	return page, nil
}

// PurgeAudit deletes up to limit audit entries recorded before before (retention's cutoff) and
// returns how many it deleted. Running it twice is harmless.
func PurgeAudit(ctx context.Context, db bun.IDB, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("purge audit log: batch size %d is not positive", limit)
	}
	old := db.NewSelect().Model((*AuditEntry)(nil)).Column("id").Where("at < ?", before).
		OrderExpr("at, id").Limit(int64(limit))
	res, err := db.NewDelete().Model((*AuditEntry)(nil)).Where("id IN (?)", old).Exec(ctx)
	n, err := affected(res, err)
	if err != nil {
		return 0, fmt.Errorf("purge audit log: %w", err)
	}
	return n, nil
}
