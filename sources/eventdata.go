package sources

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/webhookd/webhookd/model"
)

type kind int

const (
	kindID         kind = iota // integer from 1 to MaxSafeInteger
	kindCount                  // integer from 0 to MaxSafeInteger
	kindNumber                 // any finite JSON number
	kindString                 // any string, may be empty
	kindText                   // non-empty string
	kindBool                   //
	kindTime                   // ISO 8601 / RFC 3339 timestamp in years 0001 to 9999 (UTC)
	kindTimeMillis             // ISO 8601 UTC with milliseconds, 2006-01-02T15:04:05.000Z, years 0001 to 9999
	kindURL                    // absolute http(s) URL
	kindEmail                  //
	kindPhone                  // E.164
	kindIP                     // IPv4 or IPv6 address
	kindStringMap              // object whose values are strings
	kindObject                 // nested object described by fields
	kindEnum                   // one of enum
)

type field struct {
	name     string
	kind     kind
	nullable bool
	fields   []field  // kindObject
	enum     []string // kindEnum
}

// Metrics an analytics.threshold event may report (spec 6.2).
var AnalyticsMetrics = []string{"pageViews", "uniqueVisitors", "totalClicks", "signups"}

var campaignFields = []field{
	{name: "id", kind: kindID}, {name: "name", kind: kindText}, {name: "platform", kind: kindText},
	{name: "status", kind: kindText}, {name: "startDate", kind: kindTimeMillis}, {name: "endDate", kind: kindTimeMillis},
	{name: "budget", kind: kindNumber},
}

// eventData is the shape of data for every event type (spec 2.3 and 6.2). Every listed field is
// required (nullable ones may be null) and no other field is accepted, so receivers get exactly the
// documented shape.
var eventData = map[string][]field{
	"campaign.created":    campaignFields,
	"campaign.updated":    campaignFields,
	"campaign.processing": campaignFields,
	"campaign.completed":  campaignFields,
	"campaign.failed":     campaignFields,
	"website.published": {
		{name: "websiteId", kind: kindID}, {name: "brandId", kind: kindID}, {name: "slug", kind: kindText},
		{name: "url", kind: kindURL}, {name: "publishedAt", kind: kindTime}, {name: "scheduledPublish", kind: kindBool},
	},
	"website.archived": {
		{name: "websiteId", kind: kindID}, {name: "brandId", kind: kindID}, {name: "slug", kind: kindText},
		{name: "archivedAt", kind: kindTime},
	},
	"lead.captured": {
		{name: "websiteId", kind: kindID}, {name: "brandId", kind: kindID}, {name: "collectDataId", kind: kindText},
		{name: "email", kind: kindEmail}, {name: "phone", kind: kindPhone}, {name: "name", kind: kindString},
		{name: "customFields", kind: kindStringMap},
		{name: "source", kind: kindObject, fields: []field{
			{name: "referrer", kind: kindURL}, {name: "userAgent", kind: kindString},
			{name: "ipAddress", kind: kindIP}, {name: "country", kind: kindString},
		}},
	},
	"presave.completed": {
		{name: "websiteId", kind: kindID}, {name: "brandId", kind: kindID}, {name: "platform", kind: kindText},
		{name: "fanEmail", kind: kindEmail, nullable: true}, {name: "releaseDate", kind: kindTime},
		{name: "releaseUrl", kind: kindURL},
		{name: "boosts", kind: kindObject, fields: []field{
			{name: "followedArtist", kind: kindBool}, {name: "savedCatalog", kind: kindBool}, {name: "emailCollected", kind: kindBool},
		}},
	},
	"analytics.threshold": {
		{name: "websiteId", kind: kindID}, {name: "brandId", kind: kindID},
		{name: "metric", kind: kindEnum, enum: AnalyticsMetrics},
		{name: "value", kind: kindCount}, {name: "threshold", kind: kindCount}, {name: "thresholdType", kind: kindText},
	},
	model.EventTest: {{name: "message", kind: kindText}, {name: "webhookId", kind: kindID}},
}

