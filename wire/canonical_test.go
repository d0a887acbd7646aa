package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"key order kept", `{"z":1,"a":2,"m":3}`, `{"z":1,"a":2,"m":3}`},
		{"whitespace removed", " \t\r\n{ \"a\" : [ 1 ,\n 2 ] , \"b\" : { } } \n", `{"a":[1,2],"b":{}}`},
		{"html characters stay literal", `"<script>&amp;</script>"`, `"<script>&amp;</script>"`},
		{"escaped html characters are decoded", `"\u003c\u003E\u0026"`, `"<>&"`},
		{"U+2028 and U+2029 stay literal", "\"a\u2028b\u2029c\"", "\"a\u2028b\u2029c\""},
		{"escaped U+2028 is decoded", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"unicode escape decoded", `"\u0041\u00e9\u4E2D"`, `"Aé中"`},
		{"surrogate pair decoded", `"\ud83d\ude00\uD83D\uDE00"`, `"😀😀"`},
		{"control char kept as \\u00xx", `"\u0001\u001F\u001b"`, `"\u0001\u001f\u001b"`},
		{"tab gets its short form", `"\u0009"`, `"\t"`},
		{"all short forms", `"\b\f\n\r\t\"\\\/"`, `"\b\f\n\r\t\"\\/"`},
		{"DEL stays literal", `"\u007f"`, "\"\x7f\""},
		{"nul", `"\u0000"`, `"\u0000"`},
		{"raw non-ASCII kept", `"漢字 😀 é"`, `"漢字 😀 é"`},
		{"lone high surrogate becomes U+FFFD", `"\ud800"`, `"` + "\uFFFD" + `"`},
		{"lone low surrogate becomes U+FFFD", `"\udc00x"`, `"` + "\uFFFD" + `x"`},
		{"high surrogate before a non-surrogate", `"\ud83d\u0041"`, `"` + "\uFFFD" + `A"`},
		{"two highs then a low", `"\ud800\ud83d\ude00"`, `"` + "\uFFFD" + `😀"`},
		{"big integer rounds like a double", `12345678901234567890`, `12345678901234567000`},
		{"2^53+1", `9007199254740993`, `9007199254740992`},
		{"2^64-1", `18446744073709551615`, `18446744073709552000`},
		{"1.0", `1.0`, `1`},
		{"100", `100`, `100`},
		{"1e2", `1E+2`, `100`},
		{"0.1", `0.1`, `0.1`},
		{"0.1+0.2", `0.30000000000000004`, `0.30000000000000004`},
		{"1e21", `1e21`, `1e+21`},
		{"1e20 is still fixed", `1e20`, `100000000000000000000`},
		{"21 digits", `123456789012345678901`, `123456789012345680000`},
		{"22 digits", `1234567890123456789012`, `1.2345678901234568e+21`},
		{"1e-6 is fixed", `1e-6`, `0.000001`},
		{"1e-7 is exponential", `0.0000001`, `1e-7`},
		{"123e-20", `123e-20`, `1.23e-18`},
		{"negative exponent", `-1.25e-10`, `-1.25e-10`},
		{"1.5e300", `1.5e300`, `1.5e+300`},
		{"largest double", `1.7976931348623157e308`, `1.7976931348623157e+308`},
		{"smallest subnormal", `5e-324`, `5e-324`},
		{"underflow to zero", `1e-400`, `0`},
		{"negative zero", `-0`, `0`},
		{"negative zero fraction", `-0.0e5`, `0`},
		{"negative", `-123456.789`, `-123456.789`},
		{"0.5e-6", `0.5e-6`, `5e-7`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"top-level string", `"x"`, `"x"`},
		{"nested", `{"a":[1,{"b":[[],{}]},[[[null]]]],"c":{"d":{"e":"f"}}}`, `{"a":[1,{"b":[[],{}]},[[[null]]]],"c":{"d":{"e":"f"}}}`},
		{"empty object", `{}`, `{}`},
		{"empty array", ` [ ] `, `[]`},
		{"array-index keys move first, ascending", `{"b":1,"2":2,"1":3,"01":4,"4294967295":5,"4294967294":6,"-1":7,"1.0":8,"0":9}`,
			`{"0":9,"1":3,"2":2,"4294967294":6,"b":1,"01":4,"4294967295":5,"-1":7,"1.0":8}`},
		{"array-index keys already in order", `{"1":1,"5":2,"x":3}`, `{"1":1,"5":2,"x":3}`},
		{"array-index keys in nested objects", `{"x":{"9":[{"b":1,"3":{"2":0,"1":0}}],"8":1}}`,
			`{"x":{"8":1,"9":[{"3":{"1":0,"2":0},"b":1}]}}`},
		{"keys are quoted like strings", `{"a\"b":1,"\u0001":2,"":3,"\/":4}`, `{"a\"b":1,"\u0001":2,"":3,"/":4}`},
		{"__proto__ is an ordinary key", `{"__proto__":{"x":1},"constructor":2}`, `{"__proto__":{"x":1},"constructor":2}`},
		{"many keys", manyKeys(40, -1), manyKeys(40, -1)},
		{"same key in sibling objects", `[{"a":1},{"a":1}]`, `[{"a":1},{"a":1}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tt.in))
			if err != nil {
				t.Fatalf("CanonicalJSON(%q): %v", tt.in, err)
			}
			if string(got) != tt.want {
				t.Errorf("CanonicalJSON(%q) = %q, want %q", tt.in, got, tt.want)
			}
			again, err := CanonicalJSON(got)
			if err != nil {
				t.Fatalf("CanonicalJSON of its own output %q: %v", got, err)
			}
			if !bytes.Equal(again, got) {
				t.Errorf("not a fixed point: %q became %q", got, again)
			}
		})
	}
}

// TestDuplicateKey (issue 18): a key repeated within one object is found at any depth, with its
// path and offset; keys repeated in different objects are not duplicates; what CanonicalJSON
// refuses for other reasons (a number beyond float64, invalid UTF-8, deep nesting) passes, so a
// request body is refused for a repeated key only.
func TestDuplicateKey(t *testing.T) {
	deep := strings.Repeat(`{"a":`, MaxJSONDepth+10) + "1" + strings.Repeat("}", MaxJSONDepth+10)
	for _, tc := range []struct {
		name, in string
		path     []string
		offset   int
	}{
		{"issue 18", `{"since":"2020-01-01T00:00:00Z","since":"2021-01-01T00:00:00Z"}`, []string{"since"}, 32},
		{"nested", `{"data":{"x":1,"y":{"z":[1,{"k":1,"k":2}]}}}`, []string{"data", "y", "z", "1", "k"}, 34},
		{"escaped spelling", `{"a":1,"\u0061":2}`, []string{"a"}, 7},
		{"after a huge number and invalid UTF-8", "{\"n\":1e400,\"s\":\"\xff\",\"s\":1}", []string{"s"}, 19},
		{"invalid UTF-8 keys read as U+FFFD", "{\"a\xff\":1,\"a\xfe\":2}", []string{"a\uFFFD"}, 8},
		{"no duplicate", `{"a":{"k":1},"b":{"k":1},"c":[{"k":1},{"k":1}]}`, nil, 0},
		{"too deep for CanonicalJSON", deep, nil, 0},
		{"not JSON", `{"a":1,`, nil, 0},
		{"not an object", `[1,1]`, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := DuplicateKey([]byte(tc.in))
			var dup *DuplicateKeyError
			if tc.path == nil {
				if err != nil {
					t.Fatalf("DuplicateKey = %v, want nil", err)
				}
				return
			}
			if !errors.As(err, &dup) || !errors.Is(err, ErrDuplicateKey) {
				t.Fatalf("DuplicateKey = %v, want a *DuplicateKeyError", err)
			}
			if !slices.Equal(dup.Path, tc.path) || dup.Offset != tc.offset || dup.Key != tc.path[len(tc.path)-1] {
				t.Fatalf("DuplicateKey = %+v, want path %q at offset %d", dup, tc.path, tc.offset)
			}
		})
	}
	// CanonicalJSON keeps its own refusals and reports duplicates the same way.
	if _, err := CanonicalJSON([]byte(`{"a":1,"a":2}`)); !errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("CanonicalJSON of a repeated key: %v", err)
	}
	if _, err := CanonicalJSON([]byte("{\"s\":\"\xff\"}")); err == nil || errors.Is(err, ErrDuplicateKey) {
		t.Fatalf("CanonicalJSON of invalid UTF-8: %v, want a syntax error", err)
	}
}

func TestCanonicalJSONErrors(t *testing.T) {
	tests := []struct {
		name, in string
		dup      bool
	}{
		{"duplicate key", `{"a":1,"b":2,"a":3}`, true},
		{"duplicate key after escapes", `{"a":1,"\u0061":2}`, true},
		{"duplicate nested key", `[{"x":{"k":1,"k":1}}]`, true},
		{"duplicate among many keys, first", manyKeys(40, 0), true},
		{"duplicate among many keys, late", manyKeys(40, 30), true},
		{"duplicate right after the switch to a map", manyKeys(40, 16), true}, // 16 keys: where a hand-written check would switch to a map
		{"duplicate via two lone surrogates", `{"\ud800":1,"\udc00":2}`, true},
		{"empty", ``, false},
		{"only whitespace", " \n", false},
		{"trailing garbage", `{"a":1} x`, false},
		{"two values", `1 2`, false},
		{"trailing comma in object", `{"a":1,}`, false},
		{"trailing comma in array", `[1,]`, false},
		{"missing colon", `{"a" 1}`, false},
		{"unquoted key", `{a:1}`, false},
		{"single quotes", `'a'`, false},
		{"unterminated string", `"abc`, false},
		{"unterminated array", `[1,2`, false},
		{"unterminated object", `{"a":1`, false},
		{"raw control character in string", "\"a\tb\"", false},
		{"raw U+001F in string", "\"\x1f\"", false},
		{"raw NUL in string", "\"\x00\"", false},
		{"garbage after object member", `{"a":1x}`, false},
		{"garbage instead of a closing brace", `{"a":1x`, false},
		{"missing comma in object", `{"a":1 "b":2}`, false},
		{"garbage after array element", `[1x]`, false},
		{"garbage instead of a closing bracket", `[1x`, false},
		{"missing comma in array", `[1 2]`, false},
		{"colon in array", `[1:2]`, false},
		{"bad escape", `"\x41"`, false},
		{"short unicode escape", `"\u12"`, false},
		{"non-hex unicode escape", `"\u12G4"`, false},
		{"invalid UTF-8", "\"\xff\"", false},
		{"truncated UTF-8", "\"\xe2\x82\"", false},
		{"leading zero", `01`, false},
		{"leading plus", `+1`, false},
		{"bare minus", `-`, false},
		{"dot without digits", `1.`, false},
		{"leading dot", `.5`, false},
		{"exponent without digits", `1e+`, false},
		{"hex number", `0x10`, false},
		{"NaN", `NaN`, false},
		{"Infinity", `Infinity`, false},
		{"overflow to infinity", `1e400`, false},
		{"negative overflow", `-1e309`, false},
		{"bad literal", `tru`, false},
		{"literal with tail", `nullx`, false},
		{"BOM", "\uFEFF{}", false},
		{"too deep", strings.Repeat("[", MaxJSONDepth+1) + strings.Repeat("]", MaxJSONDepth+1), false},
		{"too deep objects", strings.Repeat(`{"a":`, MaxJSONDepth+1) + "1" + strings.Repeat("}", MaxJSONDepth+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tt.in))
			if err == nil {
				t.Fatalf("CanonicalJSON(%.80q) = %q, want an error", tt.in, got)
			}
			if errors.Is(err, ErrDuplicateKey) != tt.dup {
				t.Errorf("CanonicalJSON(%.80q) error %q: errors.Is(ErrDuplicateKey) = %v, want %v", tt.in, err, !tt.dup, tt.dup)
			}
		})
	}

	t.Run("deepest allowed nesting", func(t *testing.T) {
		in := strings.Repeat("[", MaxJSONDepth) + strings.Repeat("]", MaxJSONDepth)
		got, err := CanonicalJSON([]byte(in))
		if err != nil || string(got) != in {
			t.Errorf("CanonicalJSON of %d nested arrays = %.40q, %v", MaxJSONDepth, got, err)
		}
	})
}

