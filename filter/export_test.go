package filter

// MatchSteps is Match with its count of steps, for the tests that bound the work of evaluation.
func MatchSteps(f *Filter, body any) (bool, int) {
	var e eval
	ok := e.match(f.root, body, true)
	return ok, e.steps
}

// Size is the number of JSON values in the filter.
func (f *Filter) Size() int { return f.size }
