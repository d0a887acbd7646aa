package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/webhookd/webhookd/activities/egress"
	"github.com/webhookd/webhookd/model"
)

// The bounds of a webhook's authentication to its receiver: the length of each text field and how
// many scopes.
const (
	MaxAuthFieldBytes = 1 << 10
	MaxAuthScopes     = 20
)

// AuthMask is what every representation shows instead of a stored password or client secret.
const AuthMask = "••••••••"

// AuthEdit is a request's authentication to the receiver: Set false leaves the webhook's as it
// is; Set with JSON absent or null removes it; otherwise JSON is the object as sent, which
// replaces it whole.
type AuthEdit struct {
	Set  bool
	JSON json.RawMessage
}

// authRequest is the object a request sends; its fields are checked by the auth's type.
type authRequest struct {
	Type         *string          `json:"type"`
	Username     *string          `json:"username"`
	Password     *string          `json:"password"`
	TokenURL     *string          `json:"tokenUrl"`
	ClientID     *string          `json:"clientId"`
	ClientSecret *string          `json:"clientSecret"`
	Scopes       *json.RawMessage `json:"scopes"`
	Audience     *string          `json:"audience"`
}

// checkAuth parses and judges an authentication as sent, nil for none. A refusal names the field
// (auth.password) and never quotes a value: a malformed or missing field is 400; the token URL is
// judged by the address policy as a receiver URL is.
func (s *Service) checkAuth(ctx context.Context, raw json.RawMessage) (*model.ReceiverAuth, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var req authRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var syntax *json.UnmarshalTypeError
		if errors.As(err, &syntax) && syntax.Field != "" {
			return nil, malformed("auth."+syntax.Field, "auth.%s has the wrong type", syntax.Field)
		}
		if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			return nil, malformed("auth", "auth has an unknown field %s", clip(field))
		}
		return nil, malformed("auth", `auth must be an object such as {"type": "basic", "username": "...", "password": "..."}, or null`)
	}
	if req.Type == nil || *req.Type == "" {
		return nil, malformed("auth.type", "auth.type is required: basic or oauth2")
	}
	str := func(field string, v *string, required bool) (string, error) {
		switch {
		case v == nil || *v == "":
			if required {
				return "", malformed("auth."+field, "auth.%s is required", field)
			}
			return "", nil
		case len(*v) > MaxAuthFieldBytes:
			return "", malformed("auth."+field, "auth.%s is longer than %d bytes", field, MaxAuthFieldBytes)
		case strings.ContainsFunc(*v, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			return "", malformed("auth."+field, "auth.%s holds a control character", field)
		}
		return *v, nil
	}
	var err error
	auth := &model.ReceiverAuth{Type: *req.Type}
	switch *req.Type {
	case model.AuthBasic:
		if req.TokenURL != nil || req.ClientID != nil || req.ClientSecret != nil || req.Scopes != nil || req.Audience != nil {
			return nil, malformed("auth", "auth of type basic takes username and password only")
		}
		if auth.Username, err = str("username", req.Username, true); err != nil {
			return nil, err
		}
		if strings.Contains(auth.Username, ":") {
			return nil, malformed("auth.username", "auth.username must not contain a colon (RFC 7617)")
		}
		if auth.Password, err = str("password", req.Password, true); err != nil {
			return nil, err
		}
	case model.AuthOAuth2:
		if req.Username != nil || req.Password != nil {
			return nil, malformed("auth", "auth of type oauth2 takes tokenUrl, clientId, clientSecret, scopes and audience")
		}
		if auth.TokenURL, err = str("tokenUrl", req.TokenURL, true); err != nil {
			return nil, err
		}
		if auth.ClientID, err = str("clientId", req.ClientID, true); err != nil {
			return nil, err
		}
		if auth.ClientSecret, err = str("clientSecret", req.ClientSecret, true); err != nil {
			return nil, err
		}
		if auth.Audience, err = str("audience", req.Audience, false); err != nil {
			return nil, err
		}
		if auth.Scopes, err = checkScopes(req.Scopes); err != nil {
			return nil, err
		}
		if err := s.checkTokenURL(ctx, auth.TokenURL); err != nil {
			return nil, err
		}
	default:
		return nil, malformed("auth.type", "auth.type must be basic or oauth2")
	}
	return auth, nil
}

