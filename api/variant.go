package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
)

// variant is what differs between the two API surfaces over HTTP: the envelope and the JSON shape
// of a webhook. The rest (path prefix, credential, event type field, statuses, test events) is the
// variant table's, model.VariantSpec, which spec points to. Handlers are written once against it.
type variant struct {
	model model.Variant
	spec  *model.VariantSpec
	// prefix is spec.APIPrefix, where the variant's routes live.
	prefix string
	// present renders a webhook; secret is included only when not empty (create); r holds its
	// custom headers and its authentication, redacted.
	present func(w *model.Webhook, secret string, r redacted) any
	// success renders a successful envelope. data may be nil (delete).
	success   func(data any, message string) any
	errorBody func(*apiError) any
}

const contextVariant = "webhookd.variant"

var variantA = &variant{
	model:  model.VariantA,
	spec:   model.VariantA.Spec(),
	prefix: model.VariantA.Spec().APIPrefix,
	present: func(w *model.Webhook, secret string, r redacted) any {
		return webhookA{
			ID: w.ID, URL: w.URL, EventType: w.EventType, Version: w.Version, Status: w.Status, Disabled: w.Disabled(),
			CreatedAt: isoTime(w.CreatedAt), UpdatedAt: isoTime(w.UpdatedAt),
			RateLimit: w.RateLimit, MaxInFlight: w.MaxInFlight, Filter: filterJSON(w), Ordering: orderingView(w), Headers: r.Headers, Auth: r.Auth, TLS: r.TLS, Destination: r.Destination,
			Secret: secret,
		}
	},
	success: func(data any, message string) any {
		body := map[string]any{"success": true}
		if data != nil {
			body["data"] = data
		}
		if message != "" {
			body["message"] = message
		}
		return body
	},
	errorBody: func(e *apiError) any {
		body := map[string]any{"success": false, "message": e.message, "code": e.code}
		if e.field != "" {
			body["field"] = e.field
		}
		return body
	},
}

var variantB = &variant{
	model:  model.VariantB,
	spec:   model.VariantB.Spec(),
	prefix: model.VariantB.Spec().APIPrefix,
	present: func(w *model.Webhook, secret string, r redacted) any {
		out := webhookB{
			ID: w.ID, URL: w.URL, EventType: w.EventType, Version: w.Version, Status: w.Status,
			CreatedAt: isoTime(w.CreatedAt), LastStatus: w.LastStatus, FailureCount: w.FailureCount,
			RateLimit: w.RateLimit, MaxInFlight: w.MaxInFlight, Filter: filterJSON(w), Ordering: orderingView(w), Headers: r.Headers, Auth: r.Auth, TLS: r.TLS, Destination: r.Destination,
			Secret: secret,
		}
		if w.LastTriggeredAt != nil {
			t := isoTime(*w.LastTriggeredAt)
			out.LastTriggered = &t
		}
		return out
	},
	success: func(data any, message string) any {
		return map[string]any{"data": data, "message": message, "isError": false}
	},
	errorBody: func(e *apiError) any {
		body := map[string]any{"data": nil, "message": e.message, "isError": true, "code": e.code}
		if e.field != "" {
			body["field"] = e.field
		}
		return body
	},
}

// credential returns the API key presented as the variant's spec says (its AuthHeader, after its
// AuthScheme if it has one), or an error naming what the caller should have sent. Another variant's
// header is named as the mistake, so a key pasted into the wrong integration fails loudly.
func (v *variant) credential(r *http.Request) (string, *apiError) {
	header, scheme := v.spec.AuthHeader, v.spec.AuthScheme
	value := r.Header.Get(header)
	expected := "the " + header + " header"
	if scheme == "" && value != "" {
		return value, nil
	}
	if scheme != "" {
		if got, key, ok := strings.Cut(value, " "); ok && strings.EqualFold(got, scheme) && strings.TrimSpace(key) != "" {
			return strings.TrimSpace(key), nil
		}
		if value != "" {
			return "", unauthorized(header + " header must be '" + scheme + " <API key>'")
		}
		expected = "'" + header + ": " + scheme + " <API key>'"
	}
	for _, other := range model.Variants {
		if h := other.Spec().AuthHeader; !strings.EqualFold(h, header) && r.Header.Get(h) != "" {
			return "", unauthorized("this API authenticates with " + expected + ", not " + h)
		}
	}
	return "", unauthorized("missing " + header + " header")
}

