package webhooks

import (
	"context"
	"time"

	"github.com/webhookd/webhookd/model"
)

// Deliveries reads the page of deliveries q asks for within scope: the read itself is scoped (the
// scope's account, variant and live webhooks; model.DeliveryQuery.Scope), so no surface can read
// another account's delivery by its id.
func (s *Service) Deliveries(ctx context.Context, scope model.WebhookScope, q model.DeliveryQuery) (*model.DeliveryPage, error) {
	q.Scope = &scope
	return model.ReadDeliveries(ctx, s.db, q)
}

// Delivery reads delivery deliveryID within scope (of webhook webhookID when it is set, of any of
// the scope's webhooks otherwise), with what include asks for, and the webhook it belongs to.
// ErrNotFound when the scope has no such delivery.
func (s *Service) Delivery(ctx context.Context, scope model.WebhookScope, webhookID, deliveryID int64,
	include model.DeliveryInclude) (*model.Webhook, *model.DeliveryView, error) {
	page, err := s.Deliveries(ctx, scope, model.DeliveryQuery{WebhookID: webhookID, DeliveryID: deliveryID, Include: include})
	if err != nil {
		return nil, nil, err
	}
	if len(page.Views) == 0 {
		return nil, nil, ErrNotFound
	}
	v := &page.Views[0]
	w, err := s.Get(ctx, scope, v.WebhookID)
	if err != nil {
		return nil, nil, err
	}
	return w, v, nil
}

// RateWindow is the window of a webhook's success rate, in a list of webhooks and on its page.
const RateWindow = 24 * time.Hour

// Recent is a webhook's recent activity, as a list of webhooks shows it.
type Recent struct {
	// LastAttempt is when the webhook's last attempt started, whenever that was; zero if never.
	LastAttempt time.Time
	// Day counts the attempts of the last RateWindow by the hours Health draws (Tally): the rate
	// of a list and of the webhook's page cannot disagree.
	Day Totals
}

// Recent reads the recent activity of the scope's webhooks among ids, in one query for all of
// them; a webhook outside scope, or deleted since, is absent.
func (s *Service) Recent(ctx context.Context, scope model.WebhookScope, ids []int64) (map[int64]Recent, error) {
	to := model.Now()
	from := to.Add(-RateWindow)
	hours, err := model.EndpointsHourly(ctx, s.db, scope.AccountID, ids, from, to)
	if err != nil {
		return nil, err
	}
	last, err := model.LastAttempts(ctx, s.db, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]Recent, len(hours))
	for id, buckets := range hours {
		out[id] = Recent{LastAttempt: last[id], Day: Tally(buckets, from)}
	}
	return out, nil
}

// Find reads one live webhook by id, whatever its account: the operator's lookup (the CLI), never
// a client's, which goes through Get and its scope.
func (s *Service) Find(ctx context.Context, id int64) (*model.Webhook, error) {
	return model.FindWebhook(ctx, s.db, id)
}

// CountByStatus counts the live webhooks (notification endpoints left out) per variant and status,
// for the webhooks gauge: a disabled webhook counts as model.StatusDisabled in both variants.
func (s *Service) CountByStatus(ctx context.Context) ([]model.StatusCount, error) {
	return model.CountWebhooksByStatus(ctx, s.db)
}

// CountCertificatesExpiring counts the live webhooks whose TLS settings hold a certificate that
// expires within CertificateWarning, or has expired, for the expiring-certificates gauge.
func (s *Service) CountCertificatesExpiring(ctx context.Context) (int64, error) {
	return model.CountWebhooksWithCertificatesExpiring(ctx, s.db, model.Now().Add(CertificateWarning))
}
