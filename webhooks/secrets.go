package webhooks

import (
	"context"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/audit"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/secretbox"
)

// Secret is w's current signing secret in the clear (to sign a body as an attempt would).
func (s *Service) Secret(w *model.Webhook) (string, error) {
	box, err := s.box()
	if err != nil {
		return "", err
	}
	return box.WebhookSecret(w)
}

// Reveal reads webhook id of the scope and its current signing secret in the clear, for the one
// answer that shows it.
func (s *Service) Reveal(ctx context.Context, scope model.WebhookScope, id int64) (*model.Webhook, string, error) {
	w, err := s.Get(ctx, scope, id)
	if err != nil {
		return nil, "", err
	}
	plain, err := s.Secret(w)
	if err != nil {
		return nil, "", err
	}
	return w, plain, nil
}

// Rotation is a rotated secret: the new one in the clear, shown once, and when the one it replaced
// stops signing beside it.
type Rotation struct {
	Secret        string
	PreviousUntil time.Time
}

// RotateSecret gives webhook id a new signing secret: own when given (as Svix and Stripe take one,
// checked by secretbox.CheckWebhookSecret), else one made here. The current secret keeps signing
// beside it for SecretOverlap; beyond MaxPreviousSecrets such secrets the answer is a
// *RotationLimitError.
func (s *Service) RotateSecret(ctx context.Context, scope model.WebhookScope, id int64, own *string) (Rotation, error) {
	box, err := s.box()
	if err != nil {
		return Rotation{}, err
	}
	var secret, sealed string
	if own != nil {
		if err := secretbox.CheckWebhookSecret(*own); err != nil {
			// The message says what is wrong, never the value: it is a secret.
			return Rotation{}, invalid("secret", "secret %v", err)
		}
		secret = *own
		if sealed, err = box.Seal(secret); err != nil {
			return Rotation{}, err
		}
	} else if secret, sealed, err = box.NewSealedWebhookSecret(); err != nil {
		return Rotation{}, err
	}
	until := model.Now().Add(SecretOverlap)
	_, err = s.recorded(ctx, scope, id, pick(scope, audit.WebhookSecretRotate, audit.ChannelSecretRotate), func(ctx context.Context, tx bun.IDB) (*model.Webhook, error) {
		if err := model.RotateWebhookSecret(ctx, tx, scope, id, sealed, until); err != nil {
			return nil, err
		}
		return model.GetWebhook(ctx, tx, scope, id)
	})
	if err != nil {
		return Rotation{}, err
	}
	return Rotation{Secret: secret, PreviousUntil: until}, nil
}