var (
	e164Pattern       = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)
	timeMillisPattern = regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z$`)
)

// ValidateEventData checks data against the shape of eventType, returning a *DataError naming the
// first field at fault. Give it the data as the client sent it, not its canonical form: canonical
// numbers are float64s, where an unsafe integer has already become another (see JSONInteger).
func ValidateEventData(eventType string, data json.RawMessage) error {
	fields, ok := eventData[eventType]
	if !ok {
		return &model.DataError{Field: "eventType", Reason: fmt.Sprintf("unknown event type %q", eventType)}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return &model.DataError{Field: "data", Reason: "must be a JSON object"}
	}
	return checkObject("data", v, fields)
}

func checkObject(path string, v any, fields []field) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return &model.DataError{Field: path, Reason: "must be an object"}
	}
	for _, f := range fields {
		val, present := obj[f.name]
		p := path + "." + f.name
		if !present {
			return &model.DataError{Field: p, Reason: "is required"}
		}
		if val == nil {
			if f.nullable {
				continue
			}
			return &model.DataError{Field: p, Reason: "must not be null"}
		}
		if err := checkValue(p, val, f); err != nil {
			return err
		}
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.ContainsFunc(fields, func(f field) bool { return f.name == k }) {
			return &model.DataError{Field: path + "." + k, Reason: "is not a field of this event"}
		}
	}
	return nil
}

func checkValue(path string, val any, f field) error {
	bad := func(reason string) error { return &model.DataError{Field: path, Reason: reason} }
	switch f.kind {
	case kindID, kindCount:
		low, what := int64(1), "a positive integer"
		if f.kind == kindCount {
			low, what = 0, "a non-negative integer"
		}
		n, ok := val.(json.Number)
		if !ok {
			return bad("must be " + what)
		}
		i, isInt, safe := model.JSONInteger(n.String())
		switch {
		case !isInt:
			return bad("must be " + what)
		case !safe:
			return bad(model.UnsafeIntegerReason)
		case i < low:
			return bad("must be " + what)
		}
	case kindNumber:
		n, ok := val.(json.Number)
		if !ok {
			return bad("must be a number")
		}
		if _, err := n.Float64(); err != nil {
			return bad("must be a finite number")
		}
	case kindBool:
		if _, ok := val.(bool); !ok {
			return bad("must be true or false")
		}
	case kindStringMap:
		obj, ok := val.(map[string]any)
		if !ok {
			return bad("must be an object")
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		slices.Sort(keys) // the first field at fault is the same on every run
		for _, k := range keys {
			s, ok := obj[k].(string)
			switch {
			case !model.SafeText(k):
				return bad("must not have a key containing U+0000 (NUL)")
			case !ok:
				return &model.DataError{Field: path + "." + k, Reason: "must be a string"}
			case !model.SafeText(s):
				return &model.DataError{Field: path + "." + k, Reason: "must not contain U+0000 (NUL)"}
			}
		}
	case kindObject:
		return checkObject(path, val, f.fields)
	default:
		s, ok := val.(string)
		if !ok {
			return bad("must be a string")
		}
		if !model.SafeText(s) {
			return bad("must not contain U+0000 (NUL)")
		}
		return checkString(path, s, f)
	}
	return nil
}

func checkString(path, s string, f field) error {
	bad := func(reason string) error { return &model.DataError{Field: path, Reason: reason} }
	switch f.kind {
	case kindText:
		if strings.TrimSpace(s) == "" {
			return bad("must not be empty")
		}
	case kindTime:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return bad("must be an ISO 8601 timestamp such as 2026-01-02T15:04:05Z")
		}
		if !model.TimeInRange(t) {
			return bad("must be in the years 0001 to 9999 (UTC)")
		}
	case kindTimeMillis:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !timeMillisPattern.MatchString(s) {
			return bad("must be an ISO 8601 UTC timestamp with milliseconds such as 2026-01-02T15:04:05.000Z")
		}
		if !model.TimeInRange(t) {
			return bad("must be in the years 0001 to 9999 (UTC)")
		}
	case kindURL:
		u, err := url.Parse(s)
		if err != nil || !u.IsAbs() || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return bad("must be an absolute http(s) URL")
		}
	case kindEmail:
		if !ValidEmail(s) {
			return bad("must be an e-mail address")
		}
	case kindPhone:
		if !e164Pattern.MatchString(s) {
			return bad("must be a phone number in E.164 format such as +14155550123")
		}
	case kindIP:
		if _, err := netip.ParseAddr(s); err != nil {
			return bad("must be an IPv4 or IPv6 address")
		}
	case kindEnum:
		if !slices.Contains(f.enum, s) {
			return bad(fmt.Sprintf("must be one of %s", strings.Join(f.enum, ", ")))
		}
	}
	return nil
}

// ValidEmail reports whether s is a bare e-mail address (no display name, one @, a dotted domain).
func ValidEmail(s string) bool {
	addr, err := mail.ParseAddress(s)
	if err != nil || addr.Address != s {
		return false
	}
	_, domain, _ := strings.Cut(s, "@")
	return strings.Contains(domain, ".") && !strings.HasPrefix(domain, ".") && !strings.HasSuffix(domain, ".")
}
