package input_test

import (
	"encoding/json"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/input"
)

// TestJSONInteger reads literals exactly: float64 would take 9007199254740993 for a safe
// 9007199254740992 and 1.00000000000000001 for 1.
func TestJSONInteger(t *testing.T) {
	for _, tc := range []struct {
		lit             string
		n               int64
		isInteger, safe bool
	}{
		{"0", 0, true, true},
		{"-0", 0, true, true},
		{"1", 1, true, true},
		{"1.0", 1, true, true},
		{"1e2", 100, true, true},
		{"1E+2", 100, true, true},
		{"12.5e1", 125, true, true},
		{"1500e-2", 15, true, true},
		{"0.0e5", 0, true, true},
		{"9007199254740991", input.MaxSafeInteger, true, true},
		{"-9007199254740991", -input.MaxSafeInteger, true, true},
		{"9007199254740992", 0, true, false},
		{"9007199254740993", 0, true, false},
		{"-9007199254740993", 0, true, false},
		{"9223372036854775807", 0, true, false},
		{"9223372036854775808", 0, true, false},
		{"1e16", 0, true, false},
		{"1e999999999999999999999", 0, true, false},
		{"0e999999999999999999999", 0, true, true},
		{"1.5", 0, false, false},
		{"1.00000000000000001", 0, false, false},
		{"1e-1", 0, false, false},
		{"1e-999999999999999999999", 0, false, false},
		{"9007199254740991.5", 0, false, false},
	} {
		n, isInteger, safe := input.JSONInteger(tc.lit)
		if n != tc.n || isInteger != tc.isInteger || safe != tc.safe {
			t.Errorf("JSONInteger(%s) = %d, %v, %v; want %d, %v, %v", tc.lit, n, isInteger, safe, tc.n, tc.isInteger, tc.safe)
		}
	}
}

// TestRepeatedParameter names a parameter given twice, whatever its values, and the same one
// whatever the order the query lists them in.
func TestRepeatedParameter(t *testing.T) {
	for _, tc := range []struct{ query, name string }{
		{"", ""},
		{"limit=1&after=2&eventType=x", ""},
		{"limit=50&limit=60", "limit"},
		{"limit=5&limit=5", "limit"},
		{"a&a", "a"},
		{"lim%69t=1&limit=2", "limit"},
		{"b=1&a=1&b=2&a=2", "a"},
		{"b=1&b=2&a=1&a=2", "a"},
		{"Limit=1&limit=2", ""},
	} {
		q, err := url.ParseQuery(tc.query)
		if err != nil {
			t.Fatal(err)
		}
		if name, ok := input.RepeatedParameter(q); name != tc.name || ok != (tc.name != "") {
			t.Errorf("RepeatedParameter(%q) = %q, %v; want %q", tc.query, name, ok, tc.name)
		}
	}
}

func TestTimeInRange(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"0001-01-01T00:00:00Z", true},
		{"9999-12-31T23:59:59.999Z", true},
		{"2026-03-01T00:00:00Z", true},
		{"0000-12-31T23:59:59Z", false},
		{"0001-01-01T00:30:00+01:00", false}, // year 0 in UTC
		{"9999-12-31T23:30:00-01:00", false}, // year 10000 in UTC
	} {
		tm, err := time.Parse(time.RFC3339Nano, tc.in)
		if err != nil {
			t.Fatal(err)
		}
		if got := input.TimeInRange(tm); got != tc.ok {
			t.Errorf("TimeInRange(%s) = %v, want %v", tc.in, got, tc.ok)
		}
	}
}

// FuzzJSONInteger checks the exact reading against math/big on every JSON number literal of
// modest exponent (big.Rat would take ages on 1e999999999).
func FuzzJSONInteger(f *testing.F) {
	for _, lit := range []string{"0", "-0", "1.0", "1e2", "9007199254740991", "9007199254740992", "-9007199254740993", "1.5", "12.50e1", "1500e-2"} {
		f.Add(lit)
	}
	f.Fuzz(func(t *testing.T, lit string) {
		if len(lit) > 64 || lit == "" || !(lit[0] == '-' || (lit[0] >= '0' && lit[0] <= '9')) || !json.Valid([]byte(lit)) || strings.TrimSpace(lit) != lit {
			return
		}
		if _, exp, ok := strings.Cut(strings.ToLower(lit), "e"); ok && len(strings.TrimLeft(exp, "+-0")) > 3 {
			return
		}
		r, ok := new(big.Rat).SetString(lit)
		if !ok {
			t.Fatalf("big.Rat cannot read JSON number %q", lit)
		}
		n, isInteger, safe := input.JSONInteger(lit)
		if isInteger != r.IsInt() {
			t.Fatalf("JSONInteger(%q) isInteger = %v, big.Rat says %v", lit, isInteger, r.IsInt())
		}
		if !isInteger {
			return
		}
		max := big.NewInt(input.MaxSafeInteger)
		wantSafe := new(big.Int).Abs(r.Num()).Cmp(max) <= 0
		if safe != wantSafe || (safe && n != r.Num().Int64()) {
			t.Fatalf("JSONInteger(%q) = %d, safe %v; want %s, safe %v", lit, n, safe, r.Num(), wantSafe)
		}
	})
}
