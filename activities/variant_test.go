package activities

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/wire"
)

// TestVariantTableNamesWireLayouts: the variant table names each variant's body layout and type
// field; wire must know the layout, and its body
// must carry the type under the table's field name, the name the API uses for the same event.
func TestVariantTableNamesWireLayouts(t *testing.T) {
	at := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	for _, v := range model.Variants {
		spec := v.Spec()
		layout := spec.Body
		if layout != wire.LayoutA && layout != wire.LayoutB {
			t.Fatalf("variant %s names body layout %q, which wire does not have", v, spec.Body)
		}
		for name, body := range map[string][]byte{
			"delivered": wire.Body(layout, "x.y", json.RawMessage(`{}`), at, secret),
			"logged":    wire.LoggedBody(layout, "x.y", json.RawMessage(`{}`), at),
		} {
			if want := `{"` + spec.TypeField + `":"x.y",`; !strings.HasPrefix(string(body), want) {
				t.Errorf("variant %s, %s body %s: want it to start with %s", v, name, body, want)
			}
		}
	}
}
