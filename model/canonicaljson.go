package model

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Event data is stored, and delivered, in JavaScript's canonical form. Variant B receivers verify by
// re-serializing the parsed body with JSON.stringify, so every byte webhookd signs must be what
// JSON.stringify(JSON.parse(body)) gives back. CanonicalJSON brings event data into that form once,
// when the event is accepted; the delivery bodies then only concatenate.

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

// DuplicateKey returns a *DuplicateKeyError for the first object in raw that repeats a key, and nil
// when none does. It is the check CanonicalJSON makes, run over a request body that encoding/json
// has already accepted, where the last of two equal keys would silently win: only syntax is its
// concern, so numbers out of float64's range, invalid UTF-8 (read as U+FFFD, as encoding/json reads
// it) and deep nesting pass, and any syntax error encoding/json let through is nil here too.
func DuplicateKey(raw []byte) error {
	c := &canonicalizer{in: raw, out: make([]byte, 0, len(raw)), lenient: true}
	c.skipSpace()
	var dup *DuplicateKeyError
	if err := c.value(0); errors.As(err, &dup) {
		return dup
	}
	return nil
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
	c := &canonicalizer{in: raw, out: make([]byte, 0, len(raw))}
	c.skipSpace()
	if err := c.value(0); err != nil {
		return nil, err
	}
	c.skipSpace()
	if c.pos < len(c.in) {
		return nil, c.syntaxErr("unexpected data after the top-level value")
	}
	return c.out, nil
}

// canonicalizer parses and writes in one pass: values go straight to out, and only objects with
// array-index keys are rearranged afterwards.
type canonicalizer struct {
	in  []byte
	pos int
	out []byte
	// members is a stack shared by nested objects: each object appends its own members above its
	// parent's and truncates back when done, so objects need no slice of their own.
	members []member
	// str holds the decoded bytes of the string being parsed.
	str []byte
	// lenient (DuplicateKey) refuses nothing but repeated keys and broken syntax.
	lenient bool
	// path is where the parser is, kept only when lenient, for DuplicateKeyError.Path.
	path []string
}

// member is one written "key":value of the object being parsed, located in out.
type member struct {
	key        string
	start, end int
	index      uint32
	isIndex    bool
}

func (c *canonicalizer) syntaxErr(msg string) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", c.pos, msg)
}

func (c *canonicalizer) skipSpace() {
	// JSON.parse allows exactly these four; U+FEFF and other Unicode spaces are errors.
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canonicalizer) value(depth int) error {
	if c.pos >= len(c.in) {
		return c.syntaxErr("unexpected end of input")
	}
	switch b := c.in[c.pos]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		if err := c.string(); err != nil {
			return err
		}
		c.out = AppendJSString(c.out, c.str)
		return nil
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	default:
		return c.syntaxErr(fmt.Sprintf("unexpected character %q", b))
	}
}

func (c *canonicalizer) literal(word string) error {
	if !bytes.HasPrefix(c.in[c.pos:], []byte(word)) {
		return c.syntaxErr("invalid literal, expected " + word)
	}
	c.pos += len(word)
	c.out = append(c.out, word...)
	return nil
}

func (c *canonicalizer) array(depth int) error {
	if depth > MaxJSONDepth && !c.lenient {
		return c.syntaxErr(fmt.Sprintf("nesting deeper than %d", MaxJSONDepth))
	}
	c.pos++ // [
	c.out = append(c.out, '[')
	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == ']' {
		c.pos++
		c.out = append(c.out, ']')
		return nil
	}
	for i := 0; ; i++ {
		if c.lenient {
			c.path = append(c.path, strconv.Itoa(i))
		}
		if err := c.value(depth); err != nil {
			return err
		}
		if c.lenient {
			c.path = c.path[:len(c.path)-1]
		}
		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.syntaxErr("unexpected end of input in array")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.out = append(c.out, ',')
			c.skipSpace()
		case ']':
			c.pos++
			c.out = append(c.out, ']')
			return nil
		default:
			return c.syntaxErr("expected , or ] in array")
		}
	}
}

// linearKeyScan is how many keys an object may have before duplicate checks switch to a map.
const linearKeyScan = 16

