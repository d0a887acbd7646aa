package filter_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/filter"
	"github.com/webhookd/webhookd/wire"
)

// leadData is the event data of the table's bodies: every JSON type, an array of scalars, an array
// of objects, nested arrays, a null, a number written as an exponent and an instant with an offset.
const leadData = `{"email":"fan@example.com","country":"DE","budget":250,"score":1e2,"ratio":0.5,
"tags":["vip","beta"],"items":[{"id":1,"qty":2},{"id":5,"qty":0}],"optIn":true,"ref":null,
"name":"Zoë","nested":{"a":{"b":{"c":"deep"}}},"matrix":[[1,2],[3]],"empty":[],"zip":"01234",
"createdAt":"2026-11-27T15:00:00+01:00","$meta":1}`

// bodyA and bodyB are the delivery bodies of the two variants for one event, built by wire as the
// receivers get them (B without its signature), so the table tests the shapes that are matched.
var (
	occurred = time.Date(2026, 11, 27, 16, 0, 0, 0, time.UTC)
	bodyA    = string(wire.BodyA("lead.created", canonical(leadData), occurred))
	bodyB    = string(wire.UnsignedBodyB("lead.created", canonical(leadData), occurred))
)

func canonical(s string) json.RawMessage {
	c, err := wire.CanonicalJSON([]byte(s))
	if err != nil {
		panic(err) // a fixture that does not compile is a defect of this file
	}
	return c
}

type matchCase struct {
	name   string
	filter string
	body   string // bodyA, bodyB or a literal body
	want   bool
}

// both is a case about the event data, which reads the same in both variants' bodies.
func both(name, flt string, want bool) []matchCase {
	return []matchCase{
		{name + "/A", flt, bodyA, want},
		{name + "/B", flt, bodyB, want},
	}
}

