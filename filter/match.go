package filter

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// Match reports whether body (a value from DecodeBody, or any tree of the shapes encoding/json
// decodes into) passes the filter. It never panics: a value of a shape it does not know matches
// nothing but $exist and $not. Its work is bounded by the filter's size times the body's, since
// each part of the filter looks at each part of the body at most once.
func (f *Filter) Match(body any) bool {
	var e eval
	return e.match(f.root, body, true)
}

// eval counts the steps of one evaluation, which the tests hold to the product of the sizes.
type eval struct {
	steps int
}

// match reports whether v, or its absence when present is false, passes n.
func (e *eval) match(n *node, v any, present bool) bool {
	e.steps++
	for i := range n.whole {
		if !e.whole(&n.whole[i], v, present) {
			return false
		}
	}
	if len(n.group) == 0 {
		return true
	}
	return present && e.group(n.group, v)
}

// group reports whether v, or one element of it when it is an array, passes every test of the
// group; a nested array is searched too, as simple-json-match does.
func (e *eval) group(tests []test, v any) bool {
	e.steps++
	if e.all(tests, v) {
		return true
	}
	if arr, ok := v.([]any); ok {
		for _, elem := range arr {
			if e.group(tests, elem) {
				return true
			}
		}
	}
	return false
}

func (e *eval) all(tests []test, v any) bool {
	for i := range tests {
		if !e.positive(&tests[i], v) {
			return false
		}
	}
	return true
}

// positive reports whether v itself passes t, one of the group's tests.
func (e *eval) positive(t *test, v any) bool {
	e.steps++
	switch t.op {
	case opFields:
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for i, key := range t.keys {
			val, has := obj[key]
			if !e.match(t.subs[i], val, has) {
				return false
			}
		}
		return true
	case opEq:
		return e.equal(v, t.want)
	case opIn:
		for _, w := range t.want.([]any) {
			if e.equal(v, w) {
				return true
			}
		}
		return false
	case opGt, opGte, opLt, opLte:
		c, ok := compare(t, v)
		if !ok {
			return false
		}
		switch t.op {
		case opGt:
			return c > 0
		case opGte:
			return c >= 0
		case opLt:
			return c < 0
		default:
			return c <= 0
		}
	}
	s, ok := v.(string)
	if !ok {
		return false
	}
	switch t.op {
	case opContains:
		return strings.Contains(s, t.str)
	case opStartsWith:
		return strings.HasPrefix(s, t.str)
	default:
		return strings.HasSuffix(s, t.str)
	}
}

// whole reports whether v, or its absence, passes t, one of the tests that see the value as it is.
func (e *eval) whole(t *test, v any, present bool) bool {
	e.steps++
	switch t.op {
	case opExist:
		return present == t.exist
	case opNot:
		return !e.match(t.subs[0], v, present)
	case opOr:
		for _, sub := range t.subs {
			if e.match(sub, v, present) {
				return true
			}
		}
		return false
	case opAnd:
		for _, sub := range t.subs {
			if !e.match(sub, v, present) {
				return false
			}
		}
		return true
	default: // opAll
		arr, ok := v.([]any)
		if !present || !ok {
			return false
		}
		for _, sub := range t.subs {
			found := false
			for _, elem := range arr {
				if e.match(sub, elem, true) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
}

// compare orders v against t's operand: -1, 0 or 1, and false when they do not compare (a type
// mismatch, which matches nothing rather than coercing, unlike JavaScript's <).
func compare(t *test, v any) (int, bool) {
	if t.isNum {
		n, ok := number(v)
		if !ok || n != n { // NaN orders with nothing
			return 0, false
		}
		switch {
		case n < t.num:
			return -1, true
		case n > t.num:
			return 1, true
		}
		return 0, true
	}
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	if t.isTime {
		if at, ok := instant(s); ok {
			return at.Compare(t.at), true
		}
	}
	return strings.Compare(s, t.str), true
}

// equal is deep equality between a body value and a literal of the filter: numbers by value (100
// and 1e2 are one number), objects regardless of key order, arrays in order, no coercion between
// types.
func (e *eval) equal(v, want any) bool {
	e.steps++
	switch w := want.(type) {
	case nil:
		return v == nil
	case bool:
		b, ok := v.(bool)
		return ok && b == w
	case float64:
		n, ok := number(v)
		return ok && n == w
	case string:
		s, ok := v.(string)
		return ok && s == w
	case []any:
		arr, ok := v.([]any)
		if !ok || len(arr) != len(w) {
			return false
		}
		for i := range w {
			if !e.equal(arr[i], w[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		obj, ok := v.(map[string]any)
		if !ok || len(obj) != len(w) {
			return false
		}
		for key, wv := range w {
			bv, has := obj[key]
			if !has || !e.equal(bv, wv) {
				return false
			}
		}
		return true
	}
	return false
}

// number reads a body number as the double JavaScript's JSON.parse would give a variant B
// receiver: event data is stored canonical, as JavaScript numbers, so the filter's numbers and the
// body's are doubles alike, and comparing the doubles is exact. A literal beyond the range reads as
// ±Infinity, as it does in JavaScript.
func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
		return f, true
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	}
	return 0, false
}