func (c *canonicalizer) object(depth int) error {
	if depth > MaxJSONDepth && !c.lenient {
		return c.syntaxErr(fmt.Sprintf("nesting deeper than %d", MaxJSONDepth))
	}
	c.pos++ // {
	c.out = append(c.out, '{')
	bodyStart := len(c.out)
	base := len(c.members)
	defer func() { c.members = c.members[:base] }()
	var seen map[string]struct{}

	c.skipSpace()
	if c.pos < len(c.in) && c.in[c.pos] == '}' {
		c.pos++
		c.out = append(c.out, '}')
		return nil
	}
	for {
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return c.syntaxErr("expected a string key in object")
		}
		keyAt := c.pos
		if err := c.string(); err != nil {
			return err
		}
		key := string(c.str)
		own := c.members[base:]
		dup := false
		if seen != nil {
			_, dup = seen[key]
		} else {
			dup = slices.ContainsFunc(own, func(m member) bool { return m.key == key })
		}
		if dup {
			var path []string
			if c.lenient {
				path = append(slices.Clone(c.path), key)
			}
			return &DuplicateKeyError{Key: key, Offset: keyAt, Path: path}
		}
		if seen == nil && len(own) >= linearKeyScan {
			seen = make(map[string]struct{}, 2*len(own))
			for _, m := range own {
				seen[m.key] = struct{}{}
			}
		}
		if seen != nil {
			seen[key] = struct{}{}
		}

		if len(own) > 0 {
			c.out = append(c.out, ',')
		}
		m := member{key: key, start: len(c.out)}
		m.index, m.isIndex = arrayIndex(key)
		c.out = AppendJSString(c.out, c.str)
		c.out = append(c.out, ':')

		c.skipSpace()
		if c.pos >= len(c.in) || c.in[c.pos] != ':' {
			return c.syntaxErr("expected : after object key")
		}
		c.pos++
		c.skipSpace()
		if c.lenient {
			c.path = append(c.path, key)
		}
		if err := c.value(depth); err != nil {
			return err
		}
		if c.lenient {
			c.path = c.path[:len(c.path)-1]
		}
		m.end = len(c.out)
		c.members = append(c.members, m)

		c.skipSpace()
		if c.pos >= len(c.in) {
			return c.syntaxErr("unexpected end of input in object")
		}
		switch c.in[c.pos] {
		case ',':
			c.pos++
			c.skipSpace()
		case '}':
			c.pos++
			c.reorder(bodyStart, c.members[base:])
			c.out = append(c.out, '}')
			return nil
		default:
			return c.syntaxErr("expected , or } in object")
		}
	}
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

