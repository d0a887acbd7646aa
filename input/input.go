// Package input holds the rules every value a client sends must meet before webhookd stores or
// delivers it (the DataError that names a field, safe integers and text, repeated parameters, the
// range of times), the same on SQLite and PostgreSQL, for the API, the portal, the use cases and
// the event data's checks alike.
package input

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Rules every value a client sends must meet before webhookd stores or delivers it, the same on
// SQLite and PostgreSQL. The API checks request fields with them and sources.ValidateEventData
// checks event data with them, so a resource and an event carrying the same value are refused alike.

// DataError says which field of a value a client sent is wrong, as a path like "data.source.referrer"
// or a parameter's name such as "since".
type DataError struct {
	Field  string
	Reason string
}

func (e *DataError) Error() string { return e.Field + ": " + e.Reason }

// MaxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER, 2^53-1. Deliveries are JSON read by
// JavaScript receivers (and stored in canonical form, where every number is a float64): an integer
// beyond it would arrive as another integer, e.g. 9007199254740993 as 9007199254740992.
const MaxSafeInteger = 1<<53 - 1

// UnsafeIntegerReason is the reason given for an integer beyond ±MaxSafeInteger, by the API and by
// sources.ValidateEventData alike.
const UnsafeIntegerReason = "must be an integer within ±9007199254740991 (2^53-1), the integers JavaScript receivers read exactly"

// SafeInteger reports whether n survives a JavaScript receiver unchanged: |n| <= 2^53-1.
func SafeInteger(n int64) bool { return n >= -MaxSafeInteger && n <= MaxSafeInteger }

// JSONInteger reads a JSON number literal that must denote an integer. isInteger reports whether the
// literal's exact decimal value is an integer ("1", "1.0" and "1e2" are; "1.5" and "1.00000000000000001"
// are not); safe whether that integer is within ±MaxSafeInteger, in which case n is its value. The
// literal is read exactly, not through float64, which would round 9007199254740993 to a safe-looking
// 9007199254740992.
func JSONInteger(lit string) (n int64, isInteger, safe bool) {
	neg := strings.HasPrefix(lit, "-")
	lit = strings.TrimPrefix(lit, "-")
	mant, expPart, hasExp := strings.Cut(strings.ToLower(lit), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expPart)
		if err != nil {
			// Only a huge exponent fails here (the grammar was checked by the JSON decoder): the
			// value is 0 (negative exponent, it can only be an integer if all digits are zero) or
			// far out of range.
			if strings.Trim(strings.ReplaceAll(mant, ".", ""), "0") == "" {
				return 0, true, true
			}
			if strings.HasPrefix(expPart, "-") {
				return 0, false, false
			}
			return 0, true, false
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	for exp < 0 && strings.HasSuffix(digits, "0") {
		digits, exp = digits[:len(digits)-1], exp+1
	}
	if digits == "" {
		return 0, true, true
	}
	if exp < 0 {
		return 0, false, false
	}
	if len(digits)+exp > 16 { // MaxSafeInteger has 16 digits
		return 0, true, false
	}
	v, err := strconv.ParseInt(digits+strings.Repeat("0", exp), 10, 64)
	if err != nil || v > MaxSafeInteger {
		return 0, true, false
	}
	if neg {
		v = -v
	}
	return v, true, true
}

// SafeText reports whether s can be stored and delivered as text: it must not contain U+0000.
// PostgreSQL's text type cannot hold it, and although event data stores it escaped as \u0000,
// receivers that keep payloads in PostgreSQL jsonb would have the body refused. It is refused in
// every string a client sends, so both databases and every resource behave alike.
func SafeText(s string) bool { return !strings.ContainsRune(s, 0) }

// RepeatedParameter returns the name of a query parameter that q holds more than once, the first
// such name in sorted order, and whether there is one. A parameter is read once: of two values,
// Echo's QueryParam takes the first while other servers and proxies take the last, so which one
// counts would be an accident, as with a JSON key sent twice; the API and the portal refuse both.
func RepeatedParameter(q url.Values) (string, bool) {
	var repeated []string
	for name, values := range q {
		if len(values) > 1 {
			repeated = append(repeated, name)
		}
	}
	if len(repeated) == 0 {
		return "", false
	}
	return slices.Min(repeated), true
}

// Earliest and latest times webhookd accepts (in UTC): years 0001 to 9999. ISO 8601 without an
// expanded year has four digits; year 0000 (1 BC) is refused by PostgreSQL's timestamp parser, and an
// offset can carry 0001-01-01 or 9999-12-31 across the edge into year 0 or 10000.
var (
	MinTime = time.Date(1, time.January, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, time.December, 31, 23, 59, 59, 999_999_999, time.UTC)
)

// TimeInRange reports whether t, seen in UTC, falls in years 0001 to 9999.
func TimeInRange(t time.Time) bool { return !t.Before(MinTime) && !t.After(MaxTime) }
