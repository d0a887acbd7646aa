package filter_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/webhookd/webhookd/filter"
)

// costlyFilter is issue 40's filter: 4 KiB of 150 substring tests ($in with a string), none of which
// a run of "a" holds, so that each reads the whole run.
func costlyFilter(t testing.TB, tag int) *filter.Filter {
	t.Helper()
	tests := make([]string, 150)
	for j := range tests {
		tests[j] = fmt.Sprintf(`{"$in":"%s%c%03d"}`, strings.Repeat("a", 12), 'b'+rune(j%20), tag)
	}
	f, err := filter.Compile([]byte(`{"data":{"notes":{"$or":[` + strings.Join(tests, ",") + `]}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// runBody is a body whose data holds a 250 KiB run of one letter, the costly case of a substring
// test.
func runBody(t testing.TB) (any, int) {
	t.Helper()
	run := strings.Repeat("a", 250<<10)
	body, err := filter.DecodeBody([]byte(`{"event":"lead.captured","timestamp":"2026-11-27T16:00:00Z","data":{"notes":"` + run + `"}}`))
	if err != nil {
		t.Fatal(err)
	}
	return body, len(run)
}

// TestMatchBudget (issue 40): a string test costs the bytes it reads, so the costly filter against
// a long run of one letter stops at MatchBudget instead of reading the run 150 times, and the event
// passes; an ordinary filter is far from the budget. Asserted on the count of steps, never the clock.
func TestMatchBudget(t *testing.T) {
	body, runLen := runBody(t)
	costly := costlyFilter(t, 0)

	// Unbounded, the count is honest: every test reads the whole run.
	if ok, steps := filter.MatchSteps(costly, body); ok || steps < 150*runLen {
		t.Fatalf("without a budget: match %v in %d steps; want no match, in at least 150 runs' bytes (%d)", ok, steps, 150*runLen)
	}
	verdict, steps := filter.JudgeSteps(costly, body, filter.MatchBudget)
	if verdict != filter.Overrun || steps > filter.MatchBudget {
		t.Fatalf("within MatchBudget (%d): %v in %d steps; want Overrun, at most the budget", filter.MatchBudget, verdict, steps)
	}
	if !costly.Match(body) {
		t.Error("Match refused the event on a filter that ran out of its budget; an unjudged event passes")
	}

	// The same body against an ordinary filter, and the largest ordinary body against a filter
	// with a few string tests: a small share of the budget.
	for _, c := range []struct{ name, filter string }{
		{"keys and a substring", `{"event":"lead.captured","data":{"notes":{"$startsWith":"aa","$endsWith":"a"}}}`},
		{"two substring tests of the whole run", `{"data":{"notes":{"$in":"aaa","$not":{"$in":"c"}},"$or":[{"notes":{"$startsWith":"d"}},{"notes":{"$endsWith":"aa"}}]}}`},
	} {
		f, err := filter.Compile([]byte(c.filter))
		if err != nil {
			t.Fatal(err)
		}
		verdict, steps := filter.JudgeSteps(f, body, filter.MatchBudget)
		t.Logf("%s: %v in %d steps", c.name, verdict, steps)
		if verdict == filter.Overrun || steps > filter.MatchBudget/2 {
			t.Errorf("%s: %v in %d steps; an ordinary filter stays under half of MatchBudget (%d)", c.name, verdict, steps, filter.MatchBudget)
		}
	}
}

// TestMatchBudgetStopsEveryShape: whatever the shape that spends the budget (nested logic over
// arrays, deep equality, instants read from long strings), matching stops at the budget with
// Overrun, and with a budget just large enough it gives the unbounded answer.
func TestMatchBudgetStopsEveryShape(t *testing.T) {
	items := make([]string, 2000)
	for i := range items {
		items[i] = fmt.Sprintf(`{"id":%d,"tag":"t%d","when":"2026-11-27T16:00:00Z%s"}`, i, i, strings.Repeat("x", 100))
	}
	body, err := filter.DecodeBody([]byte(`{"data":{"items":[` + strings.Join(items, ",") + `]}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{
		`{"$or":[{"data":{"items":{"id":-1}}},{"data":{"items":{"tag":{"$in":["x","y"]}}}},{"$not":{"data":{"items":{"id":{"$gte":5000}}}}}]}`,
		`{"data":{"items":{"$eq":{"id":1,"tag":"t2"}}}}`,
		`{"data":{"items":{"when":{"$gt":"2027-01-01T00:00:00Z"}}}}`,
		`{"data":{"items":[{"id":1},{"tag":"t3"},{"id":-5}]}}`,
	} {
		f, err := filter.Compile([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		want, full := filter.MatchSteps(f, body)
		for _, budget := range []int{0, 1, full / 3, full - 1} {
			if v, steps := filter.JudgeSteps(f, body, budget); v != filter.Overrun || steps > budget {
				t.Errorf("%s within %d of its %d steps: %v in %d steps; want Overrun within the budget", text, budget, full, v, steps)
			}
		}
		v, steps := filter.JudgeSteps(f, body, full)
		if steps != full || (v == filter.Pass) != want || v == filter.Overrun {
			t.Errorf("%s within exactly its %d steps: %v in %d; want match %v", text, full, v, steps, want)
		}
		if _, steps := filter.JudgeSteps(f, body, math.MaxInt); steps != full {
			t.Errorf("%s: %d steps, then %d: the count is not deterministic", text, full, steps)
		}
	}
}

// TestVerdicts: the filters of one publish share PublishBudget, so a hundred costly filters cost no
// more than the budget, each text is judged once per version and each version's body built once,
// and what webhookd cannot judge passes.
func TestVerdicts(t *testing.T) {
	body, _ := runBody(t)
	built := map[int]int{}
	vs := filter.NewVerdicts(func(version int) (any, error) {
		built[version]++
		if version == 9 {
			return nil, fmt.Errorf("no version %d", version)
		}
		return body, nil
	})

	overruns := 0
	for i := range 100 {
		if v := vs.Of(costlyFilter(t, i).String(), 1); v != filter.Overrun {
			t.Fatalf("costly filter %d: %v, want Overrun", i, v)
		}
		overruns++
		if vs.Spent() > filter.PublishBudget {
			t.Fatalf("after %d costly filters, %d steps: beyond PublishBudget (%d)", overruns, vs.Spent(), filter.PublishBudget)
		}
	}
	if vs.Spent() != filter.PublishBudget {
		t.Errorf("100 costly filters spent %d steps; want the whole PublishBudget, %d", vs.Spent(), filter.PublishBudget)
	}
	// Spent, the budget judges nothing more: an ordinary filter is not judged either, and passes
	// unjudged.
	if v := vs.Of(`{"data":{"notes":{"$startsWith":"b"}}}`, 1); v != filter.Overrun {
		t.Errorf("an ordinary filter after the budget is spent: %v, want Overrun", v)
	}

	fresh := filter.NewVerdicts(func(version int) (any, error) {
		built[version]++
		return body, nil
	})
	clear(built)
	refusing := `{"data":{"notes":{"$startsWith":"b"}}}`
	if v := fresh.Of(refusing, 1); v != filter.Refuse {
		t.Fatalf("a refusing filter: %v", v)
	}
	spent := fresh.Spent()
	if v := fresh.Of(refusing, 1); v != filter.Refuse || fresh.Spent() != spent {
		t.Errorf("the same text again: %v, %d steps after %d; want the same verdict for nothing", v, fresh.Spent(), spent)
	}
	if v := fresh.Of(`{"data":{"notes":{"$startsWith":"a"}}}`, 1); v != filter.Pass {
		t.Errorf("a passing filter: %v", v)
	}
	if v := fresh.Of(refusing, 2); v != filter.Refuse || built[1] != 1 || built[2] != 1 {
		t.Errorf("another version: %v, bodies built %v; want each version's once", v, built)
	}
	if v := fresh.Of(`{"$nope":1}`, 1); v != filter.Pass {
		t.Errorf("a stored filter that does not compile: %v, want Pass", v)
	}
	if v := vs.Of(`{"data":{"x":1}}`, 9); v != filter.Overrun {
		t.Errorf("after the budget, a body that cannot be built: %v, want Overrun (nothing judged)", v)
	}
	broken := filter.NewVerdicts(func(int) (any, error) { return nil, fmt.Errorf("cannot convert") })
	if v := broken.Of(`{"data":{"x":1}}`, 1); v != filter.Pass {
		t.Errorf("a body that cannot be built: %v, want Pass", v)
	}
}
