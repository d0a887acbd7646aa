// Package filter is a webhook's payload filter: a JSON object in the syntax Outpost and Hookdeck
// document (simple-json-match), compiled once when it is saved or loaded and matched against each
// delivery body as its receiver would get it. It is pure, so the intake, the filter test and the
// portal judge an event the same way; docs/filters.md is the user's reference for its semantics.
package filter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/webhookd/webhookd/wire"
)

// MaxBytes bounds the filter's JSON text as sent: a filter is read at every accepted event of its
// type, so it stays small enough to be judged in microseconds.
const MaxBytes = 4 << 10

// MaxDepth bounds the nesting of objects and arrays in the filter, the top-level object being 1.
// Matching recurses along the filter, so the bound keeps that recursion shallow whatever the body.
const MaxDepth = 10

// Error is a filter refused at Compile. Path names the fault from the API field down, e.g.
// "filter.data.budget.$gte" (or "filter" for the whole), with array elements as their index
// ("filter.$or.1"). Limit is true for MaxBytes and MaxDepth, which the API answers with 422 naming
// the limit, and false for a malformed filter (400).
type Error struct {
	Path, Reason string
	Limit        bool
}

func (e *Error) Error() string { return e.Path + ": " + e.Reason }

// Filter is a compiled filter. It is immutable, so one value serves every goroutine.
type Filter struct {
	text string
	root *node
	// size counts the JSON values of the filter, the unit in which the tests bound the work of Match.
	size int
}

// String is the canonical JSON of the filter (wire.CanonicalJSON's form), as it is stored and
// shown: compiling it again gives a filter that matches exactly the same bodies.
func (f *Filter) String() string { return f.text }

// Compile checks and compiles raw, which must be a JSON object, once; Match then reads only the
// compiled tree. It refuses a text beyond MaxBytes or MaxDepth, invalid JSON, repeated keys,
// unknown operators, operators where they cannot apply and operands of the wrong type, each as an
// *Error naming the path of the fault.
func Compile(raw []byte) (*Filter, error) {
	if len(raw) > MaxBytes {
		return nil, &Error{Path: "filter", Reason: fmt.Sprintf("is %d bytes of JSON, more than the %d allowed", len(raw), MaxBytes), Limit: true}
	}
	p := parser{dec: json.NewDecoder(bytes.NewReader(raw))}
	p.dec.UseNumber()
	tree, err := p.read("filter", 0)
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, &Error{Path: "filter", Reason: "has data after its JSON object"}
	}
	if tree.kind != kindObject {
		return nil, &Error{Path: "filter", Reason: "must be a JSON object, not " + tree.kind.String()}
	}
	// What the token pass does not refuse (invalid UTF-8, mainly) CanonicalJSON does, and its
	// output is what we store, so the filter shown is the one that runs.
	text, err := wire.CanonicalJSON(raw)
	if err != nil {
		return nil, &Error{Path: "filter", Reason: "is not valid JSON: " + err.Error()}
	}
	root, err := compilePattern(tree, "filter", true)
	if err != nil {
		return nil, err
	}
	return &Filter{text: string(text), root: root, size: p.values}, nil
}

// kind is the JSON type of a parsed filter value.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func (k kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// value is the filter as parsed, objects keeping their key order so that a fault is reported at
// the first place it occurs.
type value struct {
	kind kind
	b    bool
	num  float64
	str  string
	arr  []value
	obj  []member
}

type member struct {
	key string
	val value
}

// literal is v as Match compares it with body values: the shapes encoding/json decodes into, with
// numbers already parsed.
func (v value) literal() any {
	switch v.kind {
	case kindBool:
		return v.b
	case kindNumber:
		return v.num
	case kindString:
		return v.str
	case kindArray:
		out := make([]any, len(v.arr))
		for i, e := range v.arr {
			out[i] = e.literal()
		}
		return out
	case kindObject:
		out := make(map[string]any, len(v.obj))
		for _, m := range v.obj {
			out[m.key] = m.val.literal()
		}
		return out
	default:
		return nil
	}
}

// parser reads the filter token by token, so that depth and repeated keys are refused with the
// path where they occur, before anything is built beyond them.
type parser struct {
	dec    *json.Decoder
	values int
}

func (p *parser) read(path string, depth int) (value, error) {
	tok, err := p.dec.Token()
	if err != nil {
		return value{}, syntaxError(err)
	}
	p.values++
	switch t := tok.(type) {
	case json.Delim:
		if depth+1 > MaxDepth {
			return value{}, &Error{Path: path, Reason: fmt.Sprintf("nests objects and arrays deeper than %d levels", MaxDepth), Limit: true}
		}
		// Token returns a closing delimiter only after its opening one, which object and
		// array consume, so t opens here.
		if t == '{' {
			return p.object(path, depth+1)
		}
		return p.array(path, depth+1)
	case string:
		return value{kind: kindString, str: t}, nil
	case json.Number:
		n, err := strconv.ParseFloat(string(t), 64)
		if err != nil {
			// The decoder checked the grammar, so the number is beyond float64's range, where
			// JavaScript, and so a variant B receiver, would read Infinity.
			return value{}, &Error{Path: path, Reason: "has a number beyond the range of a double: " + string(t)}
		}
		return value{kind: kindNumber, num: n}, nil
	case bool:
		return value{kind: kindBool, b: t}, nil
	default:
		return value{kind: kindNull}, nil
	}
}

