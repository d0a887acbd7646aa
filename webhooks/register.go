package webhooks

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/model"
)

// The ranges of a webhook's own limits (issue 17). Beyond them a limit would not limit: the
// worker's per-host cap and its slots bind long before.
const (
	MaxRateLimit   = 10000
	MaxMaxInFlight = 1000
)

// retimeTimeout bounds the signals, sent behind the answer, that re-time a webhook's held attempts
// after its limits changed.
const retimeTimeout = time.Minute

// Registration is a webhook to create: its receiver, its event type and its own settings (limits
// nil: the worker's defaults; no filter: every event of its type).
type Registration struct {
	URL       string
	EventType string
	Settings  Settings
}

// Create registers a webhook with a new signing secret, returned in the clear this once. In a
// variant whose spec sends a test event, the webhook and its test event commit together (no
// webhook without its test), and the test's delivery starts after the commit.
func (s *Service) Create(ctx context.Context, scope model.WebhookScope, r Registration) (*model.Webhook, string, error) {
	if err := checkEventType(scope.Variant, r.EventType); err != nil {
		return nil, "", err
	}
	settings, err := s.change(ctx, scope, 0, r.EventType, r.Settings)
	if err != nil {
		return nil, "", err
	}
	version := model.LatestVersion(s.versions, r.EventType)
	if settings.Version.Set {
		version = *settings.Version.To
	}
	url, dest, err := s.target(ctx, r.URL, r.Settings.Destination, nil)
	if err != nil {
		return nil, "", err
	}
	if err := s.fitsDestination(dest, settings, nil); err != nil {
		return nil, "", err
	}
	secret, sealed, err := s.newSecret()
	if err != nil {
		return nil, "", err
	}
	now := s.clock.Now()
	w := &model.Webhook{
		AccountID: scope.AccountID, Variant: scope.Variant, URL: url, EventType: r.EventType, Version: version,
		Status: scope.Variant.InitialStatus(), Secret: sealed, CreatedAt: now, UpdatedAt: now,
		RateLimit: settings.RateLimit.To, MaxInFlight: settings.MaxInFlight.To, Filter: settings.Filter.To,
		OrderingKey: settings.Ordering.To,
		Headers:     settings.Headers.To, Auth: settings.Auth.To, TLS: settings.TLS.To, TLSExpiresAt: settings.TLS.ExpiresAt,
		Destination: dest.To, DestinationCredentials: dest.Credentials,
	}
	err = s.Change(ctx, func(ctx context.Context, cs *model.ChangeSet) error {
		if err := model.CreateWebhook(ctx, cs.Tx, w, s.maxWebhooks); err != nil {
			return err
		}
		if err := audit.Record(ctx, cs.Tx, scope.AccountID, scope.Variant, audit.WebhookCreate, audit.TargetWebhook, audit.ID(w.ID), webhookChanges(nil, w)); err != nil {
			return err
		}
		if !scope.Variant.Spec().TestEvent {
			return nil
		}
		_, err := cs.Emit(ctx, model.WebhookTestEvent(w))
		return err
	})
	if errors.Is(err, model.ErrLimitReached) {
		return nil, "", &LimitError{Max: s.maxWebhooks}
	}
	if err != nil {
		return nil, "", err
	}
	return w, secret, nil
}

// newSecret makes a signing secret for a new webhook or notification endpoint: the plain one, shown
// once, and its sealed form, which is what is stored.
func (s *Service) newSecret() (plain, sealed string, err error) {
	box, err := s.box()
	if err != nil {
		return "", "", err
	}
	return box.NewSealedWebhookSecret()
}

// Get reads one live webhook of the scope.
func (s *Service) Get(ctx context.Context, scope model.WebhookScope, id int64) (*model.Webhook, error) {
	return model.GetWebhook(ctx, s.db, scope, id)
}

// List reads a page of the scope's live webhooks, by id, refusing a filter on an event type or a
// status the variant does not have.
func (s *Service) List(ctx context.Context, scope model.WebhookScope, f model.WebhookFilter) ([]model.Webhook, error) {
	v := scope.Variant
	if f.EventType != "" && !v.Registrable(f.EventType) {
		return nil, invalid("eventType", "unknown eventType %q; one of %v", f.EventType, v.EventTypes())
	}
	if f.Status != "" && !slices.Contains(v.Statuses(), f.Status) {
		return nil, invalid("status", "unknown status %q; one of %v", f.Status, v.Statuses())
	}
	return model.ListWebhooks(ctx, s.db, scope, f)
}

// Update points webhook id at another URL (PUT): its status starts again as a new webhook's, and
// its settings change as settings says. Another scope's id is ErrNotFound whatever the URL.
func (s *Service) Update(ctx context.Context, scope model.WebhookScope, id int64, url string, settings Settings) (*model.Webhook, error) {
	limits, err := s.change(ctx, scope, id, "", settings)
	if err != nil {
		return nil, err
	}
	// Existence before the URL's resolution, so another account's id is not found whatever the body.
	stored, err := model.GetWebhook(ctx, s.db, scope, id)
	if err != nil {
		return nil, err
	}
	if url, limits.Destination, err = s.target(ctx, url, settings.Destination, stored); err != nil {
		return nil, err
	}
	if err := s.fitsDestination(limits.Destination, limits, stored); err != nil {
		return nil, err
	}
	w, err := s.recorded(ctx, scope, id, audit.WebhookUpdate, func(ctx context.Context, tx bun.IDB) (*model.Webhook, error) {
		return model.UpdateWebhookURL(ctx, tx, scope, id, url, limits, s.clock.Now())
	})
	if err != nil {
		return nil, err
	}
	s.retime(ctx, id, limits)
	return w, nil
}