// manyKeys is an object with enough keys for duplicate checks to switch to a map, repeating key
// number repeat at the end unless it is negative.
func manyKeys(n, repeat int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":%d`, i, i)
	}
	if repeat >= 0 {
		fmt.Fprintf(&b, `,"k%d":0`, repeat)
	}
	b.WriteByte('}')
	return b.String()
}

func TestCanonicalNumber(t *testing.T) {
	tests := []struct {
		f    float64
		want string
	}{
		{0, "0"},
		{math.Copysign(0, -1), "0"},
		{1, "1"},
		{-1, "-1"},
		{0.5, "0.5"},
		{123.456, "123.456"},
		{1e21, "1e+21"},
		{1e-7, "1e-7"},
		{1.5e-7, "1.5e-7"},
		{1e-6, "0.000001"},
		{1.2e-6, "0.0000012"},
		{1 << 53, "9007199254740992"},
		{math.MaxFloat64, "1.7976931348623157e+308"},
		{-math.MaxFloat64, "-1.7976931348623157e+308"},
		{math.SmallestNonzeroFloat64, "5e-324"},
		{2.2250738585072014e-308, "2.2250738585072014e-308"},
		{1e100, "1e+100"},
		{123e18, "123000000000000000000"},
		{4.35, "4.35"},
		{5e-7, "5e-7"},
	}
	for _, tt := range tests {
		literal := strconv.FormatFloat(tt.f, 'g', -1, 64)
		got, err := CanonicalJSON([]byte(literal))
		if err != nil || string(got) != tt.want {
			t.Errorf("CanonicalJSON(%s) = %q, %v; want %q", literal, got, err, tt.want)
		}
	}
}

