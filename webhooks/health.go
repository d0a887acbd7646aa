package webhooks

import (
	"context"
	"time"

	"github.com/webhookd/webhookd/model"
)

// The ranges a webhook's health is read over, by the names the API's range parameter and the
// portal's chart take.
const (
	HealthDay  = "24h"
	HealthWeek = "7d"
)

// healthRanges are the ranges by name; the first is the default.
var healthRanges = []struct {
	name   string
	length time.Duration
}{{HealthDay, 24 * time.Hour}, {HealthWeek, 7 * 24 * time.Hour}}

// Totals counts a webhook's attempts over some hours, as model.HourBucket counts them per hour.
type Totals struct {
	Delivered, Retried, Failed int
}

// Attempts is every attempt counted.
func (t Totals) Attempts() int { return t.Delivered + t.Retried + t.Failed }

// SuccessRate is the share of the attempts that were delivered, from 0 to 1; nil without attempts.
func (t Totals) SuccessRate() *float64 {
	if t.Attempts() == 0 {
		return nil
	}
	r := float64(t.Delivered) / float64(t.Attempts())
	return &r
}

// Tally sums the buckets whose hour starts at or after the hour holding since: what a chart of
// those buckets shows, summed.
func Tally(buckets []model.HourBucket, since time.Time) Totals {
	first := since.UTC().Truncate(time.Hour)
	var t Totals
	for _, b := range buckets {
		if b.Hour.Before(first) {
			continue
		}
		t.Delivered += b.Delivered
		t.Retried += b.Retried
		t.Failed += b.Failed
	}
	return t
}

// Health is one webhook's health over a range: what the API's GET <collection>/<id>/health
// presents and the portal's endpoint page draws, read once here so that the two cannot disagree.
type Health struct {
	// Webhook is the webhook as it is now: its status, whether it is disabled.
	Webhook *model.Webhook
	// Range is the range's name (HealthDay, HealthWeek). The counts, latency and last error are
	// over [From, To): To is the time of the reading, From the start of the UTC hour that holds
	// To minus the range, since attempts are counted by the hour.
	Range    string
	From, To time.Time
	// Hours counts the attempts of each UTC hour from From, empty hours included, in time order
	// (model.EndpointHourly).
	Hours []model.HourBucket
	// Latency is over every attempt in the range; nil when there was none.
	Latency *model.Latency
	// LastError is the last failed attempt in the range; nil when none failed.
	LastError *model.AttemptFailure
	// LastAttempt is when the webhook's last attempt started, whenever that was; zero if never.
	LastAttempt time.Time
	// DisableAt is when the service's auto-disable rule would disable the webhook
	// (notices.DisableRule.DisableAt); nil when it does not apply.
	DisableAt *time.Time
}

// Totals sums the range's hours.
func (h *Health) Totals() Totals { return Tally(h.Hours, h.From) }

// TotalsSince sums the hours from the one holding since: the last 24 hours of a week's reading.
func (h *Health) TotalsSince(since time.Time) Totals { return Tally(h.Hours, since) }

// HealthRange reads a range's name: "" is the default (HealthDay); a name that is not a range is
// refused as a malformed range.
func HealthRange(name string) (string, time.Duration, error) {
	if name == "" {
		name = healthRanges[0].name
	}
	for _, r := range healthRanges {
		if r.name == name {
			return r.name, r.length, nil
		}
	}
	return "", 0, &InvalidError{Field: "range", Format: "range must be %s or %s, not %q",
		Args: []any{HealthDay, HealthWeek, name}, Malformed: true}
}

// Health reads the health of a webhook in scope over the named range (HealthRange): its attempts
// per hour and their latency, its last error, its status and when the auto-disable rule would
// disable it. ErrNotFound for a webhook outside scope or deleted.
func (s *Service) Health(ctx context.Context, scope model.WebhookScope, id int64, rangeName string) (*Health, error) {
	name, length, err := HealthRange(rangeName)
	if err != nil {
		return nil, err
	}
	w, err := model.GetWebhook(ctx, s.db, scope, id)
	if err != nil {
		return nil, err
	}
	to := model.Now().UTC()
	h := &Health{Webhook: w, Range: name, From: to.Add(-length).Truncate(time.Hour), To: to, DisableAt: s.notices.Disable.DisableAt(w)}
	if h.Hours, err = model.EndpointHourly(ctx, s.db, scope.AccountID, id, h.From, h.To); err != nil {
		return nil, err
	}
	if h.Latency, err = model.EndpointLatency(ctx, s.db, id, h.From, h.To); err != nil {
		return nil, err
	}
	if h.LastError, err = model.LastFailedAttempt(ctx, s.db, id, h.From, h.To); err != nil {
		return nil, err
	}
	last, err := model.LastAttempts(ctx, s.db, []int64{id})
	if err != nil {
		return nil, err
	}
	h.LastAttempt = last[id]
	return h, nil
}
