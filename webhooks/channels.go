package webhooks

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
)

// MaxChannels bounds an account's notification endpoints in each variant, the owner's e-mail
// included: a notice goes to every one of them, and a few are all a team needs.
const MaxChannels = 10

// maxChannelsListed bounds a list of channels; there are at most MaxChannels anyway.
const maxChannelsListed = 1000

// The kinds of notification endpoint as the API and the portal name them (docs/notifications.md).
// The e-mail is built in: it cannot be created, only deleted, which turns the e-mail off.
const (
	ChannelEmail   = "email"
	ChannelWebhook = "webhook"
	ChannelChat    = "chat"
)

// channelKinds maps the kinds a caller may create to the rows' kinds.
var channelKinds = map[string]string{ChannelWebhook: model.KindNoticeWebhook, ChannelChat: model.KindNoticeChat}

// ChannelKind is the kind of notification endpoint c as the API and the portal name it.
func ChannelKind(c *model.Webhook) string {
	return strings.TrimPrefix(c.Kind, "notice-")
}

// ChannelTypes are the notice types c receives: those it named, or model.DefaultNoticeTypes.
func ChannelTypes(c *model.Webhook) []string {
	if c.NoticeTypes == nil {
		return slices.Clone(model.DefaultNoticeTypes)
	}
	return strings.Split(*c.NoticeTypes, ",")
}

// ChannelRegistration is a notification endpoint to create: its kind (ChannelWebhook or
// ChannelChat), its URL, and the notice types it wants (nil: model.DefaultNoticeTypes).
type ChannelRegistration struct {
	URL   string
	Kind  string
	Types []string
}

// TypesEdit changes the notice types of a channel: Set false keeps them, Set with nil Types
// resets them to model.DefaultNoticeTypes.
type TypesEdit struct {
	Set   bool
	Types []string
}

// ChannelChange changes a channel: its URL when URL is set (not the e-mail's, which is the
// owner's address), its notice types as Types says.
type ChannelChange struct {
	URL   *string
	Types TypesEdit
}

// channels is scope narrowed to its notification endpoints, whatever the caller passed.
func channels(scope model.WebhookScope) model.WebhookScope {
	scope.Channels = true
	return scope
}

// CreateChannel adds a notification endpoint with a new signing secret, returned in the clear this
// once: an operational webhook shows it to verify the notices it receives; a chat endpoint's
// deliveries are signed too (every delivery is), though nobody needs to check them. The URL is
// judged by the same address policy as a webhook's, and the account holds at most MaxChannels,
// its e-mail included.
func (s *Service) CreateChannel(ctx context.Context, scope model.WebhookScope, r ChannelRegistration) (*model.Webhook, string, error) {
	kind, err := checkChannelKind(r.Kind)
	if err != nil {
		return nil, "", err
	}
	types, err := noticeTypes(r.Types)
	if err != nil {
		return nil, "", err
	}
	if err := s.checkURL(ctx, r.URL); err != nil {
		return nil, "", err
	}
	secret, sealed, err := s.newSecret()
	if err != nil {
		return nil, "", err
	}
	// The e-mail counts toward the limit: made now if it never was, so it cannot later push the
	// account past it.
	if err := model.EnsureEmailChannel(ctx, s.db, channels(scope)); err != nil {
		return nil, "", err
	}
	now := model.Now()
	c := &model.Webhook{
		AccountID: scope.AccountID, Variant: scope.Variant, Kind: kind, URL: r.URL, NoticeTypes: types,
		Status: scope.Variant.InitialStatus(), Secret: sealed, CreatedAt: now, UpdatedAt: now,
	}
	err = s.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := model.CreateWebhook(ctx, tx, c, MaxChannels); err != nil {
			return err
		}
		return audit.Record(ctx, tx, scope.AccountID, scope.Variant, audit.ChannelCreate, audit.TargetChannel, audit.ID(c.ID), webhookChanges(nil, c))
	})
	if errors.Is(err, model.ErrLimitReached) {
		return nil, "", &LimitError{Max: MaxChannels, Channels: true}
	}
	if err != nil {
		return nil, "", err
	}
	return c, secret, nil
}

// ListChannels reads the scope's notification endpoints by id. The owner's e-mail is made first
// when the account never had it, so it shows before its first notice; once deleted it stays off.
func (s *Service) ListChannels(ctx context.Context, scope model.WebhookScope) ([]model.Webhook, error) {
	scope = channels(scope)
	if err := model.EnsureEmailChannel(ctx, s.db, scope); err != nil {
		return nil, err
	}
	return model.ListWebhooks(ctx, s.db, scope, model.WebhookFilter{Limit: maxChannelsListed})
}

// GetChannel reads one notification endpoint of the scope; a webhook's id is ErrNotFound.
func (s *Service) GetChannel(ctx context.Context, scope model.WebhookScope, id int64) (*model.Webhook, error) {
	return model.GetWebhook(ctx, s.db, channels(scope), id)
}