// checkScopes judges auth.scopes: absent, null or a list of scope tokens (RFC 6749 3.3).
func checkScopes(raw *json.RawMessage) ([]string, error) {
	if raw == nil || string(*raw) == "null" {
		return nil, nil
	}
	var scopes []string
	if err := json.Unmarshal(*raw, &scopes); err != nil {
		return nil, malformed("auth.scopes", "auth.scopes must be a list of strings")
	}
	if len(scopes) > MaxAuthScopes {
		return nil, malformed("auth.scopes", "auth.scopes has %d scopes; at most %d", len(scopes), MaxAuthScopes)
	}
	for _, scope := range scopes {
		if scope == "" || len(scope) > MaxAuthFieldBytes || strings.ContainsFunc(scope, func(r rune) bool {
			return r <= 0x20 || r == '"' || r == '\\' || r >= 0x7f
		}) {
			return nil, malformed("auth.scopes", "auth.scopes: a scope is a non-empty token of printable ASCII without spaces, quotes or backslashes")
		}
	}
	return scopes, nil
}

// checkTokenURL judges a token URL as a receiver URL is judged (checkURL): https unless plain http
// targets are allowed, and an address the egress policy accepts. The token client repeats the
// address check when it dials (activities/egress/token.go).
func (s *Service) checkTokenURL(ctx context.Context, raw string) error {
	if err := s.policy.CheckURL(ctx, raw, s.resolver); err != nil {
		var ue *egress.URLError
		if errors.As(err, &ue) {
			reason := ue.Reason
			if rest, ok := strings.CutPrefix(reason, "url "); ok {
				reason = "auth.tokenUrl " + rest
			}
			return malformed("auth.tokenUrl", "%s", reason)
		}
		return err
	}
	return nil
}

// sealAuth turns the authentication of a request into the model's change, checked and sealed as
// one JSON object (secretbox.Box.WebhookAuth opens it).
func (s *Service) sealAuth(ctx context.Context, e AuthEdit) (model.AuthChange, error) {
	if !e.Set {
		return model.AuthChange{}, nil
	}
	auth, err := s.checkAuth(ctx, e.JSON)
	if err != nil || auth == nil {
		return model.AuthChange{Set: true}, err
	}
	box, err := s.box()
	if err != nil {
		return model.AuthChange{}, err
	}
	plain, err := json.Marshal(auth)
	if err != nil {
		return model.AuthChange{}, err
	}
	sealed, err := box.Seal(string(plain))
	if err != nil {
		return model.AuthChange{}, err
	}
	return model.AuthChange{Set: true, To: &sealed}, nil
}

// RedactedAuth is what every representation of w shows of its authentication: its settings with
// the password or client secret replaced by AuthMask, nil for none.
func (s *Service) RedactedAuth(w *model.Webhook) (*model.ReceiverAuth, error) {
	if w.Auth == nil {
		return nil, nil
	}
	box, err := s.box()
	if err != nil {
		return nil, err
	}
	auth, err := box.WebhookAuth(w)
	if err != nil {
		return nil, err
	}
	if auth.Password != "" {
		auth.Password = AuthMask
	}
	if auth.ClientSecret != "" {
		auth.ClientSecret = AuthMask
	}
	return auth, nil
}

// checkAuthorization refuses a custom Authorization header beside an authentication, as the
// webhook would have them after the change: auth sets that header itself. stored is the webhook
// before the change, nil on create.
func (s *Service) checkAuthorization(c model.SettingsChange, headers map[string]string, stored *model.Webhook) error {
	authOn := c.Auth.To != nil || !c.Auth.Set && stored != nil && stored.Auth != nil
	if !authOn {
		return nil
	}
	if !c.Headers.Set && stored != nil && stored.Headers != nil {
		box, err := s.box()
		if err != nil {
			return err
		}
		if headers, err = box.WebhookHeaders(stored); err != nil {
			return err
		}
	}
	for name := range headers {
		if strings.EqualFold(name, "Authorization") {
			return malformed("headers."+clip(name), "headers.%s cannot be set together with auth, which sets the Authorization header itself; remove one of them", clip(name))
		}
	}
	return nil
}
