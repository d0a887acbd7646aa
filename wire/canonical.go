package wire

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Event data is stored, and delivered, in JavaScript's canonical form. Variant B receivers verify by
// re-serializing the parsed body with JSON.stringify, so every byte webhookd signs must be what
// JSON.stringify(JSON.parse(body)) gives back. CanonicalJSON brings event data into that form once,
// when the event is accepted; the delivery bodies then only concatenate.
//
// The jsontext package does most of the work. Its decoder checks the grammar (JSON.parse's, with
// the same four whitespace characters), finds repeated keys with their offset and path, and
// decodes escapes, a lone surrogate to U+FFFD; its quoting (RFC 8785's minimal escapes) and its
// canonical numbers (RFC 8785, which is ECMAScript's Number::toString) are JSON.stringify's.
// What is kept by hand, because JavaScript and RFC 8785 part ways there or jsontext has no option
// for it:
//   - member order: JavaScript objects enumerate array-index keys first, in ascending numeric
//     order, then the other keys as they came (RFC 8785 sorts all keys by UTF-16 code units,
//     jsontext keeps input order);
//   - MaxJSONDepth (jsontext allows 10,000 levels);
//   - a number beyond float64's range is refused (jsontext writes ±MaxFloat64, JavaScript null);
//   - raw invalid UTF-8 is refused while an escaped lone surrogate becomes U+FFFD (jsontext has one
//     option for both).

// ErrDuplicateKey is wrapped by CanonicalJSON when an object repeats a key.
var ErrDuplicateKey = errors.New("duplicate object key")

// DuplicateKeyError is the error CanonicalJSON and DuplicateKey return for a repeated key: the key
// and the byte offset of its second occurrence. It matches ErrDuplicateKey.
type DuplicateKeyError struct {
	Key    string
	Offset int
	// Path leads from the top-level value to the key, the key included: object keys, and array
	// indices in decimal. Only DuplicateKey sets it.
	Path []string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("object key %q at offset %d: %v", e.Key, e.Offset, ErrDuplicateKey)
}

func (e *DuplicateKeyError) Unwrap() error { return ErrDuplicateKey }

// duplicateKey turns jsontext's report of a repeated name into a *DuplicateKeyError, and returns
// nil for any other error.
func duplicateKey(err error, withPath bool) *DuplicateKeyError {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) || !errors.Is(err, jsontext.ErrDuplicateName) {
		return nil
	}
	var path []string
	for tok := range se.JSONPointer.Tokens() {
		path = append(path, tok)
	}
	if len(path) == 0 {
		return nil
	}
	dup := &DuplicateKeyError{Key: path[len(path)-1], Offset: int(se.ByteOffset)}
	if withPath {
		dup.Path = path
	}
	return dup
}

// DuplicateKey returns a *DuplicateKeyError for the first object in raw that repeats a key, and nil
// when none does. It is the check CanonicalJSON makes, run over a request body that encoding/json
// has already accepted, where the last of two equal keys would silently win: only syntax is its
// concern, so numbers out of float64's range, invalid UTF-8 (read as U+FFFD, as encoding/json reads
// it) and deep nesting pass, and any syntax error encoding/json let through is nil here too.
func DuplicateKey(raw []byte) error {
	dec := jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowInvalidUTF8(true))
	for {
		if _, err := dec.ReadToken(); err != nil {
			if dup := duplicateKey(err, true); dup != nil {
				return dup
			}
			return nil
		}
		if dec.StackDepth() == 0 {
			return nil // the first value is read: anything after it is not ours to judge
		}
	}
}

// MaxJSONDepth bounds nesting. Receivers must be able to parse what we send: V8's JSON.stringify
// overflows its stack a little past 4,000 levels and Python's json stops near its recursion limit of
// 1,000, so 512 leaves room for both.
const MaxJSONDepth = 512

