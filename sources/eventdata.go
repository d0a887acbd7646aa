package sources

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/mail"
	"net/netip"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nyaruka/phonenumbers"

	"github.com/webhookd/webhookd/input"
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
	kindAddress                // a webhook's address: an absolute http(s) URL, or a broker's (docs/destinations.md)
	kindEmail                  //
	kindPhone                  // E.164
	kindIP                     // IPv4 or IPv6 address
	kindStringMap              // object whose values are strings
	kindObject                 // nested object described by fields
	kindEnum                   // one of enum
)

// addressSchemes are the schemes of a webhook's address (kindAddress): HTTP's and the brokers'
// (destination.Schemes).
var addressSchemes = map[string]bool{"http": true, "https": true, "nats": true, "tls": true, "amqp": true, "amqps": true, "kafka": true, "kafka+tls": true}

type field struct {
	name     string
	kind     kind
	nullable bool
	optional bool     // may be left out; never in event data, whose fields are all required
	fields   []field  // kindObject
	enum     []string // kindEnum
}

// The data of each event type (spec 2.3 and 6.2), written once: what emits an event fills one of
// these structs, and intake validates against the table read from them (eventData). A field's json
// tag names it, in the order receivers get the fields; its data tag gives its rule (the kinds above:
// "id", "text", "enum:a,b"...); a pointer may be null; a struct is a nested object, an embedded one
// adds its fields in place. (A field tagged omitempty may be left out, and is never null: the
// notices' data, model.NoticeData, has such fields; event data has none.)

// campaignData is CampaignData of spec 2.3, the data of every campaign.* event, fields in the spec's
// order.
type campaignData struct {
	ID        int64   `json:"id" data:"id"`
	Name      string  `json:"name" data:"text"`
	Platform  string  `json:"platform" data:"text"`
	Status    string  `json:"status" data:"text"`
	StartDate string  `json:"startDate" data:"timeMillis"`
	EndDate   string  `json:"endDate" data:"timeMillis"`
	Budget    float64 `json:"budget" data:"number"`
}

// websitePublished is the data of website.published.
type websitePublished struct {
	WebsiteID        int64  `json:"websiteId" data:"id"`
	BrandID          int64  `json:"brandId" data:"id"`
	Slug             string `json:"slug" data:"text"`
	URL              string `json:"url" data:"url"`
	PublishedAt      string `json:"publishedAt" data:"time"`
	ScheduledPublish bool   `json:"scheduledPublish" data:"bool"`
}

// websiteArchived is the data of website.archived.
type websiteArchived struct {
	WebsiteID  int64  `json:"websiteId" data:"id"`
	BrandID    int64  `json:"brandId" data:"id"`
	Slug       string `json:"slug" data:"text"`
	ArchivedAt string `json:"archivedAt" data:"time"`
}

// LeadCaptured is the data of lead.captured: the website's ids and the lead its form reported.
type LeadCaptured struct {
	WebsiteID int64 `json:"websiteId" data:"id"`
	BrandID   int64 `json:"brandId" data:"id"`
	Lead
}

// Lead is what a website's form reports of a fan (the body of POST /websites/<id>/leads). Normalize
// brings it to lead.captured's rules.
type Lead struct {
	CollectDataID string            `json:"collectDataId" data:"text"`
	Email         string            `json:"email" data:"email"`
	Phone         string            `json:"phone" data:"phone"`
	Name          string            `json:"name" data:"string"`
	CustomFields  map[string]string `json:"customFields" data:"stringMap"`
	Source        LeadSource        `json:"source"`
}

// LeadSource is where a lead came from.
type LeadSource struct {
	Referrer  string `json:"referrer" data:"url"`
	UserAgent string `json:"userAgent" data:"string"`
	IPAddress string `json:"ipAddress" data:"ip"`
	Country   string `json:"country" data:"string"`
}

// PresaveCompleted is the data of presave.completed: the website's ids and the pre-save.
type PresaveCompleted struct {
	WebsiteID int64 `json:"websiteId" data:"id"`
	BrandID   int64 `json:"brandId" data:"id"`
	Presave
}

// Presave is a fan's pre-save of a release (the body of POST /websites/<id>/presaves).
type Presave struct {
	Platform    string  `json:"platform" data:"text"`
	FanEmail    *string `json:"fanEmail" data:"email"`
	ReleaseDate string  `json:"releaseDate" data:"time"`
	ReleaseURL  string  `json:"releaseUrl" data:"url"`
	Boosts      Boosts  `json:"boosts"`
}

