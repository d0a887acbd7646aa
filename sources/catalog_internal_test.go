package sources

import (
	"maps"
	"slices"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestShapesAreTheVariantsTypes: the event types are named once, in model's variant table (what a
// webhook may subscribe to); this package has a shape for exactly those and the test event, and a
// description for exactly those, so a type added or dropped on one side fails here.
func TestShapesAreTheVariantsTypes(t *testing.T) {
	var subscribable []string
	for _, v := range model.Variants {
		subscribable = append(subscribable, v.EventTypes()...)
	}
	slices.Sort(subscribable)
	if got := slices.Sorted(maps.Keys(eventDescriptions)); !slices.Equal(got, subscribable) {
		t.Errorf("descriptions of %v, want %v", got, subscribable)
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(subscribable), model.EventTest)))
	if got := slices.Sorted(maps.Keys(eventData)); !slices.Equal(got, want) {
		t.Errorf("shapes of %v, want %v", got, want)
	}
}
