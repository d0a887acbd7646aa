package model_test

import (
	"slices"
	"testing"

	"github.com/webhookd/webhookd/model"
)

// TestVariantTableIsConsistent: every status the variant table moves a webhook into is one of the
// variant's own statuses, and each variant has its own API prefix and credential header.
func TestVariantTableIsConsistent(t *testing.T) {
	prefixes, headers := map[string]bool{}, map[string]bool{}
	for _, v := range model.Variants {
		if !v.Valid() {
			t.Fatalf("variant %s in Variants is not valid", v)
		}
		spec := v.Spec()
		moves := append([]string{spec.InitialStatus, spec.FailingStatus, spec.HealedStatus}, spec.HealsFrom...)
		for _, s := range []string{spec.FailedAttemptStatus, spec.DisabledStatus, spec.EnabledStatus} {
			if s != "" {
				moves = append(moves, s)
			}
		}
		for _, s := range moves {
			if !slices.Contains(spec.Statuses, s) {
				t.Errorf("variant %s moves a webhook to %q, not one of its statuses %v", v, s, spec.Statuses)
			}
		}
		if (spec.DisabledStatus == "") != (spec.EnabledStatus == "") {
			t.Errorf("variant %s: a disabled status without an enabled one, or the reverse", v)
		}
		if prefixes[spec.APIPrefix] || headers[spec.AuthHeader] || spec.TypeField == "" || len(spec.EventTypes) == 0 {
			t.Errorf("variant %s: prefix %q, header %q, type field %q, %d event types", v, spec.APIPrefix, spec.AuthHeader, spec.TypeField, len(spec.EventTypes))
		}
		prefixes[spec.APIPrefix], headers[spec.AuthHeader] = true, true
	}
	if model.Variant("C").Valid() {
		t.Error(`variant "C" is valid`)
	}
}