// Boosts is what a fan agreed to with a pre-save.
type Boosts struct {
	FollowedArtist bool `json:"followedArtist" data:"bool"`
	SavedCatalog   bool `json:"savedCatalog" data:"bool"`
	EmailCollected bool `json:"emailCollected" data:"bool"`
}

// thresholdData is the data of analytics.threshold; its metric is one of AnalyticsMetrics.
type thresholdData struct {
	WebsiteID     int64  `json:"websiteId" data:"id"`
	BrandID       int64  `json:"brandId" data:"id"`
	Metric        string `json:"metric" data:"enum:pageViews,uniqueVisitors,totalClicks,signups"`
	Value         int64  `json:"value" data:"count"`
	Threshold     int64  `json:"threshold" data:"count"`
	ThresholdType string `json:"thresholdType" data:"text"`
}

// eventData is the shape of data for every event type in its version 1, read from the structs
// above; later versions are in versions.go, and shape reads any version. Every listed field is
// required (nullable ones may be null) and no other field is accepted, so receivers get exactly the
// documented shape.
var eventData = func() map[string][]field {
	campaign := shapeOf[campaignData]()
	return map[string][]field{
		"campaign.created":    campaign,
		"campaign.updated":    campaign,
		"campaign.processing": campaign,
		"campaign.completed":  campaign,
		"campaign.failed":     campaign,
		"website.published":   shapeOf[websitePublished](),
		"website.archived":    shapeOf[websiteArchived](),
		"lead.captured":       shapeOf[LeadCaptured](),
		"presave.completed":   shapeOf[PresaveCompleted](),
		"analytics.threshold": shapeOf[thresholdData](),
		model.EventTest:       shapeOf[model.TestEventData](),
	}
}()

// AnalyticsMetrics are the metrics an analytics.threshold event may report (spec 6.2).
var AnalyticsMetrics = slices.Clone(eventData["analytics.threshold"][2].enum)

var kindNames = map[string]kind{
	"id": kindID, "count": kindCount, "number": kindNumber, "string": kindString, "text": kindText,
	"bool": kindBool, "time": kindTime, "timeMillis": kindTimeMillis, "url": kindURL, "address": kindAddress, "email": kindEmail,
	"phone": kindPhone, "ip": kindIP, "stringMap": kindStringMap,
}

func shapeOf[T any]() []field { return fieldsOf(reflect.TypeFor[T]()) }

// fieldsOf reads the fields of struct type t from its tags. A tag it cannot read is a mistake in
// the structs above, which every test run meets at start-up.
func fieldsOf(t reflect.Type) []field {
	var fields []field
	for i := range t.NumField() {
		sf := t.Field(i)
		if sf.Anonymous {
			fields = append(fields, fieldsOf(sf.Type)...)
			continue
		}
		if sf.Tag.Get("data") == "-" {
			continue // in no body a schema describes (model.NoticeData.Summary: people's channels only)
		}
		name, options, _ := strings.Cut(sf.Tag.Get("json"), ",")
		f := field{name: name, optional: slices.Contains(strings.Split(options, ","), "omitempty")}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			// encoding/json leaves out a nil pointer tagged omitempty, and writes null for another.
			f.nullable, ft = !f.optional, ft.Elem()
		}
		tag := sf.Tag.Get("data")
		k, ok := kindNames[tag]
		switch values, isEnum := strings.CutPrefix(tag, "enum:"); {
		case ft.Kind() == reflect.Struct && tag == "":
			f.kind, f.fields = kindObject, fieldsOf(ft)
		case isEnum:
			f.kind, f.enum = kindEnum, strings.Split(values, ",")
		case ok && name != "":
			f.kind = k
		default:
			panic(fmt.Sprintf("event data %s.%s: json name %q, data tag %q", t.Name(), sf.Name, name, tag))
		}
		fields = append(fields, f)
	}
	return fields
}

// Intake checks a time with time.Parse and with the pattern its schema states (schema.go), so the
// two agree but for what only time.Parse can tell: the 29th of February of a year that is not a
// leap year (docs/events.md, "Schemas").
var (
	e164Pattern       = regexp.MustCompile(`^\+[1-9][0-9]{1,14}$`)
	rfc3339Pattern    = regexp.MustCompile(timePattern)
	timeMillisPattern = regexp.MustCompile(timeMillisSchemaPattern)
)

// ValidateEventData checks data against the shape of eventType's newest version (the only one
// intake accepts: docs/events.md, "Versions"), returning a *DataError naming the first field at
// fault. Give it the data as the client sent it, not its canonical form: canonical
// numbers are float64s, where an unsafe integer has already become another (see JSONInteger).
func ValidateEventData(eventType string, data json.RawMessage) error {
	fields, ok := newestShape(eventType)
	if !ok {
		return &input.DataError{Field: "eventType", Reason: fmt.Sprintf("unknown event type %q", eventType)}
	}
	return validate(data, fields)
}

