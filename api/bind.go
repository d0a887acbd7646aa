package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/input"
	"github.com/webhookd/webhookd/wire"
)

// decodeJSON reads the request body into dst strictly: JSON only, one object, no unknown fields, no
// key given twice, and every failure explained in terms of the client's input. A Content-Type
// other than JSON is 400, as malformed JSON is (docs/api.md).
func decodeJSON(c echo.Context, dst any) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	return decodeBody(c, body, dst)
}

// decodeOptional is decodeJSON for an operation whose parameters are all optional: no body, or one
// of only white space, leaves dst as it is.
func decodeOptional(c echo.Context, dst any) error {
	body, err := readBody(c)
	if err != nil || len(bytes.TrimSpace(body)) == 0 {
		return err
	}
	return decodeBody(c, body, dst)
}

// decodeNoBody accepts the body of an operation that takes no parameters: none, an empty one or
// {}. Anything else is refused as decodeJSON refuses it, an unknown field naming the field.
func decodeNoBody(c echo.Context) error {
	return decodeOptional(c, &struct{}{})
}

// readBody reads the whole body. The route's body limit bounds it: a chunked body over the limit
// fails here with the limit's 413, which the error handler words with the route's limit.
func readBody(c echo.Context) ([]byte, error) {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		return nil, fmt.Errorf("read request body: %w", err)
	}
	return body, nil
}

func decodeBody(c echo.Context, body []byte, dst any) error {
	if ct := c.Request().Header.Get(echo.HeaderContentType); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != echo.MIMEApplicationJSON && !strings.HasSuffix(mt, "+json")) {
			return invalidRequest("Content-Type must be application/json")
		}
	}
	if string(bytes.TrimSpace(body)) == "null" {
		return invalidRequest("request body must be a JSON object, not null")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidRequest("request body must hold a single JSON object")
	}
	// encoding/json lets the last of two equal keys win; a client that sent both meant one of them.
	var dup *wire.DuplicateKeyError
	if errors.As(wire.DuplicateKey(body), &dup) {
		field := strings.Join(dup.Path, ".")
		return invalidField(field, "request body repeats the key %q at byte %d (field %s); send each key once", dup.Key, dup.Offset, field)
	}
	return exactNames(body, reflect.TypeOf(dst), "")
}

func decodeError(err error) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return invalidRequest("request body is empty; send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return invalidRequest("malformed JSON: unexpected end of input")
	case errors.As(err, &syntax):
		return invalidRequest("malformed JSON at byte %d: %s", syntax.Offset, syntax.Error())
	case errors.As(err, &typ):
		if typ.Field == "" {
			return invalidRequest("request body must be a JSON object, not %s", clip(typ.Value))
		}
		return invalidField(typ.Field, "field %s must be %s, not %s", typ.Field, jsonTypeName(typ.Type.Kind().String()), clip(typ.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field, _ := strconv.Unquote(strings.TrimPrefix(err.Error(), "json: unknown field "))
		return invalidField(field, "unknown field %q", field)
	}
	return invalidRequest("malformed JSON")
}

// jsonInt is an integer field of a request body; every integer field of every body is one (or a
// nullableInt), so that one rule reads them all (docs/api.md, "Integers"). A JSON number whose
// value is an integer is that integer however it is written: 100, 1e2, 1E+2, 100.0 and 10000e-2
// are 100, as they are in an event's data (input.JSONInteger) and to every client whose JSON
// numbers are floats. A number that is not an integer (1.5, 1e-2) and any other JSON value are a
// wrong type, 400 naming the field. An integer beyond ±2^53-1 (1e400, 9007199254740993) reads as
// the int64 at the end of its side, out of every field's range, so that the field's own range
// check refuses it: 422 naming the field and its range, as for 0 or one over the top.
type jsonInt int64

func (n *jsonInt) UnmarshalJSON(b []byte) error {
	lit := string(b)
	if lit == "null" {
		return nil // as encoding/json leaves an int; pointers and nullableInt see null themselves
	}
	value := "number " + lit
	switch b[0] {
	case '"':
		value = "string"
	case 't', 'f':
		value = "bool"
	case '{':
		value = "object"
	case '[':
		value = "array"
	}
	v, isInteger, safe := input.JSONInteger(lit)
	switch {
	case !strings.HasPrefix(value, "number ") || !isInteger:
		// The decoder adds the field's name to the error.
		return &json.UnmarshalTypeError{Value: value, Type: reflect.TypeFor[int64]()}
	case !safe && strings.HasPrefix(lit, "-"):
		v = math.MinInt64
	case !safe:
		v = math.MaxInt64
	}
	*n = jsonInt(v)
	return nil
}

// nullableJSON is a field of any JSON value that tells absent from null (a webhook's filter): Set
// when the field was present, Value nil when it was null.
type nullableJSON struct {
	Set   bool
	Value json.RawMessage
}

func (n *nullableJSON) UnmarshalJSON(b []byte) error {
	n.Set = true
	n.Value = nil
	if string(b) != "null" {
		n.Value = append(json.RawMessage(nil), b...)
	}
	return nil
}

// nullableInt is an integer field that tells absent from null, for the fields a partial update may
// clear: absent (Set false) keeps the stored value, null (Set, Value nil) clears it. Any other
// value decodes as a jsonInt does, so a wrong type is the same 400 naming the field as elsewhere.
type nullableInt struct {
	Set   bool
	Value *int
}

func (n *nullableInt) UnmarshalJSON(b []byte) error {
	n.Set = true
	if string(b) == "null" {
		n.Value = nil
		return nil
	}
	var v jsonInt
	if err := v.UnmarshalJSON(b); err != nil {
		return err
	}
	i := int(v)
	n.Value = &i
	return nil
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "int", "int64", "int32", "uint", "uint64":
		return "an integer"
	case "float64":
		return "a number"
	case "map", "struct":
		return "an object"
	case "slice", "array":
		return "an array"
	}
	return "of another type"
}

// exactNames refuses a key that names a field of dst's type in another case. encoding/json matches
// field names without regard to case, so {"URL": ...} would set url, and {"url": a, "URL": b}
// would keep b without a word; documented names are exact, as in Stripe's API. Only structs are
// walked: the keys of a map (customFields) and of raw JSON (an event's data) are the caller's own.
// The body has already been decoded into dst, so every key names a field in some case.
func exactNames(body []byte, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(body, &members) != nil {
		return nil // null, or not an object: encoding/json has accepted it for this field
	}
	for key, raw := range members {
		field, exact := structField(t, key)
		if field.name == "" {
			continue // not a field of ours at all (encoding/json accepted it elsewhere)
		}
		if !exact {
			return invalidField(path+key, "unknown field %q; the field is %q (field names are case-sensitive)", path+key, path+field.name)
		}
		if err := exactNames(raw, field.typ, path+key+"."); err != nil {
			return err
		}
	}
	return nil
}

type jsonField struct {
	name string
	typ  reflect.Type
}

// structField finds the field key names in t: exactly, or else as encoding/json would, ignoring case.
func structField(t reflect.Type, key string) (jsonField, bool) {
	var folded jsonField
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == key {
			return jsonField{name, f.Type}, true
		}
		if folded.name == "" && strings.EqualFold(name, key) {
			folded = jsonField{name, f.Type}
		}
	}
	return folded, false
}
