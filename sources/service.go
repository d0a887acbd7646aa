package sources

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/model"
)

// Publisher commits a change with the events it emits, then starts their deliveries: the engine's
// one publish path, webhooks.Service's Change. sources cannot import it (webhooks reaches
// activities, which imports sources for the scheduled publication), so it is handed in.
type Publisher interface {
	Change(ctx context.Context, fn func(ctx context.Context, cs *model.ChangeSet) error) error
}

// Timers start and cancel a website's scheduled publication: dispatch.Dispatcher's, handed in for
// the reason Publisher is.
type Timers interface {
	SchedulePublish(ctx context.Context, websiteID int64, at time.Time) error
	CancelPublish(ctx context.Context, websiteID int64) error
}

// Config carries the sources' use cases' dependencies. Its values come from cmd/webhookd's Config.
type Config struct {
	DB *model.DB
	// Publisher commits each change with its events (webhooks.Service). Required.
	Publisher Publisher
	// Timers start and cancel scheduled publications (a *dispatch.Dispatcher). Left unset (an
	// untyped nil, not a nil pointer), a schedule answers ErrUnavailable and a move that ends one
	// leaves its timer to find the schedule gone.
	Timers Timers
	// SiteBaseURL is where published websites live (WEBHOOKD_SITE_BASE_URL).
	SiteBaseURL string
	// RequestTimeout bounds each call to Temporal (WEBHOOKD_TEMPORAL_REQUEST_TIMEOUT).
	RequestTimeout time.Duration
	Logger         *slog.Logger
}

// Service runs the sources' use cases: campaigns (variant A), websites with their lifecycle and
// scheduled publication, and fan intake (variant B). The REST API binds and presents; each rule is
// written here, or in the change it calls (changes.go), once. Its methods take the caller's
// account and never reach outside it: another account's campaign or website is ErrNotFound.
type Service struct {
	db        *model.DB
	publisher Publisher
	timers    Timers
	siteBase  string
	timeout   time.Duration
	log       *slog.Logger
}

// The refusals of the sources' use cases, besides ErrInvalidTransition (a lifecycle move the
// website's state refuses, a schedule of one that is not a draft among them), ErrEndBeforeStart,
// *NotPublishedError and *input.DataError (a fan's data, naming its field). A surface words each
// its own way; anything else is internal.
var (
	// ErrNotFound: no such campaign or website in the caller's account.
	ErrNotFound = model.ErrNotFound
	// ErrUnavailable: the publication could not be scheduled (Temporal could not be reached, or
	// there are no Timers); nothing was changed.
	ErrUnavailable = errors.New("the publication cannot be scheduled right now")
	// ErrScheduleNotFuture refuses a scheduled publication at a time that is not in the future.
	ErrScheduleNotFuture = errors.New("scheduledAt must be in the future; omit it to publish now")
)

// New checks cfg and builds the Service.
func New(cfg Config) (*Service, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("sources: DB is required")
	case cfg.Publisher == nil:
		return nil, errors.New("sources: Publisher is required")
	case cfg.RequestTimeout <= 0:
		return nil, fmt.Errorf("sources: RequestTimeout %v: must be positive", cfg.RequestTimeout)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{db: cfg.DB, publisher: cfg.Publisher, timers: cfg.Timers, siteBase: cfg.SiteBaseURL,
		timeout: cfg.RequestTimeout, log: cfg.Logger}, nil
}

// SiteURL is a website's public address under the site base URL.
func (s *Service) SiteURL(w *Website) string { return w.URL(s.siteBase) }

// NewCampaign is a campaign to create: every field is required, the dates in UTC to the
// millisecond.
type NewCampaign struct {
	Name, Platform     string
	Budget             float64
	StartDate, EndDate time.Time
}

// CreateCampaign stores an active campaign of the account with its campaign.created;
// ErrEndBeforeStart when its end is not after its start.
func (s *Service) CreateCampaign(ctx context.Context, accountID int64, n NewCampaign) (*Campaign, error) {
	if !n.EndDate.After(n.StartDate) {
		return nil, ErrEndBeforeStart
	}
	now := model.Now()
	camp := &Campaign{AccountID: accountID, Name: n.Name, Platform: n.Platform, Status: CampaignActive,
		Budget: n.Budget, StartDate: n.StartDate, EndDate: n.EndDate, CreatedAt: now, UpdatedAt: now}
	err := s.publisher.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		return createCampaign(ctx, cs, camp)
	})
	if err != nil {
		return nil, err
	}
	return camp, nil
}

// ChangeCampaign applies ch to the account's campaign id, with campaign.updated when a receiver
// is told of it; ErrEndBeforeStart when the end would not be after the start.
func (s *Service) ChangeCampaign(ctx context.Context, accountID, id int64, ch CampaignChange) (*Campaign, error) {
	var camp *Campaign
	err := s.publisher.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		var err error
		camp, err = changeCampaign(ctx, cs, accountID, id, ch)
		return err
	})
	return camp, err
}

// Campaign is the account's campaign id.
func (s *Service) Campaign(ctx context.Context, accountID, id int64) (*Campaign, error) {
	return GetCampaign(ctx, s.db, accountID, id)
}

// Campaigns is a page of the account's campaigns: at most limit, with ids after after, by id.
func (s *Service) Campaigns(ctx context.Context, accountID, after, limit int64) ([]Campaign, error) {
	return ListCampaigns(ctx, s.db, accountID, after, limit)
}