// CanonicalJSON re-serializes one JSON value the way JavaScript's JSON.stringify(JSON.parse(raw)) would,
// keeping object key order. It is a fixed point: CanonicalJSON(CanonicalJSON(x)) == CanonicalJSON(x).
//
// "Keeping key order" is JavaScript's order: keys that are array indices ("0" to "4294967294", no
// leading zeros) come first in ascending numeric order, then the other keys in their original order.
// JSON.parse builds an object and objects always enumerate that way, so a receiver's JSON.stringify
// reorders them too, and the signature covers the reordered bytes.
//
// Where JavaScript would accept the input but we refuse it, or differ on purpose:
//   - a repeated key is an error wrapping ErrDuplicateKey (JavaScript keeps the last value in the
//     first key's position, which silently hides the first value);
//   - a number beyond float64's range is an error (JavaScript reads Infinity and writes null);
//   - input that is not valid UTF-8 is an error (receivers would each repair it differently);
//   - nesting deeper than MaxJSONDepth is an error;
//   - an escaped lone surrogate ("\ud800" without its pair) becomes U+FFFD, as encoding/json decodes
//     it, where JavaScript would keep it. Go strings cannot hold one, and many receivers' parsers
//     (Rust's serde_json among them) reject a body that contains one.
func CanonicalJSON(raw []byte) ([]byte, error) {
	c := &canonicalizer{
		// AllowInvalidUTF8 lets an escaped lone surrogate decode to U+FFFD; raw invalid UTF-8 is
		// refused in strings, the only place the grammar lets it through.
		dec: jsontext.NewDecoder(bytes.NewReader(raw), jsontext.AllowInvalidUTF8(true)),
		out: make([]byte, 0, len(raw)),
	}
	if err := c.value(); err != nil {
		if dup := duplicateKey(err, false); dup != nil {
			// jsontext checks the name before we see its bytes: a key that is invalid UTF-8 is
			// that error first, as it is for any other string.
			key, _ := jsontext.NewDecoder(bytes.NewReader(raw[dup.Offset:]), jsontext.AllowInvalidUTF8(true)).ReadValue()
			if !utf8.Valid(key) {
				return nil, c.syntaxErr(int64(dup.Offset), "invalid UTF-8 in string")
			}
			return nil, dup
		}
		return nil, err
	}
	if _, err := c.dec.ReadToken(); err != io.EOF {
		return nil, c.syntaxErr(c.dec.InputOffset(), "unexpected data after the top-level value")
	}
	return c.out, nil
}

// canonicalizer reads tokens and writes them in one pass: values go straight to out, and only
// objects with array-index keys are rearranged afterwards.
type canonicalizer struct {
	dec *jsontext.Decoder
	out []byte
	// members is a stack shared by nested objects: each object appends its own members above its
	// parent's and truncates back when done, so objects need no slice of their own.
	members []member
	// str holds the decoded bytes of the last string with escapes.
	str []byte
}

// member is one written "key":value of the object being read, located in out.
type member struct {
	start, end int
	index      uint32
	isIndex    bool
}

func (c *canonicalizer) syntaxErr(offset int64, msg string) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", offset, msg)
}

func (c *canonicalizer) value() error {
	switch c.dec.PeekKind() {
	case '{':
		return c.object()
	case '[':
		return c.array()
	case '"':
		raw, err := c.readString()
		if err != nil {
			return err
		}
		c.out = c.appendString(c.out, raw)
		return nil
	case '0':
		return c.number()
	case 'n', 't', 'f':
		raw, err := c.dec.ReadValue()
		c.out = append(c.out, raw...)
		return err
	default:
		return c.invalid()
	}
}

// invalid returns the syntax error at the decoder's position, where PeekKind found nothing that
// may come next: reading a token says why.
func (c *canonicalizer) invalid() error {
	_, err := c.dec.ReadToken()
	switch {
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	case err == nil:
		return c.syntaxErr(c.dec.InputOffset(), "unexpected token")
	}
	return fmt.Errorf("invalid JSON: %w", err)
}

// open reads the '{' or '[' at the decoder's position and refuses one that nests too deep.
func (c *canonicalizer) open() error {
	if _, err := c.dec.ReadToken(); err != nil {
		return err
	}
	if c.dec.StackDepth() > MaxJSONDepth {
		return c.syntaxErr(c.dec.InputOffset()-1, fmt.Sprintf("nesting deeper than %d", MaxJSONDepth))
	}
	return nil
}

func (c *canonicalizer) array() error {
	if err := c.open(); err != nil {
		return err
	}
	c.out = append(c.out, '[')
	for i := 0; c.dec.PeekKind() != ']'; i++ {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		if err := c.value(); err != nil {
			return err
		}
	}
	if _, err := c.dec.ReadToken(); err != nil {
		return err
	}
	c.out = append(c.out, ']')
	return nil
}

func (c *canonicalizer) object() error {
	if err := c.open(); err != nil {
		return err
	}
	c.out = append(c.out, '{')
	bodyStart := len(c.out)
	base := len(c.members)
	defer func() { c.members = c.members[:base] }()

	for kind := c.dec.PeekKind(); kind != '}'; kind = c.dec.PeekKind() {
		if kind != '"' {
			// ReadValue would read a whole object or array in a name's place before refusing it.
			return c.invalid()
		}
		// jsontext refuses a repeated key here, as it reads the second one.
		raw, err := c.readString()
		if err != nil {
			return err
		}
		if len(c.members) > base {
			c.out = append(c.out, ',')
		}
		m := member{start: len(c.out)}
		c.out = c.appendString(c.out, raw)
		m.index, m.isIndex = arrayIndex(c.out[m.start+1 : len(c.out)-1])
		c.out = append(c.out, ':')
		if err := c.value(); err != nil {
			return err
		}
		m.end = len(c.out)
		c.members = append(c.members, m)
	}
	if _, err := c.dec.ReadToken(); err != nil {
		return err
	}
	c.reorder(bodyStart, c.members[base:])
	c.out = append(c.out, '}')
	return nil
}