// SetSettings changes a webhook's own settings alone (PATCH): its limits, its filter, its ordering, its headers,
// the version it receives (from its next attempt on, of every delivery). Its status
// and failure record stay, as the receiver is the same. A filter applies to the events accepted
// after it; nothing already accepted is judged again.
func (s *Service) SetSettings(ctx context.Context, scope model.WebhookScope, id int64, settings Settings) (*model.Webhook, error) {
	limits, err := s.change(ctx, scope, id, "", settings)
	if err != nil {
		return nil, err
	}
	if settings.Destination.Set || limits.Auth.To != nil || limits.TLS.To != nil || limits.Headers.Set || limits.Ordering.Set {
		// The URL stays: the destination's settings change beside it, judged with it.
		stored, err := model.GetWebhook(ctx, s.db, scope, id)
		if err != nil {
			return nil, err
		}
		if settings.Destination.Set {
			if _, limits.Destination, err = s.target(ctx, stored.URL, settings.Destination, stored); err != nil {
				return nil, err
			}
		}
		if err := s.fitsDestination(limits.Destination, limits, stored); err != nil {
			return nil, err
		}
	}
	w, err := s.recorded(ctx, scope, id, audit.WebhookSettings, func(ctx context.Context, tx bun.IDB) (*model.Webhook, error) {
		return model.UpdateWebhookLimits(ctx, tx, scope, id, limits, s.clock.Now())
	})
	if err != nil {
		return nil, err
	}
	s.retime(ctx, id, limits)
	return w, nil
}

// change checks settings and turns them into the model's change, the custom headers, the
// authentication and the TLS settings sealed. id is the webhook changed, 0 on create (then
// eventType is the one registered): a custom Authorization header is refused beside an
// authentication, whether the request or the stored webhook holds either, and a version is judged
// against the webhook's event type.
func (s *Service) change(ctx context.Context, scope model.WebhookScope, id int64, eventType string, settings Settings) (model.SettingsChange, error) {
	c, err := settings.change()
	if err != nil {
		return c, err
	}
	var stored *model.Webhook
	if settings.Version != nil {
		if id != 0 {
			if stored, err = model.GetWebhook(ctx, s.db, scope, id); err != nil {
				return c, err
			}
			eventType = stored.EventType
		}
		if err := s.checkVersion(eventType, *settings.Version); err != nil {
			return c, err
		}
		c.Version = model.LimitChange{Set: true, To: settings.Version}
	}
	var headers map[string]string
	if c.Headers, headers, err = s.sealHeaders(settings.Headers); err != nil {
		return c, err
	}
	if c.Auth, err = s.sealAuth(ctx, settings.Auth); err != nil {
		return c, err
	}
	if c.TLS, err = s.sealTLS(settings.TLS); err != nil {
		return c, err
	}
	if id != 0 && stored == nil && c.Headers.Set != c.Auth.Set {
		// One of the two is kept as stored: the pair is judged as it will be.
		if stored, err = model.GetWebhook(ctx, s.db, scope, id); err != nil {
			return c, err
		}
	}
	return c, s.checkAuthorization(c, headers, stored)
}

// retime re-times the webhook's held attempts under limits that a request changed: a change
// applies from the next attempt on, and an attempt held back under the old limits is one
// (docs/api.md). It runs behind the answer: a webhook may have many deliveries under way, and a
// signal it cannot send only leaves an attempt to come back at the turn it was given.
func (s *Service) retime(ctx context.Context, webhookID int64, limits model.SettingsChange) {
	if !limits.Limits() || s.dispatcher == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), retimeTimeout)
	go func() {
		defer cancel()
		if n, err := s.dispatcher.Retime(ctx, s.db, webhookID); err != nil {
			s.log.Warn("re-time the held attempts of a webhook whose limits changed", "webhook", webhookID, "told", n, "err", err)
		}
	}()
}

// Delete deletes a webhook, then ends its unfinished deliveries and their workflows
// (dispatch.EndWebhookDeliveries). The webhook is gone whatever that second step reaches: what it
// misses ends by itself.
func (s *Service) Delete(ctx context.Context, scope model.WebhookScope, id int64) error {
	_, err := s.recorded(ctx, scope, id, pick(scope, audit.WebhookDelete, audit.ChannelDelete), func(ctx context.Context, tx bun.IDB) (*model.Webhook, error) {
		return nil, model.DeleteWebhook(ctx, tx, scope, id)
	})
	if err != nil {
		return err
	}
	if err := dispatch.EndWebhookDeliveries(ctx, s.db, s.dispatcher, id, s.timeout); err != nil {
		s.log.Warn("end the deliveries of a deleted webhook", "webhook", id, "err", err)
	}
	return nil
}

