package filter

// What a filter may cost (docs/filters.md, "What a filter may cost"). Matching is linear in the
// filter's size times the body's, but both may be large: a 4 KiB filter of 150 substring tests read
// a 250 KiB string 150 times, 1.3 s of CPU for a publish to 100 such webhooks (issue 40). So the
// work of a match is counted in steps (eval: one per node or test applied to a value of the body,
// one per byte a test reads) and bounded twice: each match by MatchBudget, and all the matches of
// one publish together by PublishBudget, which bounds the CPU that filters can add to a publish
// whatever its webhooks hold. Ordinary filters take a few hundred steps (TestMatchBudget,
// BenchmarkPublishFilters); BenchmarkPublishBudget measures the CPU of the costliest steps.
const (
	// MatchBudget bounds one filter on one body: 1 Mi steps, four reads of the largest event.
	MatchBudget = 1 << 20
	// PublishBudget bounds the filters of one event's webhooks together: 4 Mi steps, at most about
	// 35 ms of CPU on the machine of docs/filters.md whatever the steps are, 1.6 ms of issue 40's.
	PublishBudget = 1 << 22
)

// Verdict is what a filter decided about one body.
type Verdict uint8

const (
	// Pass: the body matches, or webhookd cannot judge (the stored filter does not compile, the
	// body cannot be built). The zero Verdict, so that nothing refuses by default.
	Pass Verdict = iota
	// Refuse: the body does not match; the webhook gets no delivery.
	Refuse
	// Overrun: the budget ran out before the filter answered. The event passes, as it does when
	// webhookd cannot judge: an event is never lost to a filter webhookd did not finish, and a
	// filter can then never cost more deliveries than no filter.
	Overrun
)

// String names the verdict, for tests and logs.
func (v Verdict) String() string {
	switch v {
	case Pass:
		return "pass"
	case Refuse:
		return "refuse"
	}
	return "overrun"
}

// Verdicts are the verdicts of the filters of one event's webhooks: each filter text judged once
// on the body of each version of the event it is asked about (one webhook or a hundred holding
// that text, the answer is the same), all of them within PublishBudget. The intake judges them
// before its transaction and then asks again in it, where only a filter new since costs anything.
// A Verdicts is not safe for concurrent use.
type Verdicts struct {
	body   func(version int) (any, error)
	bodies map[int]decoded
	known  map[judged]Verdict
	left   int
}

type decoded struct {
	body any
	err  error
}

type judged struct {
	text    string
	version int
}

// NewVerdicts judges filters on the bodies that body builds: the event's delivery body as the
// receivers of that version get it (DecodeBody's value), built once per version, when a filter
// first needs it.
func NewVerdicts(body func(version int) (any, error)) *Verdicts {
	return &Verdicts{body: body, bodies: map[int]decoded{}, known: map[judged]Verdict{}, left: PublishBudget}
}

// Of is the verdict of the filter whose stored text is text on the body of version.
func (vs *Verdicts) Of(text string, version int) Verdict {
	k := judged{text, version}
	v, ok := vs.known[k]
	if !ok {
		v = vs.judge(text, version)
		vs.known[k] = v
	}
	return v
}

// Spent is the steps the verdicts took so far, at most PublishBudget.
func (vs *Verdicts) Spent() int { return PublishBudget - vs.left }

func (vs *Verdicts) judge(text string, version int) Verdict {
	f, err := Cached(text)
	if err != nil {
		return Pass
	}
	if vs.left == 0 {
		return Overrun
	}
	d, ok := vs.bodies[version]
	if !ok {
		d.body, d.err = vs.body(version)
		vs.bodies[version] = d
	}
	if d.err != nil {
		return Pass
	}
	v, steps := f.judge(d.body, min(MatchBudget, vs.left))
	vs.left -= steps
	return v
}