func (p *parser) object(path string, depth int) (value, error) {
	v := value{kind: kindObject}
	seen := make(map[string]bool)
	for p.dec.More() {
		tok, err := p.dec.Token()
		if err != nil {
			return value{}, syntaxError(err)
		}
		key, _ := tok.(string) // the decoder accepts only a string in a key's place
		at := path + "." + key
		if seen[key] {
			return value{}, &Error{Path: at, Reason: "repeats a key of its object; send each key once"}
		}
		seen[key] = true
		val, err := p.read(at, depth)
		if err != nil {
			return value{}, err
		}
		v.obj = append(v.obj, member{key: key, val: val})
	}
	if _, err := p.dec.Token(); err != nil {
		return value{}, syntaxError(err)
	}
	return v, nil
}

func (p *parser) array(path string, depth int) (value, error) {
	v := value{kind: kindArray}
	for i := 0; p.dec.More(); i++ {
		e, err := p.read(path+"."+strconv.Itoa(i), depth)
		if err != nil {
			return value{}, err
		}
		v.arr = append(v.arr, e)
	}
	if _, err := p.dec.Token(); err != nil {
		return value{}, syntaxError(err)
	}
	return v, nil
}

func syntaxError(err error) error {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return &Error{Path: "filter", Reason: "is not valid JSON: " + err.Error()}
}

// op is one test a node makes.
type op uint8

const (
	// The positive tests: a value passes them itself or, when it is an array, through one of its
	// elements (recursively), as an array "contains" a value in simple-json-match.
	opFields     op = iota // plain keys: the value is an object whose members match
	opEq                   // a literal scalar, or $eq: deep equality
	opGt                   // $gt, $gte, $lt, $lte: numbers, or strings (instants when both are RFC 3339)
	opGte                  //
	opLt                   //
	opLte                  //
	opIn                   // $in with an array: equal to one of its elements
	opContains             // $in with a string: a string holding it
	opStartsWith           // $startsWith
	opEndsWith             // $endsWith

	// The whole tests: they judge the value as it is, present or not.
	opExist // $exist
	opNot   // $not, and $neq and $nin as the negation of $eq and $in
	opOr    // $or
	opAnd   // $and
	opAll   // a literal array: an array holding a match for each element
)

// test is one compiled condition of a node; which fields it uses depends on op.
type test struct {
	op     op
	want   any       // opEq, opIn (a []any): the operand as a literal
	num    float64   // the ordering operand when it is a number
	isNum  bool      //
	str    string    // the string operand
	at     time.Time // the ordering operand as an instant, when it is one
	isTime bool      //
	exist  bool      // opExist
	keys   []string  // opFields: the keys, matched against subs in order
	subs   []*node   // opFields, opNot (one), opOr, opAnd, opAll
}

// node is a compiled pattern: what one value of the body, or its absence, must be. All its tests
// hold for a match. The positive tests are one group: on an array, a single element must pass all
// of them, so {"$gte": 10, "$lt": 20} asks for an element between 10 and 20.
type node struct {
	group []test
	whole []test
}

// operators are the keys that begin with "$" and what they are.
var operators = map[string]op{
	"$eq": opEq, "$neq": opEq, "$gt": opGt, "$gte": opGte, "$lt": opLt, "$lte": opLte,
	"$in": opIn, "$nin": opIn, "$startsWith": opStartsWith, "$endsWith": opEndsWith,
	"$exist": opExist, "$not": opNot, "$or": opOr, "$and": opAnd,
}

// compilePattern compiles v in a pattern's place: an object of keys and operators, a literal
// array, or a literal scalar. At the top (root), a pattern applies to the whole body, which is an
// object, so only an object with keys and the logical operators may stand there.
func compilePattern(v value, path string, root bool) (*node, error) {
	switch v.kind {
	case kindObject:
		return compileObject(v, path, root)
	case kindArray:
		if root {
			return nil, &Error{Path: path, Reason: "must be an object of keys, not " + v.kind.String()}
		}
		t := test{op: opAll}
		for i, e := range v.arr {
			sub, err := compilePattern(e, path+"."+strconv.Itoa(i), false)
			if err != nil {
				return nil, err
			}
			t.subs = append(t.subs, sub)
		}
		return &node{whole: []test{t}}, nil
	default:
		if root {
			return nil, &Error{Path: path, Reason: "must be an object of keys, not " + v.kind.String()}
		}
		return &node{group: []test{{op: opEq, want: v.literal()}}}, nil
	}
}