// validate checks data against fields, as ValidateEventData does.
func validate(data json.RawMessage, fields []field) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return &input.DataError{Field: "data", Reason: "must be a JSON object"}
	}
	return checkObject("data", v, fields)
}

func checkObject(path string, v any, fields []field) error {
	obj, ok := v.(map[string]any)
	if !ok {
		return &input.DataError{Field: path, Reason: "must be an object"}
	}
	for _, f := range fields {
		val, present := obj[f.name]
		p := path + "." + f.name
		if !present {
			if f.optional {
				continue
			}
			return &input.DataError{Field: p, Reason: "is required"}
		}
		if val == nil {
			if f.nullable {
				continue
			}
			return &input.DataError{Field: p, Reason: "must not be null"}
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
			return &input.DataError{Field: path + "." + k, Reason: "is not a field of this event"}
		}
	}
	return nil
}

func checkValue(path string, val any, f field) error {
	bad := func(reason string) error { return &input.DataError{Field: path, Reason: reason} }
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
		i, isInt, safe := input.JSONInteger(n.String())
		switch {
		case !isInt:
			return bad("must be " + what)
		case !safe:
			return bad(input.UnsafeIntegerReason)
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
			case !input.SafeText(k):
				return bad("must not have a key containing U+0000 (NUL)")
			case !ok:
				return &input.DataError{Field: path + "." + k, Reason: "must be a string"}
			case !input.SafeText(s):
				return &input.DataError{Field: path + "." + k, Reason: "must not contain U+0000 (NUL)"}
			}
		}
	case kindObject:
		return checkObject(path, val, f.fields)
	default:
		s, ok := val.(string)
		if !ok {
			return bad("must be a string")
		}
		if !input.SafeText(s) {
			return bad("must not contain U+0000 (NUL)")
		}
		return checkString(path, s, f)
	}
	return nil
}

func checkString(path, s string, f field) error {
	bad := func(reason string) error { return &input.DataError{Field: path, Reason: reason} }
	switch f.kind {
	case kindText:
		if strings.TrimSpace(s) == "" {
			return bad("must not be empty")
		}
	case kindTime:
		t, ok := ParseTime(s)
		if !ok {
			return bad("must be an ISO 8601 timestamp such as 2026-01-02T15:04:05Z")
		}
		if !input.TimeInRange(t) {
			return bad("must be in the years 0001 to 9999 (UTC)")
		}
	case kindTimeMillis:
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !timeMillisPattern.MatchString(s) {
			return bad("must be an ISO 8601 UTC timestamp with milliseconds such as 2026-01-02T15:04:05.000Z")
		}
		if !input.TimeInRange(t) {
			return bad("must be in the years 0001 to 9999 (UTC)")
		}
	case kindURL:
		u, err := url.Parse(s)
		if err != nil || !u.IsAbs() || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return bad("must be an absolute http(s) URL")
		}
	case kindAddress:
		u, err := url.Parse(s)
		if err != nil || !addressSchemes[strings.ToLower(u.Scheme)] || u.Host == "" {
			return bad("must be an absolute http(s) URL or a broker's address (nats, tls, amqp, amqps, kafka, kafka+tls)")
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

// ParseTime reads s as intake reads every timestamp: RFC 3339 as time.Parse takes it and as the
// schemas' pattern states it (an offset of at most 23:59). False when s is not one; whether it
// falls in the years 0001 to 9999 is the caller's check (input.TimeInRange).
func ParseTime(s string) (time.Time, bool) {
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil && rfc3339Pattern.MatchString(s)
}

// Normalize brings a lead as a form reports it to lead.captured's rules: the phone in E.164 (a
// national number is read in the fan's source.country), no custom fields an empty object. A
// *input.DataError names the field at fault.
func (l *Lead) Normalize() error {
	if l.CustomFields == nil {
		l.CustomFields = map[string]string{}
	}
	if strings.TrimSpace(l.Phone) == "" {
		return &input.DataError{Field: "phone", Reason: "is required"}
	}
	num, err := phonenumbers.Parse(l.Phone, strings.ToUpper(l.Source.Country))
	if err != nil || !phonenumbers.IsValidNumber(num) {
		return &input.DataError{Field: "phone", Reason: "is not a valid number (international +CC form, or national with source.country)"}
	}
	l.Phone = phonenumbers.Format(num, phonenumbers.E164)
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
