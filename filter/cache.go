package filter

import "sync"

// cacheSize bounds Cached: 10,000 filters of at most MaxBytes each stay well under 100 MB even in
// the worst case, and an account rarely has more than a few filters.
const cacheSize = 10_000

// cache is the one process-wide table behind Cached. It is package state on purpose: a filter's
// stored text fully determines its compiled form, so every caller, whatever its wiring, may share
// one compilation.
var cache = struct {
	sync.Mutex
	byText map[string]*Filter
}{byText: make(map[string]*Filter)}

// Cached compiles the stored canonical text of a filter once per process and returns the same
// *Filter after, so that the intake judges each event without parsing its webhooks' filters. It is
// bounded (cacheSize entries, evicting an arbitrary one when full, which costs only a recompile)
// and safe for concurrent use. A text that does not compile is not kept.
func Cached(text string) (*Filter, error) {
	cache.Lock()
	f, ok := cache.byText[text]
	cache.Unlock()
	if ok {
		return f, nil
	}
	// Compiled outside the lock: two callers may compile the same text at once, and the first
	// stored wins, so every later caller gets one *Filter.
	f, err := Compile([]byte(text))
	if err != nil {
		return nil, err
	}
	cache.Lock()
	defer cache.Unlock()
	if prev, ok := cache.byText[text]; ok {
		return prev, nil
	}
	if len(cache.byText) >= cacheSize {
		for k := range cache.byText {
			delete(cache.byText, k)
			break
		}
	}
	cache.byText[text] = f
	return f, nil
}