// payload is one differential test input.
type payload struct {
	name, in string
	// lossy marks input CanonicalJSON deliberately changes (lone surrogates become U+FFFD), where
	// only its output, not its input, is compared with node.
	lossy bool
}

func nodeCorpus() []payload {
	var controls strings.Builder
	for c := range 0x20 {
		fmt.Fprintf(&controls, `\u%04x`, c)
	}
	var numbers strings.Builder
	for i := range 100 {
		if i > 0 {
			numbers.WriteByte(',')
		}
		fmt.Fprintf(&numbers, "%d.%de%d", i*7919, i, i%40-20)
	}
	long := strings.Repeat("a<é>\u2028\"\\\t😀中\x01", 1000)
	return []payload{
		{name: "accents", in: `{"text":"héllo wörld ñ ç"}`},
		{name: "emoji", in: `{"e":"😀👍🏽👨‍👩‍👧🏳️‍🌈"}`},
		{name: "CJK", in: `{"cjk":"漢字かなカナ한국어","中文键":"值"}`},
		{name: "script", in: `{"html":"<script>alert('x')</script>"}`},
		{name: "entities", in: `{"amp":"&amp; &lt; &gt; &#x27;","raw":"a&b<c>d"}`},
		{name: "raw U+2028 U+2029", in: "{\"ls\":\"a\u2028b\u2029c\"}"},
		{name: "escaped U+2028 U+2029", in: `{"ls":"\u2028\u2029"}`},
		{name: "all control chars escaped", in: `{"c":"` + controls.String() + `"}`},
		{name: "short escapes", in: `["\b\f\n\r\t\/"]`},
		{name: "quotes and backslashes", in: `{"q":"say \"hi\" \\ back\\\\slash \\\"","\"k\\":"\\"}`},
		{name: "DEL", in: "[\"\x7f\",\"\\u007f\"]"},
		{name: "big integers", in: `[12345678901234567890,9007199254740993,18446744073709551615,-9223372036854775808,99999999999999999999999]`},
		{name: "fractions", in: `[1.0,1.50,0.1,0.2,0.30000000000000004,3.14159265358979323846264338327950288]`},
		{name: "exponents", in: `[1e21,1e20,1E+2,1e-7,1e-6,123e-20,1.5e300,5e-324,1.7976931348623157e308,2.2250738585072014e-308]`},
		{name: "negative zero", in: `[-0,-0.0,-0e10,0e-5,-0E-0]`},
		{name: "negative numbers", in: `[-1.25e-10,-1e21,-123456.789,-5e-324]`},
		{name: "number boundaries", in: `[100,0.000001,0.0000001,1234567890123456789012,123456789012345678901,100000000000000000000,1e22,999999999999999999999]`},
		{name: "rounding", in: `[4.35,0.1e1,10.0e-1,0.5e-6,1.005,2.675,9.995,0.000001234,1.7976931348623157e308]`},
		{name: "hard to round", in: `[2.4703282292062328e-324,2.4703282292062327e-324,9007199254740993.0000000001,1.00000000000000011102230246251565404236316680908203125]`},
		{name: "many numbers", in: "[" + numbers.String() + "]"},
		{name: "underflow", in: `[1e-400,-1e-400]`},
		{name: "deep arrays", in: strings.Repeat("[", MaxJSONDepth) + "1" + strings.Repeat("]", MaxJSONDepth)},
		{name: "deep objects", in: strings.Repeat(`{"a":[`, 100) + "{}" + strings.Repeat("]}", 100)},
		{name: "empty object", in: `{}`},
		{name: "empty array", in: `[]`},
		{name: "empties nested", in: `[{},[],{"a":{}},[[]],""]`},
		{name: "unicode escapes", in: `"\u0041\u00e9\u4e2d\u00C9\uFFFD\uffff"`},
		{name: "surrogate pair escapes", in: `["\ud83d\ude00","\uD83D\uDE00","x\ud834\udd1ey","\udbff\udfff"]`},
		{name: "surrogate escape beside raw", in: `"😀\ud83d\ude00😀"`},
		{name: "whitespace everywhere", in: " \t\n\r{ \"a\" :\n[ 1 ,\t2 ] ,\r\n\"b\" : { \"c\" : null } }\n "},
		{name: "array-index keys", in: `{"b":1,"2":2,"1":3,"01":4,"4294967295":5,"4294967294":6,"-1":7,"1.0":8,"0":10," 3":11,"1e3":12}`},
		{name: "nested array-index keys", in: `{"x":{"9":[{"b":1,"3":{"20":0,"10":0}}],"8":1},"7":null}`},
		{name: "keys needing escapes", in: `{"a\"b":1,"c\\d":2,"\n":3,"":4,"\u0000":5,"\u2028":6}`},
		{name: "__proto__", in: `{"__proto__":{"x":1},"constructor":2,"toString":3}`},
		{name: "top-level string", in: `"just a string"`},
		{name: "top-level number", in: `42.0`},
		{name: "top-level literal", in: `true`},
		{name: "top-level null", in: `null`},
		{name: "top-level negative zero", in: `-0`},
		{name: "long mixed string", in: `{"long":` + jsonQuoteRaw(long) + `}`},
		{name: "escaped slashes", in: `{"url":"https:\/\/example.com\/a?b=1&c=2"}`},
		{name: "BOM inside strings", in: "[\"\\ufeff\",\"\uFEFFx\"]"},
		{name: "noncharacters", in: "[\"\uFFFE\uFFFF\",\"\U0010FFFF\",\"\u0080\u07ff\u0800\"]"},
		{name: "literals", in: `[true,false,null,[true],{"n":null}]`},
		{name: "campaign", in: `{"campaignId":42,"name":"Spring <sale> & more 🌸","status":"sent","stats":{"sent":1000,"opened":123,"rate":0.123,"ctr":1.5e-3},"tags":["a","b"],"sentAt":"2024-03-05T13:07:09.123Z"}`},
		{name: "website", in: `{"website":{"id":7,"url":"https://exämple.com/","pages":[{"path":"/","title":"Home \u2014 \"Main\""},{"path":"/a\tb","title":null}]},"previous":{"status":"draft"}}`},
		{name: "lone high surrogate", in: `{"s":"\ud800"}`, lossy: true},
		{name: "lone low surrogate", in: `["\udc00x","\udfff"]`, lossy: true},
		{name: "high surrogate then letter", in: `"\ud83d\u0041"`, lossy: true},
		{name: "two highs then a low", in: `"\ud800\ud83d\ude00"`, lossy: true},
	}
}