// Disable stops a webhook's attempts until it is enabled; its new events are kept for a manual
// retry. Disabling a disabled webhook keeps the first disabled_at and tells nobody. by says who
// asked (model.ActorAPI, model.ActorPortal), as the webhook.disabled notice does.
func (s *Service) Disable(ctx context.Context, scope model.WebhookScope, id int64, by string) (*model.Webhook, error) {
	var notice *model.PublishResult
	w, err := s.recorded(ctx, scope, id, audit.WebhookDisable, func(ctx context.Context, tx bun.IDB) (w *model.Webhook, err error) {
		w, notice, err = model.DisableWebhook(ctx, tx, scope, id, by, s.notices, s.clock.Now())
		return w, err
	})
	if err != nil {
		return nil, err // the notice rolled back with the change
	}
	s.startNotice(ctx, notice)
	return w, nil
}

// Enable gives a webhook a fresh start (variant B's status is active again, the next exhaustion
// alerts again) and sends webhook.enabled. Nothing is replayed and no test event is sent: Retry
// does that.
func (s *Service) Enable(ctx context.Context, scope model.WebhookScope, id int64, by string) (*model.Webhook, error) {
	var notice *model.PublishResult
	w, err := s.recorded(ctx, scope, id, audit.WebhookEnable, func(ctx context.Context, tx bun.IDB) (w *model.Webhook, err error) {
		w, notice, err = model.EnableWebhook(ctx, tx, scope, id, by, s.notices, s.clock.Now())
		return w, err
	})
	if err != nil {
		return nil, err // the notice rolled back with the change
	}
	s.startNotice(ctx, notice)
	return w, nil
}

// startNotice starts the deliveries of a notice a change recorded, if any (docs/notifications.md).
func (s *Service) startNotice(ctx context.Context, notice *model.PublishResult) {
	if notice != nil {
		s.publisher.Start(ctx, notice)
	}
}

// checkEventType refuses an event type that a webhook of v may not subscribe to.
func checkEventType(v model.Variant, eventType string) error {
	switch {
	case eventType == "":
		return missing("eventType")
	case eventType == model.EventTest && v.Spec().TestEvent:
		return invalid("eventType", "eventType %s is sent by the service after registration and cannot be subscribed to", model.EventTest)
	case !v.Registrable(eventType):
		return invalid("eventType", "unknown eventType %q; one of %v", eventType, v.EventTypes())
	}
	return nil
}

// checkVersion refuses a version that eventType's data does not have (docs/events.md, "Versions").
func (s *Service) checkVersion(eventType string, version int) error {
	if latest := model.LatestVersion(s.versions, eventType); version < 1 || version > latest {
		if latest == 1 {
			return invalid("version", "%s has one version, 1; version %d does not exist", eventType, version)
		}
		return invalid("version", "%s has versions 1 to %d; version %d does not exist", eventType, latest, version)
	}
	return nil
}

// checkLimits refuses a webhook's limits out of range, naming the field.
func checkLimits(l model.SettingsChange) error {
	if err := within("rateLimit", l.RateLimit.To, MaxRateLimit); err != nil {
		return err
	}
	return within("maxInFlight", l.MaxInFlight.To, MaxMaxInFlight)
}

func within(field string, n *int, hi int) error {
	if n != nil && (*n < 1 || *n > hi) {
		return invalid(field, "%s must be an integer from %d to %d, or null for the default", field, 1, hi)
	}
	return nil
}

// checkURL judges a receiver URL by the egress address policy, resolving its host now (the
// delivery client judges it again at every dial).
func (s *Service) checkURL(ctx context.Context, raw string) error {
	if raw == "" {
		return missing("url")
	}
	if err := s.policy.CheckURL(ctx, raw, s.resolver); err != nil {
		var ue *egress.URLError
		if errors.As(err, &ue) {
			return invalid("url", "%s", ue.Reason)
		}
		return err
	}
	return nil
}

// httpOnly refuses an HTTP receiver's settings on a webhook that delivers into a broker, as the
// webhook would have them after the change (stored: before it, nil on create): auth sets an
// Authorization header and tls a TLS client for an HTTPS exchange, and a destination makes none.
func httpOnly(dest model.DestinationChange, c model.SettingsChange, stored *model.Webhook) error {
	destOn := dest.To != nil || !dest.Set && stored != nil && stored.Destination != nil
	if !destOn {
		return nil
	}
	switch {
	case c.Auth.To != nil || !c.Auth.Set && stored != nil && stored.Auth != nil:
		return invalid("auth", "auth is an HTTPS receiver's authentication; a destination's credentials go in its url or its destination (docs/destinations.md); send auth null with it")
	case c.TLS.To != nil || !c.TLS.Set && stored != nil && stored.TLS != nil:
		return invalid("tls", "tls is an HTTPS receiver's TLS settings; a destination's broker is verified with webhookd's roots (docs/destinations.md); send tls null with it")
	}
	return nil
}
