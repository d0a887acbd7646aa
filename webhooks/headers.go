package webhooks

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// The limits of a webhook's custom headers (issue 31): how many, how long a name may be (issue 41:
// a name of 5,000 bytes was stored; real ones are a few dozen, and receivers' servers commonly
// refuse a request whose header lines are over a few KiB), and how long a value may be.
const (
	MaxHeaders          = 20
	MaxHeaderNameBytes  = 256
	MaxHeaderValueBytes = 1 << 10
)

// HeadersEdit is a request's custom headers: Set false leaves the webhook's as they are; Set with
// JSON absent, null or {} removes them; otherwise JSON is the object of names and values as sent,
// which replaces them all.
type HeadersEdit struct {
	Set  bool
	JSON json.RawMessage
}

// checkHeaders parses and judges a webhook's custom headers as sent, nil for none. A refusal names
// the header (headers.X-Foo) and never quotes its value: malformed (not an object, a value not a
// string, a name not an HTTP token or over MaxHeaderNameBytes, a reserved name, one name twice) is
// 400, too many headers or a value too long 422.
func checkHeaders(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, malformed("headers", "headers must be a JSON object of header names and string values, or null")
	}
	if len(fields) > MaxHeaders {
		return nil, invalid("headers", "headers has %d headers; at most %d", len(fields), MaxHeaders)
	}
	names := slices.Sorted(maps.Keys(fields))
	seen := make(map[string]string, len(names))
	headers := make(map[string]string, len(names))
	for _, name := range names {
		field := "headers." + clip(name)
		if len(name) > MaxHeaderNameBytes {
			return nil, malformed(field, "%s: a header name may be at most %d bytes; this one is %d", field, MaxHeaderNameBytes, len(name))
		}
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, malformed(field, "%s: a header name must be an HTTP token (letters, digits and !#$%%&'*+-.^_`|~)", field)
		}
		if why := wire.HeaderRefusal(name); why != "" {
			return nil, malformed(field, "%s: %s (docs/api.md, \"Custom headers\", lists the names refused)", field, why)
		}
		lower := strings.ToLower(name)
		if other, ok := seen[lower]; ok {
			return nil, malformed(field, "%s: the same header as %s (header names are case-insensitive)", field, other)
		}
		seen[lower] = name
		var value string
		if err := json.Unmarshal(fields[name], &value); err != nil {
			return nil, malformed(field, "%s must be a string", field)
		}
		if len(value) > MaxHeaderValueBytes {
			return nil, invalid(field, "%s is longer than %d bytes", field, MaxHeaderValueBytes)
		}
		if !httpguts.ValidHeaderFieldValue(value) {
			return nil, malformed(field, "%s holds a character a header value may not (a control character such as a line break)", field)
		}
		headers[name] = value
	}
	if len(headers) == 0 {
		return nil, nil
	}
	return headers, nil
}

// sealHeaders turns the headers of a request into the model's change: checked, then sealed as one
// JSON object (secretbox.Box.WebhookHeaders opens it); headers are the plain ones, nil for none.
func (s *Service) sealHeaders(e HeadersEdit) (change model.HeadersChange, headers map[string]string, err error) {
	if !e.Set {
		return model.HeadersChange{}, nil, nil
	}
	headers, err = checkHeaders(e.JSON)
	if err != nil || headers == nil {
		return model.HeadersChange{Set: true}, nil, err
	}
	box, err := s.box()
	if err != nil {
		return model.HeadersChange{}, nil, err
	}
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(headers); err != nil {
		return model.HeadersChange{}, nil, err
	}
	sealed, err := box.Seal(strings.TrimSpace(plain.String()))
	if err != nil {
		return model.HeadersChange{}, nil, err
	}
	return model.HeadersChange{Set: true, To: &sealed}, headers, nil
}

// RedactedHeaders is what every representation of w shows of its custom headers: each name with
// wire.Redacted of its value, nil for none.
func (s *Service) RedactedHeaders(w *model.Webhook) (map[string]string, error) {
	if w.Headers == nil {
		return nil, nil
	}
	box, err := s.box()
	if err != nil {
		return nil, err
	}
	headers, err := box.WebhookHeaders(w)
	if err != nil {
		return nil, err
	}
	for name, value := range headers {
		headers[name] = wire.Redacted(value)
	}
	return headers, nil
}

// clip bounds a header name as a refusal echoes it.
func clip(name string) string {
	const most = 64
	if len(name) <= most {
		return name
	}
	return strings.ToValidUTF8(name[:most], "") + "…"
}

func malformed(field, format string, args ...any) *InvalidError {
	return &InvalidError{Field: field, Format: format, Args: args, Malformed: true}
}
