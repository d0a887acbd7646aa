package dispatch_test

import (
	"reflect"
	"testing"

	"github.com/webhookd/webhookd/dispatch"
	"github.com/webhookd/webhookd/internal/temporaltest"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/workflows"
)

func TestMain(m *testing.M) { dbtest.Main(m, temporaltest.Stop) }

// TestActivityNamesMatchWorkflows: the workflows call this package's activities by name, and the
// worker registers Activities, whose method names are the registered names. A renamed method
// would leave the workflows calling an activity no worker has.
func TestActivityNamesMatchWorkflows(t *testing.T) {
	typ := reflect.TypeFor[*dispatch.Activities]()
	for _, name := range []string{workflows.ActivityStartDeliveries, workflows.ActivityStartEventDeliveries,
		workflows.ActivityRecoverDeliveries, workflows.ActivityRetryExhausted, workflows.ActivityAdvanceLane, workflows.ActivityReplayDeliveries} {
		if _, ok := typ.MethodByName(name); !ok {
			t.Errorf("workflows call activity %q, which dispatch.Activities does not have", name)
		}
	}
	if got, want := typ.NumMethod(), 6; got != want {
		t.Errorf("dispatch.Activities has %d exported methods, the workflows name %d: name the new one in workflows", got, want)
	}
}