// reorder rewrites the members written since bodyStart into JavaScript's property order: array
// indices ascending, then the rest as they came.
func (c *canonicalizer) reorder(bodyStart int, own []member) {
	if inJSOrder(own) {
		return
	}
	sorted := slices.Clone(own)
	slices.SortStableFunc(sorted, func(a, b member) int {
		switch {
		case a.isIndex && b.isIndex:
			return cmp.Compare(a.index, b.index)
		case a.isIndex:
			return -1
		case b.isIndex:
			return 1
		default:
			return 0
		}
	})
	written := slices.Clone(c.out[bodyStart:])
	c.out = c.out[:bodyStart]
	for i, m := range sorted {
		if i > 0 {
			c.out = append(c.out, ',')
		}
		c.out = append(c.out, written[m.start-bodyStart:m.end-bodyStart]...)
	}
}

// inJSOrder reports whether no array-index key follows another key it should precede, the usual
// case, where nothing needs to move.
func inJSOrder(own []member) bool {
	for i := 1; i < len(own); i++ {
		prev, m := own[i-1], own[i]
		if m.isIndex && (!prev.isIndex || m.index < prev.index) {
			return false
		}
	}
	return true
}

// arrayIndex reports whether key, as written between its quotes, is an ECMAScript array index: the
// canonical decimal form of an integer from 0 to 2^32-2. Only those keys move to the front of a
// JavaScript object. Digits are never escaped in canonical output, so the written form decides.
func arrayIndex(key []byte) (uint32, bool) {
	if len(key) == 0 || len(key) > 10 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var n uint64
	for _, d := range key {
		if d < '0' || d > '9' {
			return 0, false
		}
		n = n*10 + uint64(d-'0')
	}
	if n > math.MaxUint32-1 {
		return 0, false
	}
	return uint32(n), true
}

// readString reads the string (a value or an object key) at the decoder's position, refusing raw
// invalid UTF-8: the decoder lets it through so that escaped lone surrogates decode.
func (c *canonicalizer) readString() (jsontext.Value, error) {
	raw, err := c.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	if !utf8.Valid(raw) {
		return nil, c.syntaxErr(c.dec.InputOffset()-int64(len(raw)), "invalid UTF-8 in string")
	}
	return raw, nil
}

// appendString writes a string as JSON.stringify would. One without escapes is already in that form:
// the decoder refused raw control characters and quotes, and valid UTF-8 holds no lone surrogate.
func (c *canonicalizer) appendString(dst []byte, raw jsontext.Value) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return append(dst, raw...)
	}
	// The only error left is a lone surrogate, already replaced by U+FFFD.
	c.str, _ = jsontext.AppendUnquote(c.str[:0], raw)
	dst, _ = jsontext.AppendQuote(dst, c.str)
	return dst
}

// canonicalNumbers are the options under which jsontext writes a number as ECMAScript's
// Number::toString does (RFC 8785, section 3.2.2.3).
var canonicalNumbers = []jsontext.Options{jsontext.CanonicalizeRawInts(true), jsontext.CanonicalizeRawFloats(true)}

// number writes the float64 the literal denotes as JavaScript would, after refusing one beyond
// float64's range, which jsontext would clamp.
func (c *canonicalizer) number() error {
	raw, err := c.dec.ReadValue()
	if err != nil {
		return err
	}
	if _, err := strconv.ParseFloat(string(raw), 64); err != nil {
		// The decoder checked the grammar, so only a range error is left: JavaScript would read
		// Infinity and write null, losing the value.
		return fmt.Errorf("number %s at offset %d: %w", raw, c.dec.InputOffset()-int64(len(raw)), err)
	}
	c.out, err = jsontext.AppendFormat(c.out, raw, canonicalNumbers...)
	return err
}

// appendJSString appends s quoted as JSON.stringify quotes it: only '"', '\\' and U+0000 to U+001F
// are escaped, the usual ones in short form and the rest as \u00xx in lowercase hex. HTML
// characters, U+2028, U+2029 and DEL stay literal, unlike encoding/json. Invalid UTF-8 (which
// CanonicalJSON never passes) is written as U+FFFD so the output is always valid UTF-8.
func appendJSString(dst []byte, s string) []byte {
	// The error reports invalid UTF-8, already replaced.
	dst, _ = jsontext.AppendQuote(dst, s)
	return dst
}
