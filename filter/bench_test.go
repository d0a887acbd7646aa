package filter_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/filter"
	"github.com/webhookd/webhookd/internal/proccpu"
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

// BenchmarkPublishBudget is the CPU that PublishBudget stands for (cpu-ms/op, the process's CPU
// time per op, and cpu-ns/step): one op is a publish to 100
// webhooks whose filters (each its own text) spend the whole budget, for each kind of step that
// costs the most CPU: substring tests that read a long run of one letter (issue 40's filter), the
// same with operands longer than 64 bytes (Go searches those with Rabin-Karp), instants read from
// long strings that begin like one, and nodes (an $or of keys over an array of 20,000 objects).
func BenchmarkPublishBudget(b *testing.B) {
	items := make([]string, 20_000)
	for i := range items {
		items[i] = fmt.Sprintf(`{"id":%d,"tag":"t"}`, i)
	}
	instants := make([]string, 250)
	for i := range instants {
		instants[i] = `"2026-01-01T00:00:00Z` + strings.Repeat("x", 1<<10) + `"`
	}
	body, err := filter.DecodeBody([]byte(`{"data":{"notes":"` + strings.Repeat("a", 250<<10) + `","items":[` + strings.Join(items, ",") +
		`],"when":[` + strings.Join(instants, ",") + `]}}`))
	if err != nil {
		b.Fatal(err)
	}
	shapes := []struct {
		name string
		text func(i int) string
	}{
		{"substring", func(i int) string { return costlyFilter(b, i).String() }},
		{"long-substring", func(i int) string {
			tests := make([]string, 30)
			for j := range tests {
				tests[j] = fmt.Sprintf(`{"$in":"%s%c%03d"}`, strings.Repeat("a", 100), 'b'+rune(j%20), i)
			}
			return `{"data":{"notes":{"$or":[` + strings.Join(tests, ",") + `]}}}`
		}},
		{"instants", func(i int) string {
			tests := make([]string, 100)
			for j := range tests {
				tests[j] = fmt.Sprintf(`{"$gt":"2027-01-01T00:%02d:%02dZ"}`, j%60, i%60)
			}
			return `{"data":{"when":{"$or":[` + strings.Join(tests, ",") + `]}}}`
		}},
		{"nodes", func(i int) string {
			branches := make([]string, 30)
			for j := range branches {
				branches[j] = fmt.Sprintf(`{"data":{"items":{"id":{"$gte":%d},"tag":{"$in":["x","y"]}}}}`, 1_000_000+100*i+j)
			}
			return `{"$or":[` + strings.Join(branches, ",") + `]}`
		}},
	}
	for _, shape := range shapes {
		texts := make([]string, 100)
		for i := range texts {
			texts[i] = shape.text(i)
			if _, err := filter.Cached(texts[i]); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(shape.name, func(b *testing.B) {
			var spent int
			before := cpuTime(b)
			for b.Loop() {
				vs := filter.NewVerdicts(func(int) (any, error) { return body, nil })
				for _, text := range texts {
					vs.Of(text, 1)
				}
				spent = vs.Spent()
			}
			if spent != filter.PublishBudget {
				b.Fatalf("%d steps spent; the case must spend the whole budget, %d", spent, filter.PublishBudget)
			}
			cpu := cpuTime(b) - before
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(spent), "cpu-ns/step")
		})
	}
}

// cpuTime is the CPU time the process has used (proccpu.Self).
func cpuTime(b *testing.B) time.Duration {
	d, err := proccpu.Self()
	if err != nil {
		b.Fatal(err)
	}
	return d
}