func matchCases() []matchCase {
	var cs []matchCase
	add := func(c ...matchCase) { cs = append(cs, c...) }

	// The envelope: each variant names the type and writes the timestamp its own way.
	add(matchCase{"A eventType", `{"eventType":"lead.created"}`, bodyA, true},
		matchCase{"A has no event key", `{"event":"lead.created"}`, bodyA, false},
		matchCase{"B event", `{"event":"lead.created"}`, bodyB, true},
		matchCase{"B has no eventType key", `{"eventType":"lead.created"}`, bodyB, false},
		matchCase{"A timestamp exact string", `{"timestamp":"2026-11-27T16:00:00.000Z"}`, bodyA, true},
		matchCase{"B timestamp exact string", `{"timestamp":"2026-11-27T16:00:00Z"}`, bodyB, true},
		matchCase{"$eq on a timestamp is exact text", `{"timestamp":{"$eq":"2026-11-27T16:00:00Z"}}`, bodyA, false},
		matchCase{"signature is not part of B's body", `{"signature":{"$exist":false}}`, bodyB, true},
		matchCase{"A has no signature", `{"signature":{"$exist":true}}`, bodyA, false},
		matchCase{"either variant's type key", `{"$or":[{"eventType":"lead.created"},{"event":"lead.created"}]}`, bodyB, true},
	)
	add(both("timestamp $gte same instant other precision", `{"timestamp":{"$gte":"2026-11-27T16:00:00Z"}}`, true)...)
	add(both("timestamp $lte same instant other precision", `{"timestamp":{"$lte":"2026-11-27T16:00:00.000Z"}}`, true)...)
	add(both("timestamp $gt same instant", `{"timestamp":{"$gt":"2026-11-27T16:00:00Z"}}`, false)...)
	add(both("timestamp $lt one ms later", `{"timestamp":{"$lt":"2026-11-27T16:00:00.001Z"}}`, true)...)
	add(both("timestamp window", `{"timestamp":{"$gte":"2026-11-27T00:00:00Z","$lt":"2026-11-28T00:00:00Z"}}`, true)...)
	add(both("timestamp in an offset", `{"timestamp":{"$gte":"2026-11-27T17:00:00+01:00"}}`, true)...)
	add(both("timestamp after, by offset", `{"timestamp":{"$gt":"2026-11-27T17:00:00+01:00"}}`, false)...)
	add(both("data instant with offset compared as an instant", `{"data":{"createdAt":{"$lt":"2026-11-27T14:30:00Z"}}}`, true)...)
	add(both("date-only operand compares as text", `{"timestamp":{"$gte":"2026-11-27","$lt":"2026-11-28"}}`, true)...)

	// Exact matches, AND of keys, nesting.
	add(both("exact string", `{"data":{"country":"DE"}}`, true)...)
	add(both("exact string differs", `{"data":{"country":"FR"}}`, false)...)
	add(both("strings are case-sensitive", `{"data":{"country":"de"}}`, false)...)
	add(both("keys AND: all hold", `{"data":{"country":"DE","optIn":true}}`, true)...)
	add(both("keys AND: one fails", `{"data":{"country":"DE","optIn":false}}`, false)...)
	add(both("envelope and data AND", `{"data":{"country":"DE"},"timestamp":{"$exist":true}}`, true)...)
	add(both("deep nesting", `{"data":{"nested":{"a":{"b":{"c":"deep"}}}}}`, true)...)
	add(both("deep nesting differs", `{"data":{"nested":{"a":{"b":{"c":"shallow"}}}}}`, false)...)
	add(both("unicode string", `{"data":{"name":"Zoë"}}`, true)...)
	add(both("exact true", `{"data":{"optIn":true}}`, true)...)
	add(both("number exact", `{"data":{"budget":250}}`, true)...)
	add(both("number written as exponent in the filter", `{"data":{"budget":2.5e2}}`, true)...)
	add(both("number written as exponent in the event's data", `{"data":{"score":100}}`, true)...)
	add(matchCase{"1e2 in the body equals 100", `{"n":100}`, `{"n":1e2}`, true},
		matchCase{"100 in the body equals 1e2", `{"n":1e2}`, `{"n":100.000}`, true},
		matchCase{"$gte across notations", `{"n":{"$gte":1E2}}`, `{"n":10e1}`, true})
	add(both("100.0 equals 1e2", `{"data":{"score":100.0}}`, true)...)
	add(both("number vs string: no coercion", `{"data":{"budget":"250"}}`, false)...)
	add(both("string vs number: no coercion", `{"data":{"zip":1234}}`, false)...)
	add(both("bool vs number: no coercion", `{"data":{"optIn":1}}`, false)...)
	add(both("nested {} wants an object", `{"data":{"nested":{}}}`, true)...)
	add(both("nested {} refuses a scalar", `{"data":{"country":{}}}`, false)...)
	add(both("object pattern against a scalar", `{"data":{"country":{"code":"DE"}}}`, false)...)
	add(both("scalar pattern against an object", `{"data":{"nested":"deep"}}`, false)...)
	add(matchCase{"empty filter, A", `{}`, bodyA, true}, matchCase{"empty filter, B", `{}`, bodyB, true},
		matchCase{"empty filter, empty body", `{}`, `{}`, true})

	// Absent keys and null.
	add(both("absent key fails an exact match", `{"data":{"missing":"x"}}`, false)...)
	add(both("absent key fails null", `{"data":{"missing":null}}`, false)...)
	add(both("null matches null", `{"data":{"ref":null}}`, true)...)
	add(both("$eq null matches null", `{"data":{"ref":{"$eq":null}}}`, true)...)
	add(both("$neq null on null", `{"data":{"ref":{"$neq":null}}}`, false)...)
	add(both("$neq null on a value", `{"data":{"country":{"$neq":null}}}`, true)...)
	add(both("$neq on an absent key", `{"data":{"missing":{"$neq":"x"}}}`, false)...)
	add(both("$not $eq on an absent key", `{"data":{"missing":{"$not":{"$eq":"x"}}}}`, true)...)
	add(both("$nin on an absent key", `{"data":{"missing":{"$nin":["x"]}}}`, false)...)
	add(both("$gt on an absent key", `{"data":{"missing":{"$gt":0}}}`, false)...)
	add(both("$gt on null", `{"data":{"ref":{"$gt":0}}}`, false)...)
	add(both("$startsWith on null", `{"data":{"ref":{"$startsWith":""}}}`, false)...)
	add(both("$exist true on null", `{"data":{"ref":{"$exist":true}}}`, true)...)
	add(both("$exist true on absent", `{"data":{"missing":{"$exist":true}}}`, false)...)
	add(both("$exist false on absent", `{"data":{"missing":{"$exist":false}}}`, true)...)
	add(both("$exist false on present", `{"data":{"country":{"$exist":false}}}`, false)...)
	add(both("$exist false under an absent object", `{"data":{"missing":{"x":{"$exist":false}}}}`, false)...)
	add(both("$not of a nested $exist under an absent object", `{"$not":{"data":{"missing":{"x":{"$exist":true}}}}}`, true)...)
	add(both("$exist with a comparison", `{"data":{"budget":{"$exist":true,"$gte":100}}}`, true)...)

	// Comparisons.
	add(both("$eq string", `{"data":{"country":{"$eq":"DE"}}}`, true)...)
	add(both("$eq number by value", `{"data":{"score":{"$eq":1e2}}}`, true)...)
	add(both("$eq object deep, any key order", `{"data":{"nested":{"$eq":{"a":{"b":{"c":"deep"}}}}}}`, true)...)
	add(both("$eq object deep differs", `{"data":{"nested":{"$eq":{"a":{}}}}}`, false)...)
	add(both("$eq whole array in order", `{"data":{"tags":{"$eq":["vip","beta"]}}}`, true)...)
	add(both("$eq whole array out of order", `{"data":{"tags":{"$eq":["beta","vip"]}}}`, false)...)
	add(both("$eq element of an array", `{"data":{"tags":{"$eq":"beta"}}}`, true)...)
	add(both("$neq string", `{"data":{"country":{"$neq":"FR"}}}`, true)...)
	add(both("$neq same string", `{"data":{"country":{"$neq":"DE"}}}`, false)...)
	add(both("$neq on an array: no element equals", `{"data":{"tags":{"$neq":"vip"}}}`, false)...)
	add(both("$neq on an array: none equals", `{"data":{"tags":{"$neq":"gold"}}}`, true)...)
	add(both("$neq type mismatch is not equal", `{"data":{"budget":{"$neq":"250"}}}`, true)...)
	add(both("$gt number", `{"data":{"budget":{"$gt":249}}}`, true)...)
	add(both("$gt equal number", `{"data":{"budget":{"$gt":250}}}`, false)...)
	add(both("$gte equal number", `{"data":{"budget":{"$gte":250}}}`, true)...)
	add(both("$gte exponent operand", `{"data":{"budget":{"$gte":2.5e2}}}`, true)...)
	add(both("$lt number", `{"data":{"budget":{"$lt":250.5}}}`, true)...)
	add(both("$lte number", `{"data":{"ratio":{"$lte":0.5}}}`, true)...)
	add(both("$lt negative", `{"data":{"budget":{"$lt":-1}}}`, false)...)
	add(both("range AND in one object", `{"data":{"budget":{"$gte":100,"$lt":500}}}`, true)...)
	add(both("range AND fails", `{"data":{"budget":{"$gte":300,"$lt":500}}}`, false)...)
	add(both("$gt number against a string: no match", `{"data":{"country":{"$gt":5}}}`, false)...)
	add(both("$gt string against a number: no match", `{"data":{"budget":{"$gt":"1"}}}`, false)...)
	add(both("$gt strings by code point", `{"data":{"country":{"$gt":"CZ"}}}`, true)...)
	add(both("$lt strings by code point", `{"data":{"country":{"$lt":"DA"}}}`, false)...)
	add(both("$gt on a bool", `{"data":{"optIn":{"$gt":0}}}`, false)...)
	add(both("$gt on an array: one element", `{"data":{"matrix":{"$gt":2}}}`, true)...)
	add(both("range needs one element, not two", `{"data":{"items":{"qty":{"$gt":0,"$lt":1}}}}`, false)...)
	add(both("range within one element", `{"data":{"matrix":{"$gte":2,"$lte":2}}}`, true)...)

	// Membership and strings.
	add(both("$in array", `{"data":{"country":{"$in":["FR","DE"]}}}`, true)...)
	add(both("$in array without it", `{"data":{"country":{"$in":["FR","IT"]}}}`, false)...)
	add(both("$in array numbers by value", `{"data":{"budget":{"$in":[2.5e2,7]}}}`, true)...)
	add(both("$in array against an array body", `{"data":{"tags":{"$in":["gold","beta"]}}}`, true)...)
	add(both("$in empty array", `{"data":{"country":{"$in":[]}}}`, false)...)
	add(both("$in substring", `{"data":{"email":{"$in":"@example."}}}`, true)...)
	add(both("$in substring absent", `{"data":{"email":{"$in":"@corp."}}}`, false)...)
	add(both("$in substring against a number", `{"data":{"budget":{"$in":"25"}}}`, false)...)
	add(both("$in substring in an array element", `{"data":{"tags":{"$in":"ip"}}}`, true)...)
	add(both("$nin array", `{"data":{"country":{"$nin":["FR","IT"]}}}`, true)...)
	add(both("$nin array holding it", `{"data":{"country":{"$nin":["DE"]}}}`, false)...)
	add(both("$nin against an array body: none in", `{"data":{"tags":{"$nin":["gold"]}}}`, true)...)
	add(both("$nin against an array body: one in", `{"data":{"tags":{"$nin":["beta"]}}}`, false)...)
	add(both("$nin substring", `{"data":{"email":{"$nin":"@corp."}}}`, true)...)
	add(both("$startsWith", `{"data":{"email":{"$startsWith":"fan@"}}}`, true)...)
	add(both("$startsWith fails", `{"data":{"email":{"$startsWith":"Fan@"}}}`, false)...)
	add(both("$startsWith empty prefix", `{"data":{"email":{"$startsWith":""}}}`, true)...)
	add(both("$startsWith on a number", `{"data":{"budget":{"$startsWith":"2"}}}`, false)...)
	add(both("$endsWith", `{"data":{"email":{"$endsWith":"@example.com"}}}`, true)...)
	add(both("$endsWith fails", `{"data":{"email":{"$endsWith":".org"}}}`, false)...)
	add(both("$startsWith on an array element", `{"data":{"tags":{"$startsWith":"be"}}}`, true)...)
	add(both("leading zero stays a string", `{"data":{"zip":{"$startsWith":"0"}}}`, true)...)

	// Arrays in the body.
	add(both("array contains a scalar", `{"data":{"tags":"vip"}}`, true)...)
	add(both("array lacks a scalar", `{"data":{"tags":"gold"}}`, false)...)
	add(both("array contains all listed", `{"data":{"tags":["beta","vip"]}}`, true)...)
	add(both("array lacks one listed", `{"data":{"tags":["vip","gold"]}}`, false)...)
	add(both("empty list matches any array", `{"data":{"empty":[]}}`, true)...)
	add(both("a list does not match a scalar", `{"data":{"country":["DE"]}}`, false)...)
	add(both("empty array contains nothing", `{"data":{"empty":"x"}}`, false)...)
	add(both("array of objects: one element matches", `{"data":{"items":{"id":5}}}`, true)...)
	add(both("array of objects: keys in one element", `{"data":{"items":{"id":5,"qty":0}}}`, true)...)
	add(both("array of objects: keys across elements", `{"data":{"items":{"id":5,"qty":2}}}`, false)...)
	add(both("array of objects with an operator", `{"data":{"items":{"qty":{"$gte":2}}}}`, true)...)
	add(both("list of patterns", `{"data":{"items":[{"id":1},{"qty":0}]}}`, true)...)
	add(both("nested arrays are searched", `{"data":{"matrix":3}}`, true)...)
	add(both("nested arrays: absent value", `{"data":{"matrix":4}}`, false)...)
	add(both("nested arrays: a listed row", `{"data":{"matrix":{"$eq":[1,2]}}}`, true)...)

	// Logic.
	add(both("$or one branch", `{"$or":[{"data":{"country":"FR"}},{"data":{"budget":{"$gt":100}}}]}`, true)...)
	add(both("$or no branch", `{"$or":[{"data":{"country":"FR"}},{"data":{"budget":{"$gt":1000}}}]}`, false)...)
	add(both("$or of values under a key", `{"data":{"country":{"$or":["FR","DE"]}}}`, true)...)
	add(both("$or beside keys", `{"data":{"optIn":true,"$or":[{"country":"FR"},{"country":"DE"}]}}`, true)...)
	add(both("$or beside a failing key", `{"data":{"optIn":false,"$or":[{"country":"FR"},{"country":"DE"}]}}`, false)...)
	add(both("$and all", `{"$and":[{"data":{"country":"DE"}},{"data":{"budget":{"$gte":100}}}]}`, true)...)
	add(both("$and one fails", `{"$and":[{"data":{"country":"DE"}},{"data":{"budget":{"$gte":1000}}}]}`, false)...)
	add(both("$not at the top", `{"$not":{"data":{"country":"FR"}}}`, true)...)
	add(both("$not at the top, matching inner", `{"$not":{"data":{"country":"DE"}}}`, false)...)
	add(both("$not of an operator", `{"data":{"country":{"$not":{"$in":["FR","IT"]}}}}`, true)...)
	add(both("$not of a value", `{"data":{"country":{"$not":"DE"}}}`, false)...)
	add(both("$not $not", `{"data":{"country":{"$not":{"$not":"DE"}}}}`, true)...)
	add(both("$not on an array: no element", `{"data":{"tags":{"$not":"vip"}}}`, false)...)
	add(both("$or in $and in $or", `{"$or":[{"data":{"country":"FR"}},{"$and":[{"data":{"optIn":true}},{"$or":[{"data":{"budget":1}},{"data":{"budget":250}}]}]}]}`, true)...)
	add(both("$not equals moving the key out", `{"$not":{"data":{"missing":{"$eq":1}}}}`, true)...)
	add(both("body key beginning with $ cannot be matched, but $exist of its parent can", `{"data":{"$exist":true}}`, true)...)

	// Bodies that are not the delivery shapes: Match still answers.
	add(matchCase{"a scalar body", `{"data":1}`, `5`, false},
		matchCase{"an array body of objects", `{"a":1}`, `[{"a":2},{"a":1}]`, true},
		matchCase{"a huge number reads as Infinity", `{"n":{"$gt":1.7976931348623157e308}}`, `{"n":1e999}`, true},
		matchCase{"beyond 2^53 reads as its double", `{"n":9007199254740992}`, `{"n":9007199254740993}`, true},
		matchCase{"negative zero equals zero", `{"n":0}`, `{"n":-0.0}`, true},
	)
	return cs
}