// variantOf finds the variant of a request by its path, so errors raised before any handler runs
// (unknown route, body too large) still get the right envelope.
func variantOf(c echo.Context) (*variant, bool) {
	if v, ok := c.Get(contextVariant).(*variant); ok {
		return v, true
	}
	path := c.Request().URL.Path
	for _, v := range []*variant{variantA, variantB} {
		if path == v.prefix || strings.HasPrefix(path, v.prefix+"/") {
			return v, true
		}
	}
	return nil, false
}

// isoTime renders as ISO 8601 UTC with milliseconds, as JavaScript's Date.toISOString does.
type isoTime time.Time

func (t isoTime) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format("2006-01-02T15:04:05.000Z") + `"`), nil
}

type webhookA struct {
	ID        int64  `json:"id"`
	URL       string `json:"url"`
	EventType string `json:"eventType"`
	// Version is the version of its event type's data the webhook receives (docs/events.md,
	// "Versions"); additive, as disabled.
	Version int    `json:"version"`
	Status  string `json:"status"`
	// Disabled is variant A's view of a disabled webhook: the specification's statuses have no
	// such value, and a field a client does not know breaks it less than a status it does not
	// know. Variant B's status says disabled instead.
	Disabled  bool    `json:"disabled"`
	CreatedAt isoTime `json:"createdAt"`
	UpdatedAt isoTime `json:"updatedAt"`
	// RateLimit and MaxInFlight are the webhook's own limits, null for the worker's defaults. Like
	// disabled they are additive: a client reading only the specification's fields ignores them.
	RateLimit   *int `json:"rateLimit"`
	MaxInFlight *int `json:"maxInFlight"`
	// Filter is the webhook's payload filter as stored (docs/filters.md), null for none.
	Filter json.RawMessage `json:"filter"`
	// Ordering is the webhook's ordering setting (docs/ordering.md), null when it is not ordered.
	Ordering *orderingJSON `json:"ordering"`
	// Headers are the webhook's custom headers, each value redacted (docs/api.md), null for none.
	Headers map[string]string `json:"headers"`
	// Auth is the webhook's authentication to its receiver, its password or client secret
	// redacted (docs/api.md), null for none.
	Auth any `json:"auth"`
	// TLS is the webhook's TLS settings toward its receiver, its certificates shown by subject,
	// issuer and expiry and its private key redacted (docs/api.md), null for none.
	TLS *tlsSettings `json:"tls"`
	// Destination is the webhook's destination beyond HTTP (docs/destinations.md), its secrets
	// redacted, null for an HTTPS endpoint.
	Destination *destinationJSON `json:"destination"`
	Secret      string           `json:"secret,omitempty"`
}

// redacted is what a representation shows of a webhook's sealed settings: its custom headers
// (webhooks.Service.RedactedHeaders) and its authentication (webhooks.Service.RedactedAuth), nil
// for none.
type redacted struct {
	Headers map[string]string
	// Auth is a basicAuth, an oauth2Auth or nil (authView).
	Auth        any
	TLS         *tlsSettings
	Destination *destinationJSON
}

// destinationJSON shows a webhook's destination beyond HTTP (webhooks.Service.RedactedDestination):
// every member is present, null when the destination does not set it (another kind's member
// among them); a secret (token, secretAccessKey, sessionToken) shows as a mask.
type destinationJSON struct {
	Type            string  `json:"type"`
	Subject         *string `json:"subject"`
	Exchange        *string `json:"exchange"`
	RoutingKey      *string `json:"routingKey"`
	Topic           *string `json:"topic"`
	Region          *string `json:"region"`
	AccessKeyID     *string `json:"accessKeyId"`
	MessageGroupID  *string `json:"messageGroupId"`
	Token           *string `json:"token"`
	SecretAccessKey *string `json:"secretAccessKey"`
	SessionToken    *string `json:"sessionToken"`
}