// UpdateChannel changes a channel's URL and notice types as ch says, after checking every part of
// it. A new URL is a new receiver, so its status and failure record start afresh, as a webhook's
// do; new types change nothing else. The e-mail's address is the owner's: it cannot change.
func (s *Service) UpdateChannel(ctx context.Context, scope model.WebhookScope, id int64, ch ChannelChange) (*model.Webhook, error) {
	scope = channels(scope)
	// Existence first, so another account's id is not found whatever the body.
	c, err := model.GetWebhook(ctx, s.db, scope, id)
	if err != nil {
		return nil, err
	}
	var types *string // nil Types resets to the defaults
	if ch.Types.Set {
		if types, err = noticeTypes(ch.Types.Types); err != nil {
			return nil, err
		}
	}
	if ch.URL != nil {
		if c.Kind == model.KindNoticeEmail {
			return nil, invalid("url", "url of the e-mail notification endpoint is the account owner's address and cannot change")
		}
		if err := s.checkURL(ctx, *ch.URL); err != nil {
			return nil, err
		}
	}
	return s.recorded(ctx, scope, id, audit.ChannelUpdate, func(ctx context.Context, tx bun.IDB) (*model.Webhook, error) {
		if ch.Types.Set {
			if c, err = model.SetNoticeTypes(ctx, tx, scope, id, types); err != nil {
				return nil, err
			}
		}
		if ch.URL != nil {
			return model.UpdateWebhookURL(ctx, tx, scope, id, *ch.URL, model.SettingsChange{}, s.clock.Now())
		}
		return c, nil
	})
}

// DeleteChannel deletes a notification endpoint as Delete deletes a webhook. Deleting the e-mail
// turns the owner's e-mail notices off for good: it is not made again.
func (s *Service) DeleteChannel(ctx context.Context, scope model.WebhookScope, id int64) error {
	return s.Delete(ctx, channels(scope), id)
}

// RevealChannelSecret reads a channel's current signing secret in the clear. The e-mail has none:
// ErrNotFound.
func (s *Service) RevealChannelSecret(ctx context.Context, scope model.WebhookScope, id int64) (*model.Webhook, string, error) {
	c, err := s.GetChannel(ctx, scope, id)
	if err != nil {
		return nil, "", err
	}
	if c.Kind == model.KindNoticeEmail {
		return nil, "", ErrNotFound
	}
	return s.Reveal(ctx, channels(scope), id)
}

// RotateChannelSecret gives a channel a new signing secret as RotateSecret gives a webhook one.
// The e-mail signs nothing: ErrNotFound.
func (s *Service) RotateChannelSecret(ctx context.Context, scope model.WebhookScope, id int64) (Rotation, error) {
	c, err := s.GetChannel(ctx, scope, id)
	if err != nil {
		return Rotation{}, err
	}
	if c.Kind == model.KindNoticeEmail {
		return Rotation{}, ErrNotFound
	}
	return s.RotateSecret(ctx, channels(scope), id, nil)
}

// TestChannel sends a notice.test to channel id alone now (notices.TestNotice): recorded as a notice
// about the channel itself, its delivery starts after the commit. It returns the notice with its
// one delivery.
func (s *Service) TestChannel(ctx context.Context, scope model.WebhookScope, id int64) (*model.PublishResult, error) {
	c, err := s.GetChannel(ctx, scope, id)
	if err != nil {
		return nil, err
	}
	ne, err := notices.TestNotice(c)
	if err != nil {
		return nil, err
	}
	return s.Publish(ctx, ne)
}

// ListNotices reads the scope's newest notices, newest first, up to limit (1 to MaxNoticesListed).
func (s *Service) ListNotices(ctx context.Context, scope model.WebhookScope, limit int64) ([]model.Event, error) {
	if limit < 1 || limit > MaxNoticesListed {
		return nil, invalid("limit", "limit must be between 1 and %d", MaxNoticesListed)
	}
	return model.ListNotices(ctx, s.db, scope, limit)
}

// MaxNoticesListed bounds a list of notices.
const MaxNoticesListed = 200

// checkChannelKind refuses a kind a caller may not create, and returns the row's kind.
func checkChannelKind(kind string) (string, error) {
	switch {
	case kind == "":
		return "", missing("kind")
	case kind == ChannelEmail:
		return "", invalid("kind", "kind email is the owner's built-in notification endpoint and cannot be created; one of %v", []string{ChannelWebhook, ChannelChat})
	case channelKinds[kind] == "":
		return "", invalid("kind", "unknown kind %q; one of %v", kind, []string{ChannelWebhook, ChannelChat})
	}
	return channelKinds[kind], nil
}

// noticeTypes checks the notice types a channel asks for and returns them as stored: nil for
// none given (the defaults), else comma-separated. Each must be a notice type, once; a list given
// must not be empty.
func noticeTypes(types []string) (*string, error) {
	if types == nil {
		return nil, nil
	}
	if len(types) == 0 {
		return nil, invalid("types", "types must name at least one notice type, or be left out for the defaults %v", model.DefaultNoticeTypes)
	}
	for i, t := range types {
		if !slices.Contains(model.NoticeTypes, t) {
			return nil, invalid("types", "types holds the unknown notice type %q; each one of %v", t, model.NoticeTypes)
		}
		if slices.Contains(types[:i], t) {
			return nil, invalid("types", "types names %q twice; name each notice type once", t)
		}
	}
	joined := strings.Join(types, ",")
	return &joined, nil
}
