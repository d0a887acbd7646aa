package filter_test

import (
	"testing"

	"github.com/webhookd/webhookd/filter"
)

// BenchmarkMatch is the cost of judging one decoded delivery body, paid at intake once per filtered
// webhook of the event's type: a simple filter (two keys) and a nested $or over arrays.
func BenchmarkMatch(b *testing.B) {
	cases := []struct{ name, filter string }{
		{"simple", `{"data":{"country":"DE","budget":{"$gte":100}}}`},
		{"nested-or", `{"$or":[{"data":{"country":{"$in":["FR","IT"]}}},{"$and":[{"data":{"items":{"id":5,"qty":{"$lt":1}}}},` +
			`{"$or":[{"data":{"email":{"$endsWith":"@corp.example"}}},{"data":{"tags":["vip","beta"]}}]}]},{"timestamp":{"$gte":"2026-01-01T00:00:00Z"}}]}`},
	}
	body, err := filter.DecodeBody([]byte(bodyB))
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range cases {
		f, err := filter.Compile([]byte(c.filter))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if !f.Match(body) {
					b.Fatal("the benchmark's filter must match")
				}
			}
		})
	}
}
