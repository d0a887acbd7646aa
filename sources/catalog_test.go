package sources_test

import (
	"slices"
	"testing"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
)

// TestEventCatalogExamplesPassIntake: the catalog lists exactly the types each variant may
// subscribe to, each with a description, and every example passes the validation intake applies,
// so the catalog and intake cannot drift.
func TestEventCatalogExamplesPassIntake(t *testing.T) {
	for _, v := range []model.Variant{model.VariantA, model.VariantB} {
		var types []string
		for _, e := range sources.EventCatalog(v) {
			types = append(types, e.Type)
			if e.Description == "" {
				t.Errorf("%s has no description", e.Type)
			}
			if err := sources.ValidateEventData(e.Type, e.Example); err != nil {
				t.Errorf("the example of %s fails intake's validation: %v\n%s", e.Type, err, e.Example)
			}
		}
		if !slices.Equal(types, v.EventTypes()) {
			t.Errorf("variant %s catalog lists %v, want %v", v, types, v.EventTypes())
		}
	}
}
