package filter

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// Match reports whether body (a value from DecodeBody, or any tree of the shapes encoding/json
// decodes into) passes the filter, as the intake judges it: within MatchBudget steps, a filter that
// runs out of them letting the event through (docs/filters.md, "What a filter may cost"). It never
// panics: a value of a shape it does not know matches nothing but $exist and $not.
func (f *Filter) Match(body any) bool {
	v, _ := f.judge(body, MatchBudget)
	return v != Refuse
}

// judge matches body within budget steps: the verdict, and the steps it took, at most budget.
// Overrun when it needed more: matching stopped there, before the test that would have passed the
// budget did any of its work.
func (f *Filter) judge(body any, budget int) (Verdict, int) {
	e := eval{budget: budget}
	ok := e.match(f.root, body, true)
	switch {
	case e.over:
		return Overrun, budget
	case ok:
		return Pass, e.steps
	}
	return Refuse, e.steps
}

// eval counts the steps of one evaluation against its budget: one for each node and test of the
// filter applied to a value of the body, and one for each byte a test reads (a string compared,
// searched or read as an instant, a number read as a double, an object's key looked up). Each part
// of the filter looks at each part of the body at most once, so the count is at most a constant
// times the product of the filter's size and the body's, both counted in values and bytes; the
// tests hold it to that. Once over, every call returns false at once and every loop stops.
type eval struct {
	steps, budget int
	over          bool
}

// spend counts n steps: false, and over, when they would pass the budget. Called before the work it
// counts, so that no work is done beyond the budget.
func (e *eval) spend(n int) bool {
	if e.over || n > e.budget-e.steps {
		e.over = true
		return false
	}
	e.steps += n
	return true
}

// match reports whether v, or its absence when present is false, passes n.
func (e *eval) match(n *node, v any, present bool) bool {
	if !e.spend(1) {
		return false
	}
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
	if !e.spend(1) {
		return false
	}
	if e.all(tests, v) {
		return true
	}
	if arr, ok := v.([]any); ok {
		for _, elem := range arr {
			if e.group(tests, elem) {
				return true
			}
			if e.over {
				return false
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
	if !e.spend(1) {
		return false
	}
	switch t.op {
	case opFields:
		obj, ok := v.(map[string]any)
		if !ok {
			return false
		}
		for i, key := range t.keys {
			if !e.spend(len(key)) { // hashing the key
				return false
			}
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
			if e.over {
				return false
			}
		}
		return false
	case opGt, opGte, opLt, opLte:
		c, ok := e.compare(t, v)
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
	// A substring search reads the whole value, and the operand too beyond a short one (Rabin-Karp);
	// a prefix or suffix reads at most the operand's length of the value.
	switch t.op {
	case opContains:
		return e.spend(len(s)+len(t.str)) && strings.Contains(s, t.str)
	case opStartsWith:
		return e.spend(min(len(s), len(t.str))) && strings.HasPrefix(s, t.str)
	default:
		return e.spend(min(len(s), len(t.str))) && strings.HasSuffix(s, t.str)
	}
}

// whole reports whether v, or its absence, passes t, one of the tests that see the value as it is.
func (e *eval) whole(t *test, v any, present bool) bool {
	if !e.spend(1) {
		return false
	}
	switch t.op {
	case opExist:
		return present == t.exist
	case opNot:
		return !e.match(t.subs[0], v, present) && !e.over
	case opOr:
		for _, sub := range t.subs {
			if e.match(sub, v, present) {
				return true
			}
			if e.over {
				return false
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
				if e.over {
					return false
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
// mismatch, which matches nothing rather than coercing, unlike JavaScript's <) or the budget ran
// out. Reading a string as an instant may read all of it (time.Parse quotes it in its error).
func (e *eval) compare(t *test, v any) (int, bool) {
	if t.isNum {
		n, ok := e.number(v)
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
		if !e.spend(len(s)) {
			return 0, false
		}
		if at, ok := instant(s); ok {
			return at.Compare(t.at), true
		}
	}
	if !e.spend(min(len(s), len(t.str))) {
		return 0, false
	}
	return strings.Compare(s, t.str), true
}

// equal is deep equality between a body value and a literal of the filter: numbers by value (100
// and 1e2 are one number), objects regardless of key order, arrays in order, no coercion between
// types.
func (e *eval) equal(v, want any) bool {
	if !e.spend(1) {
		return false
	}
	switch w := want.(type) {
	case nil:
		return v == nil
	case bool:
		b, ok := v.(bool)
		return ok && b == w
	case float64:
		n, ok := e.number(v)
		return ok && n == w
	case string:
		s, ok := v.(string)
		return ok && e.spend(min(len(s), len(w))) && s == w
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
			if !e.spend(len(key)) {
				return false
			}
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
// ±Infinity, as it does in JavaScript. Parsing reads the whole literal.
func (e *eval) number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		if !e.spend(len(n)) {
			return 0, false
		}
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