// destinationView is how the API shows a redacted destination.
func destinationView(d *webhooks.DestinationInfo) *destinationJSON {
	if d == nil {
		return nil
	}
	set := func(v string) *string {
		if v == "" {
			return nil
		}
		return &v
	}
	return &destinationJSON{Type: d.Type, Subject: set(d.Subject), Exchange: set(d.Exchange), RoutingKey: set(d.RoutingKey),
		Topic: set(d.Topic), Region: set(d.Region), AccessKeyID: set(d.AccessKeyID), MessageGroupID: set(d.MessageGroupID),
		Token: set(d.Token), SecretAccessKey: set(d.SecretAccessKey), SessionToken: set(d.SessionToken)}
}

// tlsSettings shows a webhook's TLS settings (webhooks.Service.RedactedTLS): every field is
// present, null when not set; the private key is never shown.
type tlsSettings struct {
	CACert     *certificateView `json:"caCert"`
	ClientCert *certificateView `json:"clientCert"`
	ClientKey  *string          `json:"clientKey"`
}

type certificateView struct {
	Subject  string  `json:"subject"`
	Issuer   string  `json:"issuer"`
	NotAfter isoTime `json:"notAfter"`
}

// tlsView is how the API shows redacted TLS settings.
func tlsView(t *webhooks.TLSInfo) *tlsSettings {
	if t == nil {
		return nil
	}
	cert := func(c *webhooks.Certificate) *certificateView {
		if c == nil {
			return nil
		}
		return &certificateView{Subject: c.Subject, Issuer: c.Issuer, NotAfter: isoTime(c.NotAfter)}
	}
	out := &tlsSettings{CACert: cert(t.CACert), ClientCert: cert(t.ClientCert)}
	if t.ClientKey != "" {
		out.ClientKey = &t.ClientKey
	}
	return out
}

// basicAuth and oauth2Auth show a webhook's authentication, its secret redacted
// (webhooks.AuthMask); every field is present, null when not set.
type basicAuth struct {
	Type     string `json:"type"`
	Username string `json:"username"`
	Password string `json:"password"`
}

type oauth2Auth struct {
	Type         string   `json:"type"`
	TokenURL     string   `json:"tokenUrl"`
	ClientID     string   `json:"clientId"`
	ClientSecret string   `json:"clientSecret"`
	Scopes       []string `json:"scopes"`
	Audience     *string  `json:"audience"`
}

// authView is how the API shows a redacted authentication (webhooks.Service.RedactedAuth).
func authView(a *model.ReceiverAuth) any {
	switch {
	case a == nil:
		return nil
	case a.Type == model.AuthBasic:
		return basicAuth{Type: a.Type, Username: a.Username, Password: a.Password}
	}
	out := oauth2Auth{Type: a.Type, TokenURL: a.TokenURL, ClientID: a.ClientID, ClientSecret: a.ClientSecret, Scopes: a.Scopes}
	if a.Audience != "" {
		out.Audience = &a.Audience
	}
	return out
}

type webhookB struct {
	ID            int64             `json:"id"`
	URL           string            `json:"url"`
	EventType     string            `json:"eventType"`
	Version       int               `json:"version"`
	Status        string            `json:"status"`
	CreatedAt     isoTime           `json:"createdAt"`
	LastTriggered *isoTime          `json:"lastTriggered"`
	LastStatus    *string           `json:"lastStatus"`
	FailureCount  int               `json:"failureCount"`
	RateLimit     *int              `json:"rateLimit"`
	MaxInFlight   *int              `json:"maxInFlight"`
	Filter        json.RawMessage   `json:"filter"`
	Ordering      *orderingJSON     `json:"ordering"`
	Headers       map[string]string `json:"headers"`
	Auth          any               `json:"auth"`
	TLS           *tlsSettings      `json:"tls"`
	Destination   *destinationJSON  `json:"destination"`
	Secret        string            `json:"secret,omitempty"`
}

// filterJSON is w's filter as a JSON value: the stored canonical text, or null.
func filterJSON(w *model.Webhook) json.RawMessage {
	if w.Filter == nil {
		return json.RawMessage("null")
	}
	return json.RawMessage(*w.Filter)
}

// orderingJSON shows a webhook's ordering setting: the dotted path whose value names an event's lane.
type orderingJSON struct {
	Key string `json:"key"`
}

// orderingView is w's ordering setting, nil when w is not ordered.
func orderingView(w *model.Webhook) *orderingJSON {
	if w.OrderingKey == nil {
		return nil
	}
	return &orderingJSON{Key: *w.OrderingKey}
}