// jsonQuoteRaw quotes s for JSON with encoding/json, whose escaping (<, >, &, U+2028 as \u00xx)
// differs from JSON.stringify's: good input for the canonicalizer.
func jsonQuoteRaw(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		return `"unreachable: valid UTF-8 always marshals"`
	}
	return string(b)
}

// randomPayloads returns n valid JSON texts from a fixed seed, written with random whitespace and
// random escaping so that the parser sees many spellings of the same values.
func randomPayloads(n int) []payload {
	g := &generator{rng: rand.New(rand.NewPCG(2024, 3))}
	out := make([]payload, n)
	for i := range out {
		g.b.Reset()
		g.space()
		if g.rng.IntN(2) == 0 {
			g.object(0)
		} else {
			g.array(0)
		}
		g.space()
		out[i] = payload{name: fmt.Sprintf("random %d", i), in: g.b.String()}
	}
	return out
}

type generator struct {
	rng *rand.Rand
	b   strings.Builder
}

// trickyRunes are characters whose escaping differs between JSON encoders.
var trickyRunes = []rune{
	'a', 'Z', '0', ' ', '"', '\\', '/', '<', '>', '&', '\'', 0x7f, 0x80, 0x7ff, 0x800, 'é', '中',
	0x2028, 0x2029, 0xfeff, 0xfffd, 0xffff, 0x1f600, 0x10ffff, 0x1d11e,
}

