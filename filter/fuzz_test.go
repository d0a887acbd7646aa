package filter_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/filter"
)

// values counts the JSON values of a decoded body and the bytes of its strings, numbers and keys:
// the body's size in the bound on Match's work.
func values(v any) int {
	n := 1
	switch t := v.(type) {
	case string:
		n += len(t)
	case json.Number:
		n += len(t)
	case []any:
		for _, e := range t {
			n += values(e)
		}
	case map[string]any:
		for k, e := range t {
			n += len(k) + values(e)
		}
	}
	return n
}

// stepBound is the most steps Match may take: a small constant per pair of a filter value and a
// body value, and the bytes a test reads. A filter value compiles to at most a node and three tests
// ($neq: a presence test, a negation and its node's test), each looks at each body value at most
// once, and a test on strings reads at most its operand and the value, so counting each side's
// bytes with its values bounds the product.
func stepBound(f *filter.Filter, body any) int {
	return 8 * (f.Size() + len(f.String()) + 1) * (values(body) + 1)
}

var fuzzSeeds = []struct{ filter, body string }{
	{`{}`, `{}`},
	{`{"data":{"country":"DE"}}`, `{"eventType":"x","data":{"country":"DE"},"timestamp":"2026-11-27T16:00:00.000Z"}`},
	{`{"timestamp":{"$gte":"2026-11-27T16:00:00Z"}}`, `{"event":"x","timestamp":"2026-11-27T16:00:00Z","data":{}}`},
	{`{"data":{"tags":["a","b"],"n":{"$gt":1,"$lte":1e2}}}`, `{"data":{"tags":["b","a"],"n":100}}`},
	{`{"$or":[{"a":{"$in":[1,"x",null]}},{"$not":{"b":{"$exist":true}}}]}`, `{"a":[[1]],"b":null}`},
	{`{"a":{"$nin":"zz","$startsWith":"q","$endsWith":"r"}}`, `{"a":["qr","zz"]}`},
	{`{"a":{"$eq":{"b":[1,{"c":null}]}},"$and":[{"a":{}}]}`, `{"a":{"b":[1,{"c":null}]}}`},
	{`{"a":{"b":{"$neq":1}}}`, `[{"a":[{"b":1},{"b":2}]}]`},
	{`{"a":[[{"b":[1]}]]}`, `{"a":[[[{"b":[[1]]}]]]}`},
	{`{"a":1e999}`, `{"a":1}`},
	{`{"a":{"$lt":"2026-01-01T00:00:00+14:00"}}`, `{"a":"2025-12-31T10:00:00.000000001Z"}`},
}

// FuzzMatch: for any filter that compiles and any body that decodes, Match never panics, stays
// within its linear bound, and the stored form judges alike.
func FuzzMatch(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.filter, s.body)
	}
	f.Fuzz(func(t *testing.T, text, bodyText string) {
		flt, err := filter.Compile([]byte(text))
		if err != nil {
			return
		}
		body, err := filter.DecodeBody([]byte(bodyText))
		if err != nil {
			return
		}
		got, steps := filter.MatchSteps(flt, body)
		if bound := stepBound(flt, body); steps > bound {
			t.Fatalf("filter %s on %s: %d steps, beyond the linear bound %d", text, bodyText, steps, bound)
		}
		again, err := filter.Compile([]byte(flt.String()))
		if err != nil {
			t.Fatalf("the stored form %s does not compile: %v", flt.String(), err)
		}
		if again.Match(body) != got {
			t.Fatalf("filter %s and its stored form %s disagree on %s", text, flt.String(), bodyText)
		}
	})
}

// FuzzCompile: Compile never panics, refuses only with an *Error, and what it accepts is stored
// in a form that compiles to itself.
func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s.filter))
	}
	f.Add([]byte(`{"a":{"$gt":{}}}`))
	f.Add([]byte(`{"$not":[1]}`))
	f.Add([]byte("{\"a\":\"\\ud800\"}"))
	body, err := filter.DecodeBody([]byte(bodyA))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		flt, err := filter.Compile(raw)
		if err != nil {
			var fe *filter.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Compile(%q) = %T %v, want a *filter.Error", raw, err, err)
			}
			return
		}
		again, err := filter.Compile([]byte(flt.String()))
		if err != nil || again.String() != flt.String() {
			t.Fatalf("Compile(%q).String() = %s, which compiles to %v, %v", raw, flt.String(), again, err)
		}
		flt.Match(body)
	})
}

// TestMatchLinear holds Match's work to the product of the filter's size and the body's, by its
// count of steps (never the clock): doubling either doubles the work, no more, including for the
// shapes that could blow up (nested logic over nested arrays, lists searched in lists).
func TestMatchLinear(t *testing.T) {
	orFilter := func(branches int) string {
		var b strings.Builder
		b.WriteString(`{"$or":[`)
		for i := range branches {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"data":{"items":{"id":{"$gte":%d},"tag":{"$in":["x","y"]}}}}`, 1_000_000+i)
		}
		b.WriteString(`]}`)
		return b.String()
	}
	itemsBody := func(n int) string {
		var b strings.Builder
		b.WriteString(`{"event":"e","timestamp":"2026-11-27T16:00:00Z","data":{"items":[`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%d,"tag":"t%d","more":[1,2,[3]]}`, i, i)
		}
		b.WriteString(`]}}`)
		return b.String()
	}
	nestedArrays := func(depth int) string {
		return strings.Repeat("[", depth) + `{"a":1}` + strings.Repeat("]", depth)
	}
	cases := []struct {
		name                  string
		small, large          string // the filter, or the body, then twice as big
		body, filterForBodies string
	}{
		{name: "filter: $or branches", small: orFilter(10), large: orFilter(20), body: itemsBody(50)},
		{name: "body: array elements", filterForBodies: orFilter(10), small: itemsBody(50), large: itemsBody(100)},
		{name: "body: nested arrays under logic", filterForBodies: `{"x":{"$or":[{"$not":{"a":2}},{"$and":[{"a":{"$neq":1}},["z",{"b":1}]]}]}}`,
			small: `{"x":` + nestedArrays(500) + `}`, large: `{"x":` + nestedArrays(1000) + `}`},
		{name: "body: list searched in a list", filterForBodies: `{"data":{"items":[{"id":-1},{"id":-2},{"id":-3}]}}`, small: itemsBody(100), large: itemsBody(200)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			steps := func(flt, body string) int {
				f, err := filter.Compile([]byte(flt))
				if err != nil {
					t.Fatal(err)
				}
				v, err := filter.DecodeBody([]byte(body))
				if err != nil {
					t.Fatal(err)
				}
				_, n := filter.MatchSteps(f, v)
				if bound := stepBound(f, v); n > bound {
					t.Errorf("%d steps, beyond the bound %d", n, bound)
				}
				return n
			}
			var small, large int
			if c.filterForBodies == "" {
				small, large = steps(c.small, c.body), steps(c.large, c.body)
			} else {
				small, large = steps(c.filterForBodies, c.small), steps(c.filterForBodies, c.large)
			}
			ratio := float64(large) / float64(small)
			t.Logf("%d steps, then %d at twice the size (x%.2f)", small, large, ratio)
			if ratio > 2.2 {
				t.Errorf("doubling the size multiplied the work by %.2f (%d to %d steps); it must stay linear", ratio, small, large)
			}
			if ratio < 1.5 {
				t.Errorf("doubling the size multiplied the work by only %.2f: the case no longer measures what it claims", ratio)
			}
		})
	}
}