// CreateWebsite stores a draft website of the account. A website's creation emits no event
// (spec 3.3).
func (s *Service) CreateWebsite(ctx context.Context, accountID, brandID int64, slug string) (*Website, error) {
	now := model.Now()
	w := &Website{AccountID: accountID, BrandID: brandID, Slug: slug, Status: WebsiteDraft, CreatedAt: now, UpdatedAt: now}
	if err := InsertWebsite(ctx, s.db, w); err != nil {
		return nil, err
	}
	return w, nil
}

// Website is the account's website id; a deleted one is not found.
func (s *Service) Website(ctx context.Context, accountID, id int64) (*Website, error) {
	return GetWebsite(ctx, s.db, accountID, id, false)
}

// Websites is a page of the account's websites, deleted ones left out: at most limit, with ids
// after after, by id.
func (s *Service) Websites(ctx context.Context, accountID, after, limit int64) ([]Website, error) {
	return ListWebsites(ctx, s.db, accountID, after, limit)
}

// PublishWebsite publishes the account's draft website id now, with its website.published
// (scheduledPublish false), and ends a scheduled publication it had.
func (s *Service) PublishWebsite(ctx context.Context, accountID, id int64) (*Website, error) {
	return s.move(ctx, accountID, id, func(w *Website) (*model.NewEvent, error) { return w.Publish(s.siteBase, false) })
}

// ArchiveWebsite archives the account's website id, with its website.archived.
func (s *Service) ArchiveWebsite(ctx context.Context, accountID, id int64) (*Website, error) {
	return s.move(ctx, accountID, id, func(w *Website) (*model.NewEvent, error) { return w.Archive(WebsiteArchived) })
}

// DeleteWebsite deletes the account's website id, with its website.archived unless it was
// archived already.
func (s *Service) DeleteWebsite(ctx context.Context, accountID, id int64) (*Website, error) {
	return s.move(ctx, accountID, id, func(w *Website) (*model.NewEvent, error) { return w.Archive(WebsiteDeleted) })
}

// move applies a lifecycle move with its event in one change, then cancels a scheduled
// publication if there was one.
func (s *Service) move(ctx context.Context, accountID, id int64, move func(*Website) (*model.NewEvent, error)) (*Website, error) {
	var w *Website
	hadSchedule := false
	err := s.publisher.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		var err error
		w, hadSchedule, err = MoveWebsite(ctx, cs, accountID, id, move)
		return err
	})
	if err != nil {
		return nil, err
	}
	if hadSchedule && s.timers != nil {
		// Best effort: a timer that fires anyway finds the schedule gone and publishes nothing.
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		if err := s.timers.CancelPublish(tctx, w.ID); err != nil {
			s.log.Warn("cancel scheduled publication", "website", w.ID, "err", err)
		}
	}
	return w, nil
}

// CaptureLead emits a fan's lead.captured to the account's published website id, the lead
// brought to the event's rules first (Lead.Normalize), and counts a signup with the thresholds it
// crosses. A *input.DataError names a field of the lead.
func (s *Service) CaptureLead(ctx context.Context, accountID, id int64, lead Lead) (*model.PublishResult, error) {
	if err := lead.Normalize(); err != nil {
		return nil, err
	}
	return s.fanEvent(ctx, accountID, id, "lead.captured", func(w *Website) any {
		return LeadCaptured{WebsiteID: w.ID, BrandID: w.BrandID, Lead: lead}
	})
}

// CompletePresave emits a fan's presave.completed to the account's published website id, and
// counts a signup with the thresholds it crosses.
func (s *Service) CompletePresave(ctx context.Context, accountID, id int64, p Presave) (*model.PublishResult, error) {
	return s.fanEvent(ctx, accountID, id, "presave.completed", func(w *Website) any {
		return PresaveCompleted{WebsiteID: w.ID, BrandID: w.BrandID, Presave: p}
	})
}

func (s *Service) fanEvent(ctx context.Context, accountID, id int64, eventType string, build func(*Website) any) (*model.PublishResult, error) {
	var first *model.PublishResult
	err := s.publisher.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		var err error
		first, err = fanEvent(ctx, cs, accountID, id, eventType, build)
		return err
	})
	return first, err
}

// CountVisit adds n to metric of the account's website id, with the threshold events it causes;
// the counter's new value.
func (s *Service) CountVisit(ctx context.Context, accountID, id int64, metric string, n int64) (int64, error) {
	var value int64
	err := s.publisher.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		var err error
		value, err = countVisit(ctx, cs, accountID, id, metric, n)
		return err
	})
	return value, err
}

// ErrInvalidThreshold refuses a threshold whose website, metric or value is not one (the
// operator's `webhookd threshold set`).
var ErrInvalidThreshold = fmt.Errorf("a threshold needs a website id, a metric (one of %s) and a value, a positive integer of at most 2^53-1",
	strings.Join(AnalyticsMetrics, ", "))

// SetThreshold adds an analytics threshold to a website of any account: the operator's. One the
// counter has already reached is recorded as crossed (Threshold.CrossedAt): it will not fire.
func (s *Service) SetThreshold(ctx context.Context, websiteID int64, metric string, value int64) (*Threshold, error) {
	if websiteID < 1 || !slices.Contains(AnalyticsMetrics, metric) || value < 1 || !input.SafeInteger(value) {
		return nil, ErrInvalidThreshold
	}
	return setThreshold(ctx, s.db, websiteID, metric, value)
}

// Thresholds lists the thresholds of one website, or of every website when websiteID is 0.
func (s *Service) Thresholds(ctx context.Context, websiteID int64) ([]Threshold, error) {
	return listThresholds(ctx, s.db, websiteID)
}
