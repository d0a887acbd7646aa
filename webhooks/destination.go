package webhooks

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/model"
)

// DestinationEdit is a request's destination beyond HTTP (docs/destinations.md): Set false leaves
// the webhook's as it is; Set with JSON absent or null makes the webhook an HTTPS endpoint;
// otherwise JSON is the destination as sent, which replaces the stored one whole, its secrets
// included. KeepSecrets, which the portal sets and the API never does, makes a secret member
// (destination.SecretMembers) absent from JSON keep the stored one when JSON is of the stored
// type, so that a form that never shows a secret can change the other members; a secret sent
// empty ("") removes it.
type DestinationEdit struct {
	Set         bool
	JSON        json.RawMessage
	KeepSecrets bool
}

// DestinationInfo is what every representation shows of a webhook's destination: its settings,
// and its secrets as AuthMask ("" when not set).
type DestinationInfo struct {
	destination.Settings
	Token           string
	SecretAccessKey string
	SessionToken    string
}

// target judges the receiver a webhook will have after a change: rawURL (PUT's, or the stored one
// for PATCH) with the destination edit e, stored being the webhook before the change (nil on
// create). It returns the URL to store and the destination's change. An HTTPS URL is judged as
// ever. A broker's URL is judged by its kind's rules, its hosts by the address policy; its password
// is taken out into the sealed credentials, and a URL that names the stored user without a
// password keeps the stored password, so that a representation sent back as it was read changes
// nothing.
func (s *Service) target(ctx context.Context, rawURL string, e DestinationEdit, stored *model.Webhook) (string, model.DestinationChange, error) {
	var settings *destination.Settings
	var secrets destination.Credentials
	var storedCreds destination.Credentials
	if stored != nil && stored.Destination != nil {
		var err error
		if settings, err = destination.Of(stored.Destination); err != nil {
			return "", model.DestinationChange{}, err
		}
		box, err := s.box()
		if err != nil {
			return "", model.DestinationChange{}, err
		}
		if storedCreds, err = box.WebhookDestination(stored); err != nil {
			return "", model.DestinationChange{}, err
		}
		secrets = destination.Credentials{Token: storedCreds.Token, SecretAccessKey: storedCreds.SecretAccessKey, SessionToken: storedCreds.SessionToken}
	}
	if e.Set {
		storedSettings := settings
		settings, secrets = nil, destination.Credentials{}
		if len(e.JSON) != 0 && string(e.JSON) != "null" {
			raw := e.JSON
			if e.KeepSecrets && storedSettings != nil {
				raw = keepSecrets(raw, storedSettings.Type, storedCreds)
			}
			parsed, sent, err := destination.Parse(raw)
			if err != nil {
				return "", model.DestinationChange{}, destinationRefusal(err)
			}
			if sent, err = unmask(sent, parsed.Type, storedSettings, storedCreds); err != nil {
				return "", model.DestinationChange{}, err
			}
			settings, secrets = &parsed, sent
		}
	}
	if settings == nil {
		if err := s.checkURL(ctx, rawURL); err != nil {
			if stored != nil && stored.Destination != nil && e.Set && rawURL == stored.URL {
				return "", model.DestinationChange{}, invalid("destination", "destination cannot be removed while the url is a %s url; send an https url with it (PUT)", destinationType(stored))
			}
			return "", model.DestinationChange{}, err
		}
		// Set only when it changes: an HTTPS webhook's PUT writes no destination columns.
		return rawURL, model.DestinationChange{Set: stored != nil && stored.Destination != nil}, nil
	}
	if rawURL == "" {
		return "", model.DestinationChange{}, missing("url")
	}
	url, user, hosts, err := destination.CheckURL(rawURL, *settings, s.policy.AllowHTTP)
	if err != nil {
		return "", model.DestinationChange{}, destinationRefusal(err)
	}
	for _, h := range hosts {
		if err := s.policy.CheckHost(ctx, h, s.resolver); err != nil {
			var ue *egress.URLError
			if errors.As(err, &ue) {
				return "", model.DestinationChange{}, invalid("url", "%s", ue.Reason)
			}
			return "", model.DestinationChange{}, err
		}
	}
	if user.Password == "" && user.Username != "" && user.Username == storedCreds.Username {
		user.Password = storedCreds.Password
	}
	creds := destination.Credentials{Username: user.Username, Password: user.Password,
		Token: secrets.Token, SecretAccessKey: secrets.SecretAccessKey, SessionToken: secrets.SessionToken}
	text, err := json.Marshal(settings)
	if err != nil {
		return "", model.DestinationChange{}, err
	}
	change := model.DestinationChange{Set: true, To: new(string(text))}
	if creds != (destination.Credentials{}) {
		box, err := s.box()
		if err != nil {
			return "", model.DestinationChange{}, err
		}
		plain, err := json.Marshal(creds)
		if err != nil {
			return "", model.DestinationChange{}, err
		}
		sealed, err := box.Seal(string(plain))
		if err != nil {
			return "", model.DestinationChange{}, err
		}
		change.Credentials = &sealed
	}
	return url, change, nil
}