func TestMatchTable(t *testing.T) {
	cases := matchCases()
	if len(cases) < 100 {
		t.Fatalf("the table has %d cases; it must keep at least 100", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := filter.Compile([]byte(c.filter))
			if err != nil {
				t.Fatalf("Compile(%s): %v", c.filter, err)
			}
			body, err := filter.DecodeBody([]byte(c.body))
			if err != nil {
				t.Fatalf("DecodeBody: %v", err)
			}
			if got := f.Match(body); got != c.want {
				t.Errorf("filter %s on %s: Match = %v, want %v", c.filter, c.body, got, c.want)
			}
			// The stored form must judge alike.
			again, err := filter.Compile([]byte(f.String()))
			if err != nil {
				t.Fatalf("Compile(String()) = %v", err)
			}
			if got := again.Match(body); got != c.want {
				t.Errorf("recompiled %s: Match = %v, want %v", f.String(), got, c.want)
			}
		})
	}
	t.Logf("%d cases", len(cases))
}

func TestCompileErrors(t *testing.T) {
	deep := strings.Repeat(`{"a":`, filter.MaxDepth) + "1" + strings.Repeat("}", filter.MaxDepth)
	tooDeep := strings.Repeat(`{"a":`, filter.MaxDepth) + "[1]" + strings.Repeat("}", filter.MaxDepth)
	big := `{"data":{"s":"` + strings.Repeat("x", filter.MaxBytes) + `"}}`
	cases := []struct {
		name, filter string
		path         string
		limit        bool
	}{
		{"too big", big, "filter", true},
		{"too deep", tooDeep, "filter.a.a.a.a.a.a.a.a.a.a", true},
		{"too deep in an operand", `{"data":{"x":{"$eq":` + strings.Repeat("[", 9) + strings.Repeat("]", 9) + `}}}`, "filter.data.x.$eq.0.0.0.0.0.0.0", true},
		{"not JSON", `{"data":`, "filter", false},
		{"trailing data", `{} {}`, "filter", false},
		{"trailing garbage", `{}x`, "filter", false},
		{"array", `[{"a":1}]`, "filter", false},
		{"string", `"x"`, "filter", false},
		{"null", `null`, "filter", false},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "filter", false},
		{"number out of range", `{"data":{"n":1e400}}`, "filter.data.n", false},
		{"duplicate key", `{"data":{"a":1,"a":2}}`, "filter.data.a", false},
		{"duplicate operator", `{"data":{"a":{"$gt":1,"$gt":2}}}`, "filter.data.a.$gt", false},
		{"unknown operator", `{"data":{"budget":{"$gtt":1}}}`, "filter.data.budget.$gtt", false},
		{"unknown operator, Mongo's $ne", `{"data":{"budget":{"$ne":1}}}`, "filter.data.budget.$ne", false},
		{"unknown operator, Mongo's $exists", `{"data":{"x":{"$exists":true}}}`, "filter.data.x.$exists", false},
		{"unknown operator at the top", `{"$where":"1"}`, "filter.$where", false},
		{"$ref is not supported", `{"data":{"a":{"$ref":"b"}}}`, "filter.data.a.$ref", false},
		{"comparison at the top", `{"$gt":5}`, "filter.$gt", false},
		{"$exist at the top", `{"$exist":true}`, "filter.$exist", false},
		{"comparison at the top of $or", `{"$or":[{"$eq":1}]}`, "filter.$or.0.$eq", false},
		{"scalar at the top of $or", `{"$or":[1]}`, "filter.$or.0", false},
		{"scalar under $not at the top", `{"$not":1}`, "filter.$not", false},
		{"comparison beside keys", `{"data":{"a":1,"$gt":5}}`, "filter.data.$gt", false},
		{"comparison before keys", `{"data":{"$in":[1],"a":1}}`, "filter.data.$in", false},
		{"$gte wants a number or string", `{"data":{"budget":{"$gte":{}}}}`, "filter.data.budget.$gte", false},
		{"$lt wants a number or string, not bool", `{"data":{"budget":{"$lt":true}}}`, "filter.data.budget.$lt", false},
		{"$gt wants a number or string, not null", `{"data":{"budget":{"$gt":null}}}`, "filter.data.budget.$gt", false},
		{"$in wants an array or string", `{"data":{"a":{"$in":5}}}`, "filter.data.a.$in", false},
		{"$nin wants an array or string", `{"data":{"a":{"$nin":{}}}}`, "filter.data.a.$nin", false},
		{"$startsWith wants a string", `{"data":{"a":{"$startsWith":1}}}`, "filter.data.a.$startsWith", false},
		{"$endsWith wants a string", `{"data":{"a":{"$endsWith":["x"]}}}`, "filter.data.a.$endsWith", false},
		{"$exist wants a boolean", `{"data":{"a":{"$exist":"yes"}}}`, "filter.data.a.$exist", false},
		{"$or wants an array", `{"$or":{"a":1}}`, "filter.$or", false},
		{"$or wants a non-empty array", `{"$or":[]}`, "filter.$or", false},
		{"$and wants a non-empty array", `{"data":{"$and":[]}}`, "filter.data.$and", false},
		{"fault inside $and", `{"$and":[{"a":1},{"b":{"$bad":1}}]}`, "filter.$and.1.b.$bad", false},
		{"fault inside a literal list", `{"data":{"tags":["a",{"$x":1}]}}`, "filter.data.tags.1.$x", false},
		{"fault inside $not", `{"data":{"a":{"$not":{"$gt":[]}}}}`, "filter.data.a.$not.$gt", false},
	}
	if _, err := filter.Compile([]byte(deep)); err != nil {
		t.Fatalf("a filter exactly %d deep is refused: %v", filter.MaxDepth, err)
	}
	exact := `{"data":{"s":"` + strings.Repeat("x", filter.MaxBytes-len(`{"data":{"s":""}}`)) + `"}}`
	if _, err := filter.Compile([]byte(exact)); err != nil || len(exact) != filter.MaxBytes {
		t.Fatalf("a filter of exactly %d bytes (%d) is refused: %v", filter.MaxBytes, len(exact), err)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := filter.Compile([]byte(c.filter))
			var fe *filter.Error
			if !errors.As(err, &fe) {
				t.Fatalf("Compile(%.80s) = %v, %v; want a *filter.Error", c.filter, f, err)
			}
			if fe.Path != c.path || fe.Limit != c.limit {
				t.Errorf("Compile(%.80s): Path %q Limit %v (%v); want Path %q Limit %v", c.filter, fe.Path, fe.Limit, fe.Reason, c.path, c.limit)
			}
			if fe.Reason == "" || fe.Error() != fe.Path+": "+fe.Reason {
				t.Errorf("Error() = %q, Reason %q", fe.Error(), fe.Reason)
			}
		})
	}
}

