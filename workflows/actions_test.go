package workflows_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/client"
	"google.golang.org/protobuf/proto"
)

// cloudActions are the Temporal Cloud billable actions of one recorded history, by kind, counted by
// Temporal's published rules (docs/capacity.md, "Billable actions per delivery", cites each):
//   - start: the workflow's start (its search attributes, if any, are free);
//   - markers: the workflow tasks that recorded markers (local activities), one each however many;
//   - localRetries: local activity attempts after the first that the server metered
//     (WorkflowTaskCompleted's metering metadata);
//   - activities: each regular activity scheduled, and each retry of it (ActivityTaskStarted's
//     attempt, less one);
//   - timers: each timer started (one canceled still counts);
//   - upserts: each UpsertSearchAttributes;
//   - signals: each signal received.
//
// Queries are billable too but leave no event; the counts here are what the history shows.
type cloudActions struct {
	start, markers, localRetries, activities, timers, upserts, signals int
}

func (a cloudActions) total() int {
	return a.start + a.markers + a.localRetries + a.activities + a.timers + a.upserts + a.signals
}

func (a cloudActions) String() string {
	return fmt.Sprintf("%d actions (start %d, marker tasks %d, local retries %d, activities %d, timers %d, upserts %d, signals %d)",
		a.total(), a.start, a.markers, a.localRetries, a.activities, a.timers, a.upserts, a.signals)
}

// freeEvents are the event types no action is billed for (the work they record is billed where
// it was asked for: an activity when scheduled, a timer when started).
var freeEvents = map[enumspb.EventType]bool{
	enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED:             true,
	enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:               true,
	enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:             true, // but for its metered local retries
	enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:               true, // but for its retries
	enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:             true,
	enumspb.EVENT_TYPE_TIMER_FIRED:                         true,
	enumspb.EVENT_TYPE_TIMER_CANCELED:                      true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:        true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:           true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:         true,
	enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED: true,
}

// countActions counts the billable actions of a history. An event type it does not know fails the
// test: a workflow change that brings a new kind of event must decide what it costs here.
func countActions(t *testing.T, h *historypb.History) cloudActions {
	t.Helper()
	var a cloudActions
	markerTasks := map[int64]bool{}
	for _, e := range h.GetEvents() {
		switch typ := e.GetEventType(); typ {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			a.start++
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			markerTasks[e.GetMarkerRecordedEventAttributes().GetWorkflowTaskCompletedEventId()] = true
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
			a.localRetries += int(e.GetWorkflowTaskCompletedEventAttributes().GetMeteringMetadata().GetNonfirstLocalActivityExecutionAttempts())
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			a.activities++
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			a.activities += max(int(e.GetActivityTaskStartedEventAttributes().GetAttempt())-1, 0)
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			a.timers++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			a.upserts++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			a.signals++
		default:
			if !freeEvents[typ] {
				t.Errorf("event %d is %s: countActions does not know whether Temporal Cloud bills it; decide, and say so in docs/capacity.md",
					e.GetEventId(), typ)
			}
		}
	}
	a.markers = len(markerTasks)
	return a
}

func loadHistory(t *testing.T, file string) *historypb.History {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	h, err := client.HistoryFromJSON(f, client.HistoryJSONOptions{})
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	return h
}

// deliveredAfter is the actions of a delivery delivered at its attempt n (the first, a local
// activity, or a later one, a regular activity on the retry queue): the start and the first
// attempt's marker task; then, for each attempt that failed, the upsert to retrying (the first also
// sets the other search attributes), the timer and the next attempt's activity; and the upsert to
// delivered when the run was indexed. TestCloudActionsPerDelivery checks it against the recorded
// histories.
func deliveredAfter(n int) int {
	if n == 1 {
		return 2 // never indexed: no upsert
	}
	return 2 + 3*(n-1) + 1
}

