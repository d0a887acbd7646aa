package wire

import (
	"encoding/json"
	"strings"
	"time"
)

// Variant B receivers verify by re-serializing the parsed body with JavaScript's JSON.stringify, so
// every byte we sign must be what JSON.stringify(JSON.parse(body)) gives back. CanonicalJSON brings
// event data into that form once, when the event is accepted; BodyA and BodyB then only concatenate.

// BodyA is variant A's delivery body: {"eventType":..,"data":..,"timestamp":"2006-01-02T15:04:05.000Z"} (UTC, milliseconds). data is canonical JSON already.
func BodyA(eventType string, data json.RawMessage, occurred time.Time) []byte {
	b := make([]byte, 0, len(data)+len(eventType)+64)
	b = append(b, `{"eventType":`...)
	b = appendJSString(b, eventType)
	b = append(b, `,"data":`...)
	b = appendData(b, data)
	b = append(b, `,"timestamp":`...)
	b = appendJSString(b, occurred.UTC().Format("2006-01-02T15:04:05.000Z"))
	return append(b, '}')
}

// BodyB is variant B's delivery body {"event":..,"timestamp":"2006-01-02T15:04:05Z","data":..,"signature":"sha256=<hex>"} (UTC, no fraction),
// the signature being HMAC-SHA256 keyed with []byte(secret) over exactly the bytes `{"event":..,"timestamp":..,"data":..}`.
func BodyB(event string, data json.RawMessage, occurred time.Time, secret string) []byte {
	b := appendUnsignedB(make([]byte, 0, len(data)+len(event)+160), event, data, occurred)
	// The receiver deletes "signature" and re-serializes, which yields the unsigned bytes above
	// because the signature is the last field.
	sig := SignBodyB(b, secret)
	b = append(b[:len(b)-1], `,"signature":`...)
	b = appendJSString(b, sig)
	return append(b, '}')
}

// UnsignedBodyB is variant B's delivery body without its signature field: the bytes the signature
// covers, which the delivery log shows as what was sent.
func UnsignedBodyB(event string, data json.RawMessage, occurred time.Time) []byte {
	return appendUnsignedB(make([]byte, 0, len(data)+len(event)+64), event, data, occurred)
}

func appendUnsignedB(b []byte, event string, data json.RawMessage, occurred time.Time) []byte {
	b = append(b, `{"event":`...)
	b = appendJSString(b, event)
	b = append(b, `,"timestamp":`...)
	b = appendJSString(b, occurred.UTC().Format("2006-01-02T15:04:05Z"))
	b = append(b, `,"data":`...)
	b = appendData(b, data)
	return append(b, '}')
}

// appendData inserts canonical data verbatim. Empty data is written as null, as encoding/json
// marshals an empty RawMessage, so the body stays valid JSON.
func appendData(dst []byte, data json.RawMessage) []byte {
	if len(data) == 0 {
		return append(dst, "null"...)
	}
	return append(dst, data...)
}

// Layout names the shape of a delivery body. Each variant's entry in the variant table
// (model.VariantSpec.Body) names its layout.
type Layout string

const (
	// LayoutA is BodyA: the type in "eventType", a millisecond timestamp, no signature in the body.
	LayoutA Layout = "A"
	// LayoutB is BodyB: the type in "event", a second timestamp, the body's own signature last.
	LayoutB Layout = "B"
	// LayoutNotice is NoticeBody: an operational webhook's notice, in the shape Standard Webhooks
	// and Svix's operational webhooks use, signed by the headers alone.
	LayoutNotice Layout = "notice"
)

// NoticeBody is a notice's body {"type":..,"timestamp":"2006-01-02T15:04:05.000Z","data":..} (UTC,
// milliseconds). data is canonical JSON already.
func NoticeBody(noticeType string, data json.RawMessage, occurred time.Time) []byte {
	b := make([]byte, 0, len(data)+len(noticeType)+64)
	b = append(b, `{"type":`...)
	b = appendJSString(b, noticeType)
	b = append(b, `,"timestamp":`...)
	b = appendJSString(b, occurred.UTC().Format("2006-01-02T15:04:05.000Z"))
	b = append(b, `,"data":`...)
	b = appendData(b, data)
	return append(b, '}')
}

// ChatBody is the body a chat's incoming webhook takes (Slack's shape, which Mattermost, Teams'
// Workflows and most others accept): {"text": text}, with &, < and > escaped as &amp;, &lt; and
// &gt;, as Slack asks: there they are its markup (<url|label>, <@user>), and a URL's & or a
// receiver's <html> would be read as such. Nothing else is escaped.
func ChatBody(text string) []byte {
	text = chatEscaper.Replace(text)
	return append(appendJSString(append(make([]byte, 0, len(text)+16), `{"text":`...), text), '}')
}

var chatEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// Body is the delivery body of layout l. secret signs LayoutB's, and is not used by LayoutA's.
func Body(l Layout, eventType string, data json.RawMessage, occurred time.Time, secret string) []byte {
	switch l {
	case LayoutA:
		return BodyA(eventType, data, occurred)
	case LayoutNotice:
		return NoticeBody(eventType, data, occurred)
	}
	return BodyB(eventType, data, occurred, secret)
}

// LoggedBody is the body of layout l as the delivery log shows it: LayoutB's without its signature.
func LoggedBody(l Layout, eventType string, data json.RawMessage, occurred time.Time) []byte {
	switch l {
	case LayoutA:
		return BodyA(eventType, data, occurred)
	case LayoutNotice:
		return NoticeBody(eventType, data, occurred)
	}
	return UnsignedBodyB(eventType, data, occurred)
}
