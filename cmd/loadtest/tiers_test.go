package main

import (
	"os"
	"testing"
	"time"

	"github.com/webhookd/webhookd/internal/temporaltest"
)

// TestMain runs the tests, or, re-executed by startPressure's test, a busy process.
func TestMain(m *testing.M) {
	if burnRequested(os.Args) {
		burn()
	}
	temporaltest.Main(m)
}

// TestTiersRounds: the report's (c)/(b) is the median round's, each round comparing its own (b) and
// (c), and the median CPU time is taken process by process.
func TestTiersRounds(t *testing.T) {
	tier := func(perSecond float64, webhookd, temporal float64) tierResult {
		return tierResult{n: int(perSecond), elapsed: time.Second, cpu: cpuCost{names: []string{"webhookd", "temporal"}, ms: []float64{webhookd, temporal}}}
	}
	r := tiersResult{
		raw: tier(5000, 0, 0), bareRegular: tier(70, 0, 12),
		bare: []tierResult{tier(200, 0, 5), tier(100, 0, 9), tier(200, 0, 6)},
		e2e:  []tierResult{tier(150, 2, 7), tier(90, 4, 11), tier(190, 3, 6)},
	}
	if got, want := formatRatios(r.ratios()), "0.75 0.90 0.95"; got != want {
		t.Errorf("ratios %s, want %s", got, want)
	}
	if got := r.ratio(); got != 0.90 {
		t.Errorf("median ratio %.2f, want 0.90", got)
	}
	if got, want := medianCost(r.e2e).String(), "webhookd 3.00, temporal 7.00 (all 10.00)"; got != want {
		t.Errorf("median cost %q, want %q", got, want)
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median of an even count %v, want 2.5", got)
	}
	if n := len(r.all()); n != 2+6 {
		t.Errorf("%d tiers reported, want (a), (b') and 3 rounds of (b) and (c)", n)
	}
	// -tiers c: only (c)'s rounds are reported, and no ratio.
	onlyC := tiersResult{bare: make([]tierResult, 3), e2e: r.e2e}
	if n := len(onlyC.all()); n != 3 {
		t.Errorf("%d tiers reported of a run of (c) alone, want its 3 rounds", n)
	}
	if got := onlyC.ratios(); len(got) != 0 {
		t.Errorf("a run of (c) alone has ratios %v", got)
	}
}

func TestParseTiers(t *testing.T) {
	s, err := parseTiers("b, c")
	if err != nil {
		t.Fatal(err)
	}
	if s.has("a") || s.has("b'") || !s.has("b") || !s.has("c") {
		t.Fatalf("parseTiers(\"b, c\") = %v", s)
	}
	if all, err := parseTiers(""); err != nil || !all.has("a") || !all.has("c") {
		t.Fatalf("no tiers named measures all of them: %v, %v", all, err)
	}
	if _, err := parseTiers("b,d"); err == nil {
		t.Fatal("an unknown tier was taken")
	}
}