var indexLikeKeys = []string{"0", "1", "2", "10", "01", "4294967294", "4294967295", "-1", "1.5", "007", "1e3"}

func (g *generator) space() {
	for range g.rng.IntN(3) {
		g.b.WriteByte(" \t\n\r"[g.rng.IntN(4)])
	}
}

func (g *generator) value(depth int) {
	switch k := g.rng.IntN(10); {
	case k < 2 && depth < 6:
		g.object(depth + 1)
	case k < 4 && depth < 6:
		g.array(depth + 1)
	case k < 6:
		g.string(g.randomText())
	case k < 9:
		g.number()
	default:
		g.b.WriteString([]string{"true", "false", "null"}[g.rng.IntN(3)])
	}
}

func (g *generator) object(depth int) {
	g.b.WriteByte('{')
	seen := map[string]bool{}
	n := g.rng.IntN(6)
	for i := 0; i < n; i++ {
		key := g.randomText()
		if g.rng.IntN(3) == 0 {
			key = indexLikeKeys[g.rng.IntN(len(indexLikeKeys))]
		}
		if seen[key] {
			continue
		}
		seen[key] = true
		if len(seen) > 1 {
			g.b.WriteByte(',')
		}
		g.space()
		g.string(key)
		g.space()
		g.b.WriteByte(':')
		g.space()
		g.value(depth)
		g.space()
	}
	g.b.WriteByte('}')
}

