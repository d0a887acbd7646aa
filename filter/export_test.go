package filter

import "math"

// MatchSteps is Match without a budget, with its count of steps, for the tests that bound the work
// of evaluation.
func MatchSteps(f *Filter, body any) (bool, int) {
	v, steps := f.judge(body, math.MaxInt)
	return v == Pass, steps
}

// JudgeSteps is Match within budget steps: its verdict and the steps it took.
func JudgeSteps(f *Filter, body any, budget int) (Verdict, int) {
	return f.judge(body, budget)
}

// Size is the number of JSON values in the filter.
func (f *Filter) Size() int { return f.size }