// arrayIndex reports whether key is an ECMAScript array index: the canonical decimal form of an
// integer from 0 to 2^32-2. Only those keys move to the front of a JavaScript object.
func arrayIndex(key string) (uint32, bool) {
	if key == "" || len(key) > 10 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(key); i++ {
		d := key[i]
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

// string parses the string literal at pos and leaves its decoded UTF-8 in c.str.
func (c *canonicalizer) string() error {
	c.pos++ // opening quote
	c.str = c.str[:0]
	for {
		if c.pos >= len(c.in) {
			return c.syntaxErr("unterminated string")
		}
		b := c.in[c.pos]
		switch {
		case b == '"':
			c.pos++
			return nil
		case b == '\\':
			if err := c.escape(); err != nil {
				return err
			}
		case b < 0x20:
			return c.syntaxErr("control character in string")
		case b < utf8.RuneSelf:
			c.str = append(c.str, b)
			c.pos++
		default:
			r, size := utf8.DecodeRune(c.in[c.pos:])
			switch {
			case r == utf8.RuneError && size == 1 && !c.lenient:
				return c.syntaxErr("invalid UTF-8 in string")
			case r == utf8.RuneError && size == 1:
				c.str = utf8.AppendRune(c.str, utf8.RuneError)
			default:
				c.str = append(c.str, c.in[c.pos:c.pos+size]...)
			}
			c.pos += size
		}
	}
}

// escape decodes the escape sequence at pos into c.str.
func (c *canonicalizer) escape() error {
	if c.pos+1 >= len(c.in) {
		return c.syntaxErr("unterminated escape")
	}
	var b byte
	switch c.in[c.pos+1] {
	case '"':
		b = '"'
	case '\\':
		b = '\\'
	case '/':
		b = '/'
	case 'b':
		b = '\b'
	case 'f':
		b = '\f'
	case 'n':
		b = '\n'
	case 'r':
		b = '\r'
	case 't':
		b = '\t'
	case 'u':
		return c.unicodeEscape()
	default:
		return c.syntaxErr(fmt.Sprintf("invalid escape \\%c", c.in[c.pos+1]))
	}
	c.str = append(c.str, b)
	c.pos += 2
	return nil
}

// unicodeEscape decodes \uXXXX, joining a surrogate pair written as two escapes. A surrogate without
// its partner becomes U+FFFD, exactly as encoding/json decodes it.
func (c *canonicalizer) unicodeEscape() error {
	r, ok := hex4(c.in[c.pos+2:])
	if !ok {
		return c.syntaxErr("invalid \\u escape")
	}
	c.pos += 6
	if utf16.IsSurrogate(r) {
		// Only a following escape can complete the pair; when it does not, it is left for the next
		// round, where it is decoded on its own.
		if c.pos+1 < len(c.in) && c.in[c.pos] == '\\' && c.in[c.pos+1] == 'u' {
			if r2, ok := hex4(c.in[c.pos+2:]); ok {
				if pair := utf16.DecodeRune(r, r2); pair != utf8.RuneError {
					c.pos += 6
					r = pair
				}
			}
		}
		if utf16.IsSurrogate(r) {
			r = utf8.RuneError
		}
	}
	c.str = utf8.AppendRune(c.str, r)
	return nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, d := range b[:4] {
		switch {
		case d >= '0' && d <= '9':
			d -= '0'
		case d >= 'a' && d <= 'f':
			d = d - 'a' + 10
		case d >= 'A' && d <= 'F':
			d = d - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// number checks the literal against JSON's grammar, which is stricter than strconv's, then writes
// the float64 it denotes as JavaScript would.
func (c *canonicalizer) number() error {
	start := c.pos
	digits := func() int {
		n := 0
		for c.pos < len(c.in) && c.in[c.pos] >= '0' && c.in[c.pos] <= '9' {
			c.pos++
			n++
		}
		return n
	}
	if c.in[c.pos] == '-' {
		c.pos++
	}
	switch {
	case c.pos < len(c.in) && c.in[c.pos] == '0':
		c.pos++
	case digits() == 0:
		return c.syntaxErr("invalid number")
	}
	if c.pos < len(c.in) && c.in[c.pos] == '.' {
		c.pos++
		if digits() == 0 {
			return c.syntaxErr("invalid number: no digits after the decimal point")
		}
	}
	if c.pos < len(c.in) && (c.in[c.pos] == 'e' || c.in[c.pos] == 'E') {
		c.pos++
		if c.pos < len(c.in) && (c.in[c.pos] == '+' || c.in[c.pos] == '-') {
			c.pos++
		}
		if digits() == 0 {
			return c.syntaxErr("invalid number: no digits in the exponent")
		}
	}
	lit := string(c.in[start:c.pos])
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && c.lenient {
		c.out = append(c.out, lit...)
		return nil
	}
	if err != nil {
		// The grammar was checked above, so only a range error is left: JavaScript would read
		// Infinity and write null, losing the value.
		return fmt.Errorf("number %s at offset %d: %w", lit, start, err)
	}
	c.out = appendJSNumber(c.out, f)
	return nil
}

// appendJSNumber appends f as ECMAScript's Number::toString(f) writes it (ECMA-262, 6.1.6.1.20).
// strconv's shortest round-trip digits are the spec's s and k: the fewest digits that read back
// as f, closest to f when several do.
func appendJSNumber(dst []byte, f float64) []byte {
	if f == 0 {
		return append(dst, '0') // -0 too
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64) // d[.ddd]e±xx
	mark := bytes.IndexByte(e, 'e')
	var dbuf [24]byte
	digits := append(dbuf[:0], e[0])
	if mark > 1 {
		digits = append(digits, e[2:mark]...) // after the point
	}
	exp := 0 // strconv always writes a sign and at least two digits
	for _, d := range e[mark+2:] {
		exp = exp*10 + int(d-'0')
	}
	if e[mark+1] == '-' {
		exp = -exp
	}
	k, n := len(digits), exp+1 // f = 0.digits × 10^n

	switch {
	case k <= n && n <= 21:
		dst = append(dst, digits...)
		for range n - k {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, digits[:n]...)
		dst = append(dst, '.')
		dst = append(dst, digits[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for range -n {
			dst = append(dst, '0')
		}
		dst = append(dst, digits...)
	default:
		dst = append(dst, digits[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, digits[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// AppendJSString appends s quoted as JSON.stringify quotes it: only '"', '\\' and U+0000 to U+001F
// are escaped, the usual ones in short form and the rest as \u00xx in lowercase hex. HTML
// characters, U+2028, U+2029 and DEL stay literal, unlike encoding/json. Invalid UTF-8 (which
// CanonicalJSON never passes) is written as U+FFFD so the output is always valid UTF-8.
func AppendJSString[S ~string | ~[]byte](dst []byte, s S) []byte {
	const lowerHex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		b := s[i]
		if b >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(string(s[i:min(i+utf8.UTFMax, len(s))]))
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, s[i:i+size]...)
			}
			i += size
			continue
		}
		switch b {
		case '"', '\\':
			dst = append(dst, '\\', b)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			if b < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', lowerHex[b>>4], lowerHex[b&0xf])
			} else {
				dst = append(dst, b)
			}
		}
		i++
	}
	return append(dst, '"')
}