func compileObject(v value, path string, root bool) (*node, error) {
	n := &node{}
	fields := test{op: opFields}
	firstCompare := "" // the path of the first comparing operator, refused beside keys
	for _, m := range v.obj {
		at := path + "." + m.key
		if !strings.HasPrefix(m.key, "$") {
			sub, err := compilePattern(m.val, at, false)
			if err != nil {
				return nil, err
			}
			fields.keys = append(fields.keys, m.key)
			fields.subs = append(fields.subs, sub)
			continue
		}
		o, known := operators[m.key]
		if !known {
			return nil, &Error{Path: at, Reason: fmt.Sprintf("%q is not an operator; the operators are $eq $neq $gt $gte $lt $lte $in $nin $startsWith $endsWith $exist $or $and $not", m.key)}
		}
		if o <= opExist {
			if root {
				// The top is the body, an object that always exists: a comparison or $exist
				// there could only be always true or always false.
				return nil, &Error{Path: at, Reason: m.key + " needs a key above it (such as data) whose value it tests: the top of a filter holds keys, $or, $and and $not"}
			}
			if firstCompare == "" && o != opExist {
				firstCompare = at
			}
		}
		if err := n.compileOperator(m.key, o, m.val, at, root); err != nil {
			return nil, err
		}
	}
	if firstCompare != "" && len(fields.keys) > 0 {
		return nil, &Error{Path: firstCompare, Reason: "an operator that compares the value cannot stand beside keys that look into it (" + fields.keys[0] + "); put it under the key whose value it compares"}
	}
	// A nested {} asks for an object, as simple-json-match reads it; the empty filter asks nothing.
	if len(fields.keys) > 0 || (len(v.obj) == 0 && !root) {
		n.group = append(n.group, fields)
	}
	return n, nil
}

func (n *node) compileOperator(name string, o op, operand value, path string, root bool) error {
	wrong := func(want string) error {
		return &Error{Path: path, Reason: fmt.Sprintf("%s wants %s, not %s", name, want, operand.kind)}
	}
	switch o {
	case opEq:
		t := test{op: opEq, want: operand.literal()}
		if name == "$neq" {
			n.negate(t)
			return nil
		}
		n.group = append(n.group, t)
	case opGt, opGte, opLt, opLte:
		t := test{op: o}
		switch operand.kind {
		case kindNumber:
			t.num, t.isNum = operand.num, true
		case kindString:
			t.str = operand.str
			t.at, t.isTime = instant(operand.str)
		default:
			return wrong("a number or a string")
		}
		n.group = append(n.group, t)
	case opIn:
		var t test
		switch operand.kind {
		case kindArray:
			t = test{op: opIn, want: operand.literal()}
		case kindString:
			t = test{op: opContains, str: operand.str}
		default:
			return wrong("an array of values or a string")
		}
		if name == "$nin" {
			n.negate(t)
			return nil
		}
		n.group = append(n.group, t)
	case opStartsWith, opEndsWith:
		if operand.kind != kindString {
			return wrong("a string")
		}
		n.group = append(n.group, test{op: o, str: operand.str})
	case opExist:
		if operand.kind != kindBool {
			return wrong("true or false")
		}
		n.whole = append(n.whole, test{op: opExist, exist: operand.b})
	case opNot:
		if root && operand.kind != kindObject {
			return wrong("an object of keys at the top of a filter")
		}
		sub, err := compilePattern(operand, path, root)
		if err != nil {
			return err
		}
		n.whole = append(n.whole, test{op: opNot, subs: []*node{sub}})
	case opOr, opAnd:
		if operand.kind != kindArray || len(operand.arr) == 0 {
			return wrong("a non-empty array of patterns")
		}
		t := test{op: o}
		for i, e := range operand.arr {
			sub, err := compilePattern(e, path+"."+strconv.Itoa(i), root)
			if err != nil {
				return err
			}
			t.subs = append(t.subs, sub)
		}
		n.whole = append(n.whole, t)
	}
	return nil
}

// negate adds $neq or $nin: the value is present and does not pass t. They are the negations of
// $eq and $in so that on an array they ask that no element equals, as the reader expects of "not
// in"; and like every comparison they need the key, where {"$not": {"$eq": x}} does not.
func (n *node) negate(t test) {
	n.whole = append(n.whole,
		test{op: opExist, exist: true},
		test{op: opNot, subs: []*node{{group: []test{t}}}})
}

// instant reads s as an RFC 3339 (ISO 8601) time. Variant A writes milliseconds and variant B none,
// so the same instant is "…00.000Z" in one body and "…00Z" in the other, which order differently
// as strings; compared as instants, one filter means the same for both.
func instant(s string) (time.Time, bool) {
	// The cheap shape check spares time.Parse for the strings that are no time at all.
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[10] != 'T' {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// DecodeBody decodes a delivery body (JSON bytes, without variant B's signature, which the
// receiver removes before it reads the body) for Match. Numbers stay json.Number, so Match reads
// each as the double a receiver's JSON.parse would.
func DecodeBody(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode delivery body: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode delivery body: data after the JSON value")
	}
	return v, nil
}