// TestString holds the stored form to wire's canonical JSON and to a fixed point: what is shown
// compiles to itself.
func TestString(t *testing.T) {
	cases := []struct{ in, want string }{
		{`{}`, `{}`},
		{` { "data" : { "budget" : { "$gte" : 1e2 } } } `, `{"data":{"budget":{"$gte":100}}}`},
		{`{"b":1,"a":2,"2":3,"1":4}`, `{"1":4,"2":3,"b":1,"a":2}`},
		{`{"s":"\u00e9\/"}`, `{"s":"é/"}`},
		{`{"$or":[{"x":1.50},{"y":-0}]}`, `{"$or":[{"x":1.5},{"y":0}]}`},
	}
	for _, c := range cases {
		f, err := filter.Compile([]byte(c.in))
		if err != nil {
			t.Fatalf("Compile(%s): %v", c.in, err)
		}
		if f.String() != c.want {
			t.Errorf("Compile(%s).String() = %s, want %s", c.in, f.String(), c.want)
		}
		again, err := filter.Compile([]byte(f.String()))
		if err != nil || again.String() != f.String() {
			t.Errorf("Compile(String()) = %v, %v; want %s", again, err, f.String())
		}
	}
}

func TestDecodeBody(t *testing.T) {
	v, err := filter.DecodeBody([]byte(`{"n":1e2}`))
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := v.(map[string]any)["n"].(json.Number); !ok || n != "1e2" {
		t.Errorf("DecodeBody kept n as %#v, want json.Number(1e2)", v.(map[string]any)["n"])
	}
	for _, bad := range []string{``, `{`, `{} x`, `{}{}`} {
		if _, err := filter.DecodeBody([]byte(bad)); err == nil {
			t.Errorf("DecodeBody(%q) = nil error", bad)
		}
	}
}

