// Package audit records who changed what in an account: the actor a front door (the API, the
// portal, the operator's CLI) puts in a request's context, and Record, which the use cases call
// in the change's own transaction, so that every front door records alike (docs/api.md, "Audit
// log"). A change names the fields it changed; a secret's or a header's value is never recorded,
// only that it changed (Redacted).
package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// The actions an entry records.
const (
	WebhookCreate       = "webhook.create"
	WebhookUpdate       = "webhook.update"
	WebhookSettings     = "webhook.settings"
	WebhookSecretRotate = "webhook.secret.rotate"
	WebhookDisable      = "webhook.disable"
	WebhookEnable       = "webhook.enable"
	WebhookDelete       = "webhook.delete"
	ChannelCreate       = "channel.create"
	ChannelUpdate       = "channel.update"
	ChannelSecretRotate = "channel.secret.rotate"
	ChannelDelete       = "channel.delete"
	APIKeyCreate        = "apikey.create"
	APIKeyRevoke        = "apikey.revoke"
	PortalLinkCreate    = "portal_link.create"
	PortalAccessRevoke  = "portal_access.revoke"
	Recover             = "recover"
	Retry               = "retry"
	DeliveryRetry       = "delivery.retry"
	LaneSkip            = "lane.skip"
	ReplayCreate        = "replay.create"
	ReplayCancel        = "replay.cancel"
)

// The types of what an entry is about.
const (
	TargetWebhook    = "webhook"
	TargetChannel    = "channel"
	TargetDelivery   = "delivery"
	TargetAPIKey     = "apikey"
	TargetPortalLink = "portal_link"
	TargetReplay     = "replay"
	TargetAccount    = "account"
)

// Actor is who made a change: Kind is one of model.ActorKind*, ID the API key's or the portal
// session's row id (never a secret), Label the key owner's e-mail, the session's mode or the CLI
// command.
type Actor struct {
	Kind, ID, Label string
}

// APIKey is the actor of a request made with API key id of the account owned by ownerEmail.
func APIKey(id int64, ownerEmail string) Actor {
	return Actor{Kind: model.ActorKindAPIKey, ID: strconv.FormatInt(id, 10), Label: ownerEmail}
}

// Portal is the actor of a request made in portal session id (its row's, not its cookie's).
func Portal(id int64, readOnly bool) Actor {
	label := "read-write"
	if readOnly {
		label = "read-only"
	}
	return Actor{Kind: model.ActorKindPortal, ID: strconv.FormatInt(id, 10), Label: label}
}

// CLI is the actor of an operator's command on the server, such as "webhookd apikey create".
func CLI(command string) Actor {
	return Actor{Kind: model.ActorKindCLI, Label: command}
}

type actorKey struct{}

// WithActor is ctx carrying who makes the changes made under it.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf is the actor ctx carries; a context without one is the system's (model.ActorKindSystem).
func ActorOf(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok {
		return a
	}
	return Actor{Kind: model.ActorKindSystem}
}

// Change is one field's change: its old and new values, or Redacted for a value that is a secret
// or a header's, which is never stored.
type Change struct {
	Old, New any
	Redacted bool
}

// Changed is a plain field's change from old to new.
func Changed(old, new any) Change { return Change{Old: old, New: new} }

// Redacted is the change of a secret or a header value: only that it changed.
func Redacted() Change { return Change{Redacted: true} }

// MarshalJSON writes {"old", "new"} (each left out when none), or {"redacted": true} with no
// value at all.
func (c Change) MarshalJSON() ([]byte, error) {
	if c.Redacted {
		return []byte(`{"redacted":true}`), nil
	}
	// A side that is none (nil, or a nil pointer: JSON null) is left out, so that a value is never
	// null: "old" absent is a field set where it was not, "new" absent one cleared.
	out := map[string]json.RawMessage{}
	for name, v := range map[string]any{"old": c.Old, "new": c.New} {
		b, err := marshal(v)
		if err != nil {
			return nil, err
		}
		if string(b) != "null" {
			out[name] = b
		}
	}
	return marshal(out)
}

// marshal is v in JSON as typed: the portal shows an entry's text, escaped by its templates, so
// a URL's "<" is stored as "<", not "\u003c".
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Changes are an entry's fields by name.
type Changes map[string]Change

// ID is a target's id as an entry stores it.
func ID(id int64) string { return strconv.FormatInt(id, 10) }

// Record stores one entry of the audit log for the account's variant (model.AccountWide for a
// change of the whole account): action on the target of that type and id, by the actor ctx
// carries, with the fields changes names. db is the change's transaction wherever the change is
// one, so that the change and its entry commit together.
func Record(ctx context.Context, db bun.IDB, accountID int64, variant model.Variant, action, targetType, targetID string, changes Changes) error {
	if changes == nil {
		changes = Changes{}
	}
	b, err := marshal(changes)
	if err != nil {
		return fmt.Errorf("audit %s: encode changes: %w", action, err)
	}
	a := ActorOf(ctx)
	return model.InsertAudit(ctx, db, &model.AuditEntry{
		AccountID: accountID, Variant: variant, At: model.Now(), ActorKind: a.Kind, ActorID: a.ID, ActorLabel: a.Label,
		Action: action, TargetType: targetType, TargetID: targetID, Changes: string(b),
	})
}
