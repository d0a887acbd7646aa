package webhooks

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
)

// MaxAuditListed bounds a page of the audit log.
const MaxAuditListed = 200

// AuditLog reads a page of the scope's audit log, newest first, before the entry with id before
// (0: from the newest): the entries of the scope's variant and those about the whole account (its
// API keys). limit is 1 to MaxAuditListed.
func (s *Service) AuditLog(ctx context.Context, scope model.WebhookScope, before, limit int64) (*model.AuditPage, error) {
	if limit < 1 || limit > MaxAuditListed {
		return nil, invalid("limit", "limit must be between 1 and %d", MaxAuditListed)
	}
	if before < 0 {
		return nil, invalid("before", "before must be a positive integer entry id")
	}
	return model.ListAudit(ctx, s.db, scope, before, limit)
}

// target is the type of what the scope's use cases change: its webhooks or its channels.
func target(scope model.WebhookScope) string {
	if scope.Channels {
		return audit.TargetChannel
	}
	return audit.TargetWebhook
}

// pick is the action of a use case shared by webhooks and channels, in scope.
func pick(scope model.WebhookScope, webhook, channel string) string {
	if scope.Channels {
		return channel
	}
	return webhook
}

// recorded runs change on webhook id of the scope and records it as action in the audit log,
// both in one transaction: the fields that differ between the webhook before and after (after
// nil: deleted). A change that changed nothing (disabling a disabled webhook) is not recorded.
func (s *Service) recorded(ctx context.Context, scope model.WebhookScope, id int64, action string,
	change func(ctx context.Context, tx bun.IDB) (*model.Webhook, error)) (*model.Webhook, error) {
	var after *model.Webhook
	err := s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		before, err := model.GetWebhook(ctx, tx, scope, id)
		if err != nil {
			return err
		}
		if after, err = change(ctx, tx); err != nil {
			return err
		}
		changes := webhookChanges(before, after)
		if after == nil {
			changes = audit.Changes{"url": audit.Changed(before.URL, nil)}
		}
		if len(changes) == 0 {
			return nil
		}
		return audit.Record(ctx, tx, scope.AccountID, scope.Variant, action, target(scope), audit.ID(id), changes)
	})
	return after, err
}

// recordAfter records an action that is no one transaction (a retry, a recovery: Temporal does
// the work) once it was made. The action stands whether or not its entry could be stored, so a
// failure is logged, not returned: the caller would otherwise make it again.
func (s *Service) recordAfter(ctx context.Context, w *model.Webhook, action, targetType string, targetID int64, changes audit.Changes) {
	if err := audit.Record(ctx, s.db, w.AccountID, w.Variant, action, targetType, audit.ID(targetID), changes); err != nil {
		s.log.Warn("record an audit entry", "action", action, "webhook", w.ID, "err", err)
	}
}

// webhookField is one field of a webhook as the audit log names it, in the API's words. A secret
// field's value is compared (sealed), never recorded.
type webhookField struct {
	name   string
	value  func(w *model.Webhook) any
	secret bool
}

var webhookFields = []webhookField{
	{name: "kind", value: func(w *model.Webhook) any {
		if w.Kind == model.KindWebhook {
			return nil // a webhook's entries are about a webhook: no kind to name
		}
		return ChannelKind(w)
	}},
	{name: "url", value: func(w *model.Webhook) any { return w.URL }},
	{name: "eventType", value: func(w *model.Webhook) any { return w.EventType }},
	{name: "version", value: func(w *model.Webhook) any { return w.Version }},
	{name: "status", value: func(w *model.Webhook) any { return w.Status }},
	{name: "disabled", value: func(w *model.Webhook) any { return w.Disabled() }},
	{name: "rateLimit", value: func(w *model.Webhook) any { return deref(w.RateLimit) }},
	{name: "maxInFlight", value: func(w *model.Webhook) any { return deref(w.MaxInFlight) }},
	{name: "filter", value: func(w *model.Webhook) any { return rawJSON(w.Filter) }},
	{name: "ordering", value: func(w *model.Webhook) any { return deref(w.OrderingKey) }},
	{name: "destination", value: func(w *model.Webhook) any { return rawJSON(w.Destination) }},
	{name: "types", value: func(w *model.Webhook) any {
		if w.NoticeTypes == nil {
			return nil
		}
		return strings.Split(*w.NoticeTypes, ",")
	}},
	{name: "secret", value: func(w *model.Webhook) any { return w.Secret }, secret: true},
	{name: "headers", value: func(w *model.Webhook) any { return deref(w.Headers) }, secret: true},
	{name: "auth", value: func(w *model.Webhook) any { return deref(w.Auth) }, secret: true},
	{name: "tls", value: func(w *model.Webhook) any { return deref(w.TLS) }, secret: true},
	{name: "destinationCredentials", value: func(w *model.Webhook) any { return deref(w.DestinationCredentials) }, secret: true},
}

// webhookChanges are the fields that differ from before to after (before nil: a new webhook, whose
// every field set is new). Secret fields and header values are Redacted.
func webhookChanges(before, after *model.Webhook) audit.Changes {
	changes := audit.Changes{}
	if after == nil {
		return changes
	}
	for _, f := range webhookFields {
		var old any
		if before != nil {
			old = f.value(before)
		}
		now := f.value(after)
		if before == nil && isZero(now) || before != nil && reflect.DeepEqual(old, now) {
			continue
		}
		if f.secret {
			changes[f.name] = audit.Redacted()
			continue
		}
		if before == nil {
			old = nil
		}
		changes[f.name] = audit.Changed(old, now)
	}
	return changes
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// rawJSON is a stored JSON column as JSON, nil for NULL.
func rawJSON(s *string) any {
	if s == nil {
		return nil
	}
	return json.RawMessage(*s)
}

func isZero(v any) bool {
	return v == nil || reflect.ValueOf(v).IsZero()
}