// TestMatchOtherShapes: Match takes any value, not only DecodeBody's, and never panics on one.
func TestMatchOtherShapes(t *testing.T) {
	f, err := filter.Compile([]byte(`{"n":{"$gte":2},"s":{"$startsWith":"a"},"o":{"$eq":{"k":[1]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ok := map[string]any{"n": 2.0, "s": "ab", "o": map[string]any{"k": []any{int64(1)}}}
	if !f.Match(ok) {
		t.Errorf("Match(%v) = false", ok)
	}
	for _, body := range []any{nil, 1, "x", []any{}, map[string]any{}, struct{}{}, map[string]any{"n": int(3), "s": "a", "o": map[string]any{"k": []int{1}}},
		map[string]any{"n": json.Number("x"), "s": "a", "o": nil}, []any{nil, []any{map[string]any{}}}} {
		if f.Match(body) {
			t.Errorf("Match(%#v) = true", body)
		}
	}
}

func TestCached(t *testing.T) {
	text := `{"data":{"cachedTest":true}}`
	var wg sync.WaitGroup
	got := make([]*filter.Filter, 8)
	for i := range got {
		wg.Go(func() {
			f, err := filter.Cached(text)
			if err != nil {
				t.Error(err)
			}
			got[i] = f
		})
	}
	wg.Wait()
	for i := range got {
		if got[i] == nil || got[i] != got[0] {
			t.Fatalf("Cached gave different filters for one text: %p and %p", got[0], got[i])
		}
	}
	if _, err := filter.Cached(`{"$bad":1}`); err == nil {
		t.Error("Cached compiled a bad filter")
	}
	// Beyond the bound, the cache evicts instead of growing; every answer stays right.
	for i := range 10_050 {
		f, err := filter.Cached(fmt.Sprintf(`{"n":%d}`, i))
		if err != nil || !f.Match(map[string]any{"n": json.Number(fmt.Sprint(i))}) {
			t.Fatalf("Cached(%d) = %v, %v", i, f, err)
		}
	}
}
