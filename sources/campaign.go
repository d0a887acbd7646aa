package sources

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// Campaign statuses. The spec leaves them to us (2.3): a campaign runs or is paused by its owner.
const (
	CampaignActive = "active"
	CampaignPaused = "paused"
)

// CampaignPlatforms are the advertising platforms a campaign may run on (spec 2.3 leaves the list
// to us).
var CampaignPlatforms = []string{"meta", "google", "tiktok", "snapchat", "youtube", "spotify", "pinterest", "linkedin", "x"}

// Campaign is a variant A advertising campaign.
type Campaign struct {
	bun.BaseModel `bun:"table:campaigns"`

	ID        int64     `bun:"id,pk,autoincrement"`
	AccountID int64     `bun:"account_id,notnull"`
	Name      string    `bun:"name,notnull"`
	Platform  string    `bun:"platform,notnull"`
	Status    string    `bun:"status,notnull"`
	Budget    float64   `bun:"budget,notnull"`
	StartDate time.Time `bun:"start_date,notnull"`
	EndDate   time.Time `bun:"end_date,notnull"`
	CreatedAt time.Time `bun:"created_at,notnull"`
	UpdatedAt time.Time `bun:"updated_at,notnull"`
}

// EventData renders the campaign as the canonical CampaignData of its events.
func (c *Campaign) EventData() (string, error) {
	return canonicalData(campaignData{
		ID: c.ID, Name: c.Name, Platform: c.Platform, Status: c.Status,
		StartDate: c.StartDate.UTC().Format(TimeMillis), EndDate: c.EndDate.UTC().Format(TimeMillis), Budget: c.Budget,
	})
}

// TimeMillis is ISO 8601 UTC with milliseconds, as JavaScript's Date.toISOString writes it.
const TimeMillis = "2006-01-02T15:04:05.000Z"

// CampaignChange is a PATCH: nil fields stay as they are.
type CampaignChange struct {
	Name    *string
	Budget  *float64
	EndDate *time.Time
	Paused  *bool
}

// InsertCampaign stores a new campaign.
func InsertCampaign(ctx context.Context, db bun.IDB, c *Campaign) error {
	if _, err := db.NewInsert().Model(c).Returning("id").Exec(ctx); err != nil {
		return fmt.Errorf("insert campaign: %w", err)
	}
	return nil
}

// GetCampaign loads one campaign of an account, or ErrNotFound.
func GetCampaign(ctx context.Context, db bun.IDB, accountID, id int64) (*Campaign, error) {
	c := &Campaign{}
	return model.ScanOne(ctx, c, db.NewSelect().Model(c).Where("id = ?", id).Where("account_id = ?", accountID), "campaign")
}

// ListCampaigns returns one page of an account's campaigns, ordered by id.
func ListCampaigns(ctx context.Context, db bun.IDB, accountID, after, limit int64) ([]Campaign, error) {
	cs := []Campaign{}
	err := db.NewSelect().Model(&cs).Where("account_id = ?", accountID).Where("id > ?", after).OrderExpr("id ASC").Limit(limit).Scan(ctx)
	if err != nil {
		return nil, fmt.Errorf("list campaigns: %w", err)
	}
	return cs, nil
}

// UpdateCampaign applies a change and reports whether it touched what campaign.updated is about
// (budget, end date, pause state: spec 3.4); a change to the name alone is not an update event.
func UpdateCampaign(ctx context.Context, db bun.IDB, accountID, id int64, ch CampaignChange) (c *Campaign, notable bool, err error) {
	c = &Campaign{}
	q := db.NewSelect().Model(c).Where("id = ?", id).Where("account_id = ?", accountID)
	if model.IsPostgres(db) {
		q = q.For("UPDATE") // concurrent PATCHes must each see the other's result
	}
	if err := q.Scan(ctx); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, model.ErrNotFound
		}
		return nil, false, fmt.Errorf("load campaign: %w", err)
	}
	changed := false
	if ch.Name != nil && *ch.Name != c.Name {
		c.Name, changed = *ch.Name, true
	}
	if ch.Budget != nil && *ch.Budget != c.Budget {
		c.Budget, changed, notable = *ch.Budget, true, true
	}
	if ch.EndDate != nil && !ch.EndDate.Equal(c.EndDate) {
		c.EndDate, changed, notable = *ch.EndDate, true, true
	}
	if ch.Paused != nil {
		status := CampaignActive
		if *ch.Paused {
			status = CampaignPaused
		}
		if status != c.Status {
			c.Status, changed, notable = status, true, true
		}
	}
	if !changed {
		return c, false, nil
	}
	c.UpdatedAt = model.Now()
	if _, err := db.NewUpdate().Model(c).WherePK().Exec(ctx); err != nil {
		return nil, false, fmt.Errorf("update campaign: %w", err)
	}
	return c, notable, nil
}
