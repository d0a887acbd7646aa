package webhooks_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
	"github.com/webhookd/webhookd/webhooks"
)

// TestChannelUseCases: a channel's secret is made and sealed as a webhook's and opens to the one
// returned; the e-mail counts toward the limit and is not made again once deleted; types reset to
// the defaults; the e-mail's and a channel's secrets are told apart; and whatever scope a caller
// passes, a channel's use cases never reach a webhook, nor a webhook's a channel.
func TestChannelUseCases(t *testing.T) {
	db := dbtest.SQLite(t)
	s := newService(t, db, 100)
	ctx := t.Context()
	scope := scopeOf(t, db, model.VariantB)

	c, secret, err := s.CreateChannel(ctx, scope, webhooks.ChannelRegistration{Kind: webhooks.ChannelWebhook, URL: "https://ops.example.com/"})
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secretbox.New(bytes.Repeat([]byte{7}, 32))
	if plain, err := box.Open(c.Secret); err != nil || plain != secret || c.Secret == secret {
		t.Fatalf("sealed secret opens to %q (%v), want the returned %q", plain, err, secret)
	}
	if _, plain, err := s.RevealChannelSecret(ctx, scope, c.ID); err != nil || plain != secret {
		t.Fatalf("revealed %q, %v", plain, err)
	}
	if r, err := s.RotateChannelSecret(ctx, scope, c.ID); err != nil || r.Secret == secret {
		t.Fatalf("rotated: %+v, %v", r, err)
	}
	chs, err := s.ListChannels(ctx, scope)
	if err != nil || len(chs) != 2 || chs[0].Kind != model.KindNoticeEmail || chs[1].ID != c.ID {
		t.Fatalf("channels %+v, %v; want the e-mail (made with the first channel) and %d", chs, err, c.ID)
	}
	email := chs[0]
	if _, _, err := s.RevealChannelSecret(ctx, scope, email.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("the e-mail's secret: %v, want ErrNotFound", err)
	}

	only := []string{model.NoticeExhausted}
	got, err := s.UpdateChannel(ctx, scope, c.ID, webhooks.ChannelChange{Types: webhooks.TypesEdit{Set: true, Types: only}})
	if err != nil || webhooks.ChannelTypes(got)[0] != model.NoticeExhausted || got.Wants(model.NoticeFailing) {
		t.Fatalf("types set: %+v, %v", got, err)
	}
	got, err = s.UpdateChannel(ctx, scope, c.ID, webhooks.ChannelChange{Types: webhooks.TypesEdit{Set: true}})
	if err != nil || got.NoticeTypes != nil || len(webhooks.ChannelTypes(got)) != len(model.DefaultNoticeTypes) {
		t.Fatalf("types reset: %+v, %v", got, err)
	}

	w, _, err := s.Create(ctx, scope, webhooks.Registration{URL: "https://receiver.example.com/", EventType: "lead.captured"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetChannel(ctx, scope, w.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("a webhook read as a channel: %v", err)
	}
	if err := s.DeleteChannel(ctx, scope, w.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("a webhook deleted as a channel: %v", err)
	}
	if _, err := s.Get(ctx, scope, c.ID); !errors.Is(err, webhooks.ErrNotFound) {
		t.Fatalf("a channel read as a webhook: %v", err)
	}
	hooks, err := s.List(ctx, scope, model.WebhookFilter{Limit: 100})
	if err != nil || len(hooks) != 1 || hooks[0].ID != w.ID {
		t.Fatalf("webhooks %+v, %v", hooks, err)
	}

	res, err := s.TestChannel(ctx, scope, c.ID)
	if err != nil || res.Event.EventType != model.NoticeTest || len(res.Deliveries) != 1 || res.Deliveries[0].WebhookID != c.ID {
		t.Fatalf("test: %+v, %v", res, err)
	}

	if err := s.DeleteChannel(ctx, scope, email.ID); err != nil {
		t.Fatal(err)
	}
	chs, err = s.ListChannels(ctx, scope)
	if err != nil || len(chs) != 1 || chs[0].ID != c.ID {
		t.Fatalf("after deleting the e-mail: %+v, %v", chs, err)
	}
	for range webhooks.MaxChannels - 1 {
		if _, _, err := s.CreateChannel(ctx, scope, webhooks.ChannelRegistration{Kind: webhooks.ChannelChat, URL: "https://chat.example.com/"}); err != nil {
			t.Fatal(err)
		}
	}
	var limit *webhooks.LimitError
	if _, _, err := s.CreateChannel(ctx, scope, webhooks.ChannelRegistration{Kind: webhooks.ChannelChat, URL: "https://chat.example.com/"}); !errors.As(err, &limit) || !limit.Channels || limit.Max != webhooks.MaxChannels {
		t.Fatalf("over the limit: %v", err)
	}
}
