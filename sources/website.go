package sources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// Website lifecycle (spec 3.3).
const (
	WebsiteDraft     = "draft"
	WebsitePublished = "published"
	WebsiteArchived  = "archived"
	WebsiteDeleted   = "deleted"
)

// ErrInvalidTransition is returned for a lifecycle move the website's state does not allow.
var ErrInvalidTransition = errors.New("invalid website transition")

// Website is a variant B fan website.
type Website struct {
	bun.BaseModel `bun:"table:websites"`

	ID          int64      `bun:"id,pk,autoincrement"`
	AccountID   int64      `bun:"account_id,notnull"`
	BrandID     int64      `bun:"brand_id,notnull"`
	Slug        string     `bun:"slug,notnull"`
	Status      string     `bun:"status,notnull"`
	ScheduledAt *time.Time `bun:"scheduled_at"`
	PublishedAt *time.Time `bun:"published_at"`
	ArchivedAt  *time.Time `bun:"archived_at"`
	CreatedAt   time.Time  `bun:"created_at,notnull"`
	UpdatedAt   time.Time  `bun:"updated_at,notnull"`
}

// InsertWebsite stores a new draft website.
func InsertWebsite(ctx context.Context, db bun.IDB, w *Website) error {
	if _, err := db.NewInsert().Model(w).Returning("id").Exec(ctx); err != nil {
		return fmt.Errorf("insert website: %w", err)
	}
	return nil
}

// GetWebsite loads an account's website (deleted ones are gone), or ErrNotFound. With lock, the
// row stays locked until the transaction ends on PostgreSQL (SQLite transactions here hold the
// database write lock anyway).
func GetWebsite(ctx context.Context, db bun.IDB, accountID, id int64, lock bool) (*Website, error) {
	w := &Website{}
	q := db.NewSelect().Model(w).Where("id = ?", id).Where("status <> ?", WebsiteDeleted)
	if accountID != 0 {
		q = q.Where("account_id = ?", accountID)
	}
	if lock && model.IsPostgres(db) {
		q = q.For("UPDATE")
	}
	return model.ScanOne(ctx, w, q, "website")
}

// ListWebsites returns one page of an account's websites, ordered by id.
func ListWebsites(ctx context.Context, db bun.IDB, accountID, after, limit int64) ([]Website, error) {
	ws := []Website{}
	err := db.NewSelect().Model(&ws).Where("account_id = ?", accountID).Where("status <> ?", WebsiteDeleted).
		Where("id > ?", after).OrderExpr("id ASC").Limit(limit).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list websites: %w", err)
	}
	return ws, nil
}

// SaveWebsite writes a website's lifecycle fields.
func SaveWebsite(ctx context.Context, db bun.IDB, w *Website) error {
	w.UpdatedAt = model.Now()
	_, err := db.NewUpdate().Model(w).Column("status", "scheduled_at", "published_at", "archived_at", "updated_at").WherePK().Exec(ctx)
	if err != nil {
		return fmt.Errorf("save website: %w", err)
	}
	return nil
}

// UnscheduleWebsite puts a website's schedule back to prev if it still holds at and is still a
// draft (compare-and-set: a change made since is kept), for a schedule whose timer could not be
// started, with its updated_at as it was. It reports whether it did.
func UnscheduleWebsite(ctx context.Context, db bun.IDB, id int64, at time.Time, prev *time.Time, prevUpdatedAt time.Time) (bool, error) {
	r, err := db.NewUpdate().Model((*Website)(nil)).Set("scheduled_at = ?", prev).Set("updated_at = ?", prevUpdatedAt).
		Where("id = ?", id).Where("status = ?", WebsiteDraft).Where("scheduled_at = ?", at).Exec(ctx)
	if err != nil {
		return false, fmt.Errorf("undo website schedule: %w", err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("undo website schedule: %w", err)
	}
	return n == 1, nil
}

// PublishedData is the canonical data of website.published (spec 6.2).
func (w *Website) PublishedData(siteURL string, scheduled bool) (string, error) {
	return canonicalData(websitePublished{w.ID, w.BrandID, w.Slug, siteURL, w.PublishedAt.UTC().Format(TimeMillis), scheduled})
}

// ArchivedData is the canonical data of website.archived (spec 6.2).
func (w *Website) ArchivedData() (string, error) {
	return canonicalData(websiteArchived{w.ID, w.BrandID, w.Slug, w.ArchivedAt.UTC().Format(TimeMillis)})
}

// canonicalData renders the data of an event this package emits in the canonical form receivers
// verify (wire.CanonicalJSON's). For these flat structs of strings, integers and floats, with no key an
// array index, that form is RFC 8785's without the key sort, which jsontext writes: JSON.stringify's
// minimal escapes and ECMAScript's numbers (an integer past 2^53 rounded as JavaScript reads it,
// -0 as 0). A test in this package holds the output to wire.CanonicalJSON's.
func canonicalData(v any) (string, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	out, err := jsontext.AppendFormat(nil, raw,
		jsontext.CanonicalizeRawInts(true), jsontext.CanonicalizeRawFloats(true))
	return string(out), err
}

// URL is the website's public address under the site base URL (WEBHOOKD_SITE_BASE_URL).
func (w *Website) URL(base string) string {
	return strings.TrimSuffix(base, "/") + "/" + w.Slug
}

// Publish moves a draft to published now and returns the event to emit with it.
func (w *Website) Publish(siteBase string, scheduled bool) (*model.NewEvent, error) {
	if w.Status != WebsiteDraft {
		return nil, fmt.Errorf("%w: a %s website cannot be published", ErrInvalidTransition, w.Status)
	}
	now := model.Now()
	w.Status, w.PublishedAt, w.ScheduledAt = WebsitePublished, &now, nil
	data, err := w.PublishedData(w.URL(siteBase), scheduled)
	return &model.NewEvent{AccountID: w.AccountID, Variant: model.VariantB, EventType: "website.published", Data: data}, err
}

// Archive moves a draft or published website to archived (or deleted) and returns the event to
// emit with it. Deleting an archived website emits nothing more: it was announced when archived.
func (w *Website) Archive(to string) (*model.NewEvent, error) {
	switch {
	case to == WebsiteDeleted && w.Status == WebsiteArchived:
		w.Status = WebsiteDeleted
		return nil, nil
	case w.Status != WebsiteDraft && w.Status != WebsitePublished:
		return nil, fmt.Errorf("%w: the website is already %s", ErrInvalidTransition, w.Status)
	}
	now := model.Now()
	w.Status, w.ArchivedAt, w.ScheduledAt = to, &now, nil
	data, err := w.ArchivedData()
	return &model.NewEvent{AccountID: w.AccountID, Variant: model.VariantB, EventType: "website.archived", Data: data}, err
}