// exhaustedAfter is the actions of a delivery whose n attempts all failed, whose exhaustion recorded
// notices notices (each started by an activity), and whose retry window then ended with no retry:
// the start, the marker task, 3 per retry (as deliveredAfter), MarkExhausted, the upsert to
// exhausted, the notices, the retry window's timer and CancelIfWebhookGone at its end.
func exhaustedAfter(n, notices int) int {
	return 2 + 3*(n-1) + 1 + 1 + notices + 1 + 1
}

// TestCloudActionsPerDelivery counts the Temporal Cloud billable actions in each recorded
// DeliveryWorkflow history (workflows/testdata, recorded from a dev server by record_test.go) and
// holds them at the figures docs/capacity.md gives: a change to the workflow that adds an action
// (an upsert, a timer, an activity) fails here with the new count, and the doc's table must follow.
// It also checks the formulas the doc uses for the production schedule (6 attempts) against the
// histories the recorder could make in seconds.
func TestCloudActionsPerDelivery(t *testing.T) {
	want := map[string]cloudActions{
		// The first attempt delivers: start, one marker task.
		"delivery-delivered.json": {start: 1, markers: 1},
		// Two failed attempts, the third delivers.
		"delivery-retried.json": {start: 1, markers: 1, activities: 2, timers: 2, upserts: 3},
		// Two failed attempts, exhausted (MarkExhausted, a notice), a retry signal, the third delivers.
		"delivery-exhausted-retried.json": {start: 1, markers: 1, activities: 4, timers: 2, upserts: 4, signals: 1},
		// A test event: its one attempt fails, exhausted at once, the retry window ends.
		"delivery-test-event.json": {start: 1, markers: 1, activities: 3, timers: 1, upserts: 1},
		// Two failed attempts, exhausted; the window ends and the webhook turns out deleted.
		"delivery-window-ended-webhook-gone.json": {start: 1, markers: 1, activities: 4, timers: 2, upserts: 3},
		// One failed attempt, exhausted; a stale resend is settled; the window ends.
		"delivery-settled.json": {start: 1, markers: 1, activities: 4, timers: 1, upserts: 1, signals: 1},
		// The local attempt hands the attempt back; the regular one waits its turn once.
		"delivery-handback.json":     {start: 1, markers: 1, activities: 2, timers: 1},
		"delivery-handback-far.json": {start: 1, markers: 1, activities: 1, timers: 1},
		// A local attempt retried inside its workflow task (no metered retry), then a 429.
		"delivery-busy.json":  {start: 1, markers: 1, activities: 2, timers: 2, upserts: 2},
		"delivery-rerun.json": {start: 1, activities: 1, upserts: 1},
	}
	got := map[string]cloudActions{}
	files, err := filepath.Glob(filepath.Join("testdata", "delivery-*.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		h := loadHistory(t, file)
		a := countActions(t, h)
		name := filepath.Base(file)
		got[name] = a
		t.Logf("%s: %d events, %d bytes as protobuf, %s", name, len(h.GetEvents()), proto.Size(h), a)
		if w, ok := want[name]; ok && a != w {
			t.Errorf("%s: %s, want %s: update docs/capacity.md's table and prices with the new count", name, a, w)
		}
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("%s is gone: docs/capacity.md counts from it", name)
		}
	}

	// The formulas agree with the histories they extrapolate from.
	for _, c := range []struct {
		what    string
		formula int
		file    string
		adjust  int // actions in the history that the formula's case does not have
	}{
		{"deliveredAfter(1)", deliveredAfter(1), "delivery-delivered.json", 0},
		{"deliveredAfter(3)", deliveredAfter(3), "delivery-retried.json", 0},
		{"exhaustedAfter(1, 1)", exhaustedAfter(1, 1), "delivery-test-event.json", 0},
		// Its webhook was gone when the window ended: one more upsert, to canceled.
		{"exhaustedAfter(2, 1)", exhaustedAfter(2, 1), "delivery-window-ended-webhook-gone.json", 1},
	} {
		if h := got[c.file].total() - c.adjust; c.formula != h {
			t.Errorf("%s = %d, but %s has %d", c.what, c.formula, c.file, h)
		}
	}
	// exhausted-retried up to its retry signal is an exhaustion after 2 attempts with 1 notice, less
	// the window's timer and CancelIfWebhookGone that a window left to end would add.
	if h := prefixActions(t, loadHistory(t, filepath.Join("testdata", "delivery-exhausted-retried.json")), enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED); h != exhaustedAfter(2, 1)-2 {
		t.Errorf("delivery-exhausted-retried.json before its signal: %d actions, want exhaustedAfter(2, 1)-2 = %d", h, exhaustedAfter(2, 1)-2)
	}

	// The figures docs/capacity.md gives for the production schedule (WEBHOOKD_RETRY_SCHEDULE's 5
	// delays: 6 attempts).
	for _, c := range []struct {
		what      string
		got, want int
	}{
		{"delivered at the first attempt", deliveredAfter(1), 2},
		{"delivered at the second attempt", deliveredAfter(2), 6},
		{"exhausted after 6 attempts, one notice", exhaustedAfter(6, 1), 22},
		{"exhausted after 6 attempts, no notice", exhaustedAfter(6, 0), 21},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d actions, docs/capacity.md says %d", c.what, c.got, c.want)
		}
	}
}