// RedactedDestination is what every representation of w shows of its destination, nil for an
// HTTPS endpoint: its settings, and its secrets masked.
func (s *Service) RedactedDestination(w *model.Webhook) (*DestinationInfo, error) {
	settings, err := destination.Of(w.Destination)
	if err != nil || settings == nil {
		return nil, err
	}
	info := &DestinationInfo{Settings: *settings}
	if w.DestinationCredentials == nil {
		return info, nil
	}
	box, err := s.box()
	if err != nil {
		return nil, err
	}
	c, err := box.WebhookDestination(w)
	if err != nil {
		return nil, err
	}
	mask := func(v string) string {
		if v == "" {
			return ""
		}
		return AuthMask
	}
	info.Token, info.SecretAccessKey, info.SessionToken = mask(c.Token), mask(c.SecretAccessKey), mask(c.SessionToken)
	return info, nil
}

// keepSecrets is raw, a destination as sent, with the stored secrets of a destination of
// storedType added where raw leaves them out; raw as it is when it is not an object of that type,
// which destination.Parse then judges.
func keepSecrets(raw json.RawMessage, storedType string, stored destination.Credentials) json.RawMessage {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(raw, &members); err != nil {
		return raw
	}
	var typ string
	if err := json.Unmarshal(members["type"], &typ); err != nil || typ != storedType {
		return raw
	}
	for name, v := range map[string]string{"token": stored.Token, "secretAccessKey": stored.SecretAccessKey, "sessionToken": stored.SessionToken} {
		if _, sent := members[name]; sent || v == "" {
			continue
		}
		text, err := json.Marshal(v)
		if err != nil {
			return raw
		}
		members[name] = text
	}
	kept, err := json.Marshal(members)
	if err != nil {
		return raw
	}
	return kept
}

func destinationType(w *model.Webhook) string {
	if s, err := destination.Of(w.Destination); err == nil && s != nil {
		return s.Type
	}
	return "broker"
}

// destinationRefusal is a destination.Error as the use cases' InvalidError.
func destinationRefusal(err error) error {
	var de *destination.Error
	if !errors.As(err, &de) {
		return err
	}
	if de.Malformed {
		return malformed(de.Field, "%s", de.Reason)
	}
	return invalid(de.Field, "%s", de.Reason)
}

// unmask gives back the stored secret for each secret member sent as AuthMask, as a representation
// shows it: a destination read and sent back changes nothing. The mask of a destination of another
// type, or of none, names no secret, and is refused.
func unmask(sent destination.Credentials, typ string, stored *destination.Settings, storedCreds destination.Credentials) (destination.Credentials, error) {
	for _, m := range []struct {
		name       string
		sent, keep *string
	}{
		{"token", &sent.Token, &storedCreds.Token},
		{"secretAccessKey", &sent.SecretAccessKey, &storedCreds.SecretAccessKey},
		{"sessionToken", &sent.SessionToken, &storedCreds.SessionToken},
	} {
		if *m.sent != AuthMask {
			continue
		}
		if stored == nil || stored.Type != typ || *m.keep == "" {
			return sent, invalid("destination."+m.name, "destination.%s is the mask of a secret this webhook does not hold; send the secret itself", m.name)
		}
		*m.sent = *m.keep
	}
	return sent, nil
}

// sqsOwnAttributes are the message attributes webhookd's own headers take on an SQS message
// (content-type, x-service-event, webhook-id, webhook-timestamp, webhook-signature), and
// sqsOrderedAttributes an ordered webhook's resend's (webhook-sequence, webhook-resend beside
// them); SQS takes at most sqsMaxAttributes.
const (
	sqsMaxAttributes     = 10
	sqsOwnAttributes     = 5
	sqsOrderedAttributes = 7
)

// fitsDestination refuses settings that the webhook's destination, as it would be after the change
// (stored: before it, nil on create), cannot carry: an HTTPS receiver's auth and tls beside any
// destination (httpOnly), and more headers of its own than an SQS message has attributes left for.
func (s *Service) fitsDestination(dest model.DestinationChange, c model.SettingsChange, stored *model.Webhook) error {
	if err := httpOnly(dest, c, stored); err != nil {
		return err
	}
	text := dest.To
	if !dest.Set && stored != nil {
		text = stored.Destination
	}
	d, err := destination.Of(text)
	if err != nil || d == nil || d.Type != destination.SQS {
		return err
	}
	sealed := c.Headers.To
	if !c.Headers.Set && stored != nil {
		sealed = stored.Headers
	}
	if sealed == nil {
		return nil
	}
	box, err := s.box()
	if err != nil {
		return err
	}
	headers, err := box.WebhookHeaders(&model.Webhook{Headers: sealed})
	if err != nil {
		return err
	}
	ordered := c.Ordering.To != nil || !c.Ordering.Set && stored != nil && stored.OrderingKey != nil
	room := sqsMaxAttributes - sqsOwnAttributes
	if ordered {
		room = sqsMaxAttributes - sqsOrderedAttributes
	}
	if len(headers) > room {
		return invalid("headers", "an sqs destination's messages carry at most %d attributes and webhookd's own headers take %d, so the webhook may have at most %d headers of its own; it has %d",
			sqsMaxAttributes, sqsMaxAttributes-room, room, len(headers))
	}
	return nil
}