func (g *generator) array(depth int) {
	g.b.WriteByte('[')
	n := g.rng.IntN(6)
	for i := range n {
		if i > 0 {
			g.b.WriteByte(',')
		}
		g.space()
		g.value(depth)
		g.space()
	}
	g.b.WriteByte(']')
}

func (g *generator) randomText() string {
	var s strings.Builder
	for range g.rng.IntN(12) {
		if g.rng.IntN(5) == 0 {
			s.WriteRune(rune(g.rng.IntN(0x20)))
			continue
		}
		s.WriteRune(trickyRunes[g.rng.IntN(len(trickyRunes))])
	}
	return s.String()
}

// string writes s as a JSON string literal, choosing among the legal spellings of each character.
func (g *generator) string(s string) {
	const hexDigits = "0123456789abcdef0123456789ABCDEF"
	writeU := func(u rune) {
		upper := g.rng.IntN(2) * 16
		g.b.WriteString(`\u`)
		for shift := 12; shift >= 0; shift -= 4 {
			g.b.WriteByte(hexDigits[upper+int(u>>shift)&0xf])
		}
	}
	short := map[rune]string{'"': `\"`, '\\': `\\`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`, '/': `\/`}
	g.b.WriteByte('"')
	for _, r := range s {
		esc, hasShort := short[r]
		mustEscape := r == '"' || r == '\\' || r < 0x20
		switch {
		case (mustEscape || g.rng.IntN(8) == 0) && hasShort && g.rng.IntN(2) == 0:
			g.b.WriteString(esc)
		case mustEscape || g.rng.IntN(5) == 0:
			if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
				writeU(r1)
				writeU(r2)
			} else {
				writeU(r)
			}
		default:
			g.b.WriteRune(r)
		}
	}
	g.b.WriteByte('"')
}

func (g *generator) number() {
	switch g.rng.IntN(4) {
	case 0: // any finite double, mostly huge or tiny
		for {
			f := math.Float64frombits(g.rng.Uint64())
			if !math.IsNaN(f) && !math.IsInf(f, 0) {
				g.b.WriteString(strconvFormat(f, "geE"[g.rng.IntN(3)]))
				return
			}
		}
	case 1: // a double of everyday size
		f := (g.rng.Float64() - 0.5) * math.Pow(10, float64(g.rng.IntN(40)-15))
		g.b.WriteString(strconvFormat(f, "gef"[g.rng.IntN(3)]))
	default: // a literal with more digits than a double holds
		if g.rng.IntN(3) == 0 {
			g.b.WriteByte('-')
		}
		if g.rng.IntN(4) == 0 {
			g.b.WriteByte('0')
		} else {
			g.b.WriteByte(byte('1' + g.rng.IntN(9)))
			g.digits(g.rng.IntN(25))
		}
		if g.rng.IntN(2) == 0 {
			g.b.WriteByte('.')
			g.digits(1 + g.rng.IntN(25))
		}
		if g.rng.IntN(2) == 0 {
			g.b.WriteByte("eE"[g.rng.IntN(2)])
			if s := g.rng.IntN(3); s < 2 {
				g.b.WriteByte("+-"[s])
			}
			// Small enough that no literal overflows to Infinity, which CanonicalJSON refuses.
			fmt.Fprintf(&g.b, "%0*d", 1+g.rng.IntN(3), g.rng.IntN(280))
		}
	}
}

func (g *generator) digits(n int) {
	for range n {
		g.b.WriteByte(byte('0' + g.rng.IntN(10)))
	}
}

// strconvFormat writes f with the shortest digits that read back as f, in the given format.
func strconvFormat(f float64, format byte) string {
	return strconv.FormatFloat(f, format, -1, 64)
}

// FuzzCanonicalJSON checks what must hold for any input: no panic, and when the input is accepted,
// encoding/json reads the same values from input and output (it decodes lone surrogates to U+FFFD
// as CanonicalJSON does), the output is valid UTF-8, and it is a fixed point.
func FuzzCanonicalJSON(f *testing.F) {
	for _, p := range nodeCorpus() {
		f.Add(p.in)
	}
	for _, p := range randomPayloads(20) {
		f.Add(p.in)
	}
	f.Add(`{"a":1,"a":2}`)
	f.Add(`{"2":1,"1":{"b":0,"0":[]}}`)
	f.Fuzz(func(t *testing.T, in string) {
		out, err := CanonicalJSON([]byte(in))
		if err != nil {
			return
		}
		if !json.Valid([]byte(in)) || !json.Valid(out) || !utf8.Valid(out) {
			t.Fatalf("CanonicalJSON(%q) = %q: accepted invalid input or wrote invalid output", in, out)
		}
		var before, after any
		if err := json.Unmarshal([]byte(in), &before); err != nil {
			t.Fatalf("encoding/json rejects accepted input %q: %v", in, err)
		}
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("encoding/json rejects output %q: %v", out, err)
		}
		if !reflect.DeepEqual(before, after) {
			t.Fatalf("CanonicalJSON(%q) = %q changed the value", in, out)
		}
		again, err := CanonicalJSON(out)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point: %q became %q, %v", out, again, err)
		}
	})
}