// temporalWrites models the writes a delivery's history makes the Temporal server do in its
// database, as docs/capacity.md sizes PostgreSQL: one transaction (the run's mutable state updated,
// its new events appended, its new tasks inserted) for the start and for each event that the server
// records on its own (a workflow task or an activity task handed to a worker, an activity's
// result, a timer fired, a signal, a cancel request) or that a worker's workflow task completion
// brings; and one write of the run's visibility row at its start, at each upsert and at its close.
// The first workflow task is counted as started eagerly (role all): it is written with the start.
// Task queue writes are left out (a task handed to a waiting poller is never written), as are the
// deletes of executed tasks and of the run at the end of its retention.
func temporalWrites(h *historypb.History) (execution, visibility int) {
	visibility = 1 // the start's
	for _, e := range h.GetEvents() {
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED,
			enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED,
			enumspb.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT, enumspb.EVENT_TYPE_TIMER_FIRED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCEL_REQUESTED:
			execution++
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			visibility++
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
			enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
			visibility++
		}
	}
	return execution - 1, visibility // the eager first workflow task is part of the start
}

// TestTemporalWritesPerDelivery holds the write counts docs/capacity.md sizes PostgreSQL with:
// the recorded histories through temporalWrites, and the 7 execution writes and 1 visibility write
// that each failed attempt adds (the timer fired, a workflow task, the activity started and
// completed, a workflow task; the upsert to retrying).
func TestTemporalWritesPerDelivery(t *testing.T) {
	for _, c := range []struct {
		file                  string
		execution, visibility int
	}{
		{"delivery-delivered.json", 2, 2},
		{"delivery-retried.json", 16, 5},
		{"delivery-window-ended-webhook-gone.json", 24, 5},
	} {
		e, v := temporalWrites(loadHistory(t, filepath.Join("testdata", c.file)))
		t.Logf("%s: %d execution writes, %d visibility writes", c.file, e, v)
		if e != c.execution || v != c.visibility {
			t.Errorf("%s: %d execution and %d visibility writes, want %d and %d: update docs/capacity.md's PostgreSQL sizing",
				c.file, e, v, c.execution, c.visibility)
		}
	}
}

// prefixActions counts the actions of h's events before the first event of type stop.
func prefixActions(t *testing.T, h *historypb.History, stop enumspb.EventType) int {
	t.Helper()
	var events []*historypb.HistoryEvent
	for _, e := range h.GetEvents() {
		if e.GetEventType() == stop {
			break
		}
		events = append(events, e)
	}
	return countActions(t, &historypb.History{Events: events}).total()
}
