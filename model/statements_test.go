package model_test

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"github.com/webhookd/webhookd/model"
)

// storedRow returns each column of one row of table as the database holds it, quoted by SQL so that
// a text, a number and NULL differ (on SQLite a time is the text it was written as), leaving out the
// columns named in skip.
func storedRow(t *testing.T, db *model.DB, table string, id int64, skip ...string) map[string]string {
	t.Helper()
	ctx := context.Background()
	rows, err := db.DB.QueryContext(ctx, fmt.Sprintf("SELECT * FROM %s WHERE id = %d", table, id))
	if err != nil {
		t.Fatal(err)
	}
	cols, err := rows.Columns()
	cols = slices.Clone(cols) // pgdriver reuses the names' memory for the next query once rows close
	_ = rows.Close()
	if err != nil {
		t.Fatal(err)
	}
	quote := "quote(%s)"
	if model.IsPostgres(db) {
		quote = "quote_nullable(%s)"
	}
	exprs := make([]string, len(cols))
	vals := make([]sql.NullString, len(cols))
	dest := make([]any, len(cols))
	for i, c := range cols {
		exprs[i], dest[i] = fmt.Sprintf(quote, c), &vals[i]
	}
	query := fmt.Sprintf("SELECT %s FROM %s WHERE id = %d", strings.Join(exprs, ", "), table, id)
	if err := db.DB.QueryRowContext(ctx, query).Scan(dest...); err != nil {
		t.Fatalf("%s %d: %v", table, id, err)
	}
	row := map[string]string{}
	for i, c := range cols {
		if !slices.Contains(skip, c) {
			row[c] = vals[i].String
		}
	}
	return row
}

func sameRows(t *testing.T, db *model.DB, table string, prepared, byBun int64, skip ...string) {
	t.Helper()
	got, want := storedRow(t, db, table, prepared, skip...), storedRow(t, db, table, byBun, skip...)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s row %d written prepared:\n%v\nthe same values written by bun:\n%v", table, prepared, got, want)
	}
}

// count counts the rows that q selects, its conditions formatted by bun.
func count(t *testing.T, q *bun.SelectQuery) int64 {
	t.Helper()
	n, err := q.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestPreparedStatementsStoreAsBun: the rows the prepared statements write hold exactly what bun
// wrote for the same values (on SQLite, times as the same text: a time with nanoseconds in
// another zone is bound as bun formats it), NULL where a pointer is nil, and compare equal to
// bun-formatted values; what they read is what bun reads.
func TestPreparedStatementsStoreAsBun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		key, acc, err := model.CreateAPIKey(ctx, db, "prepared@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")

		got, _, err := model.Authenticate(ctx, db, key)
		if err != nil {
			t.Fatal(err)
		}
		if !model.HasPreparedStatements(db) {
			t.Fatal("Authenticate did not prepare the hot statements")
		}
		if want, _ := model.GetAccount(ctx, db, acc.ID); !reflect.DeepEqual(got, want) {
			t.Errorf("Authenticate = %+v, bun reads %+v", got, want)
		}

		res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantB, EventType: "lead.captured",
			Data: `{"name":"O'Brien é ?"}`, IdempotencyKey: "k1", RequestHash: "h1"})
		if err != nil || len(res.Deliveries) != 1 || res.Deliveries[0].WebhookID != w.ID || res.Deliveries[0].ID == 0 {
			t.Fatalf("InsertEvent = %+v, %v", res, err)
		}
		twinEvent := *res.Event
		twinEvent.ID, twinEvent.IdempotencyKey = 0, new("k1-twin")
		if _, err := db.NewInsert().Model(&twinEvent).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		sameRows(t, db, "events", res.Event.ID, twinEvent.ID, "id", "idempotency_key")
		d := res.Deliveries[0]
		twinDelivery := d
		twinDelivery.ID, twinDelivery.EventID = 0, twinEvent.ID
		if _, err := db.NewInsert().Model(&twinDelivery).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		sameRows(t, db, "deliveries", d.ID, twinDelivery.ID, "id", "event_id")

		target, err := model.LoadDeliveryTarget(ctx, db, d.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantHook, wantEvent := reload(t, db, w.ID), model.Event{}
		wantHook.PreviousSecrets = []model.PreviousSecret{}
		if err := db.NewSelect().Model(&wantEvent).Where("id = ?", res.Event.ID).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(target.Webhook, *wantHook) || !reflect.DeepEqual(target.Event, wantEvent) {
			t.Errorf("LoadDeliveryTarget = %+v\nbun reads %+v, %+v", target, wantHook, wantEvent)
		}

		// A failed attempt with every nullable value set, its times with nanoseconds and not in UTC
		// (bun writes them in UTC, to the microsecond).
		at := time.Date(2026, 11, 25, 3, 4, 5, 123456789, time.FixedZone("UTC+1", 3600))
		next := at.Add(90 * time.Second)
		o := model.AttemptOutcome{NextAttemptAt: &next}
		o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.LatencyMS = d.ID, 1, w.URL, at, 1234
		o.StatusCode, o.ErrorClass, o.Error = new(500), new("http_status"), new(`receiver said "no", it's é`)
		o.ResponseBody, o.RequestHeaders = new("body\n"), new(`{"a":"b"}`)
		recordAndCompare(t, db, w, o, twinDelivery.ID)
		if n := count(t, db.NewSelect().Model((*model.Webhook)(nil)).Where("id = ?", w.ID).Where("status_at = ?", at).
			Where("last_triggered_at = ?", at).Where("failing_since = ?", at).Where("last_status = ?", model.LastStatusFailed)); n != 1 {
			t.Errorf("the webhook's times after a failed attempt do not equal bun's text of them: %+v", reload(t, db, w.ID))
		}

		// A successful one, every nullable value nil.
		at2 := at.Add(2 * time.Second)
		o = model.AttemptOutcome{Success: true}
		o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt = d.ID, 3, w.URL, at2
		recordAndCompare(t, db, w, o, twinDelivery.ID)
		if n := count(t, db.NewSelect().Model((*model.Webhook)(nil)).Where("id = ?", w.ID).Where("status_at = ?", at2).
			Where("last_success_at = ?", at2).Where("last_triggered_at = ?", at2).Where("failing_since IS NULL").
			Where("last_status = ?", model.LastStatusSuccess)); n != 1 {
			t.Errorf("the webhook's times after a successful attempt do not equal bun's text of them: %+v", reload(t, db, w.ID))
		}
		// An attempt that started before the one recorded compares older, as it did: it changes
		// nothing of the webhook.
		o.Attempt.Attempt, o.StartedAt, o.Success = 5, at2.Add(-time.Microsecond), false
		recordAndCompare(t, db, w, o, twinDelivery.ID)
		if n := count(t, db.NewSelect().Model((*model.Webhook)(nil)).Where("id = ?", w.ID).Where("status_at = ?", at2).
			Where("last_status = ?", model.LastStatusSuccess)); n != 1 {
			t.Errorf("an older attempt overwrote the webhook's outcome: %+v", reload(t, db, w.ID))
		}
	})
}

// recordAndCompare records o, then writes the same attempt (as number o.Attempt+1) and the same
// delivery progress (to delivery twin) with bun, and compares the rows.
func recordAndCompare(t *testing.T, db *model.DB, w *model.Webhook, o model.AttemptOutcome, twin int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := model.RecordAttempt(ctx, db, w, o); err != nil {
		t.Fatal(err)
	}
	var attemptID int64
	if err := db.NewSelect().Model((*model.Attempt)(nil)).Column("id").Where("delivery_id = ?", o.DeliveryID).
		Where("attempt = ?", o.Attempt.Attempt).Scan(ctx, &attemptID); err != nil {
		t.Fatal(err)
	}
	twinAttempt := o.Attempt
	twinAttempt.Attempt++
	if _, err := db.NewInsert().Model(&twinAttempt).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	sameRows(t, db, "delivery_attempts", attemptID, twinAttempt.ID, "id", "attempt")

	d := &model.Delivery{}
	if err := db.NewSelect().Model(d).Where("id = ?", o.DeliveryID).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.LastError, o.Error) || (d.NextAttemptAt == nil) != (o.NextAttemptAt == nil) ||
		d.NextAttemptAt != nil && !d.NextAttemptAt.Equal(o.NextAttemptAt.Truncate(time.Microsecond)) {
		t.Errorf("delivery after the attempt: %+v; outcome %+v", d, o)
	}
	if _, err := db.NewUpdate().Model((*model.Delivery)(nil)).Set("state = ?", d.State).Set("attempts = ?", d.Attempts).
		Set("last_error = ?", o.Error).Set("next_attempt_at = ?", o.NextAttemptAt).Set("updated_at = ?", d.UpdatedAt).
		Where("id = ?", twin).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	sameRows(t, db, "deliveries", o.DeliveryID, twin, "id", "event_id")
}

// TestStatementsBeforePreparation: in a transaction the caller began, which carries no statements,
// InsertEvent and RecordAttempt run formatted by bun, and prepare nothing; they store the same rows
// as the prepared statements do, in a domain change (model.Change) and on the DB.
func TestStatementsBeforePreparation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, err := model.CreateAPIKey(ctx, db, "unprepared@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		w := newWebhook(t, db, acc.ID, model.VariantA, "campaign.created")
		ne := model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`}
		publish := func(inChange bool) *model.PublishResult {
			var res *model.PublishResult
			var err error
			if inChange {
				_, err = model.Change(ctx, db, nil, func(ctx context.Context, cs *model.ChangeSet) (err error) {
					res, err = cs.Emit(ctx, ne)
					return err
				})
			} else {
				err = db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) (err error) {
					res, err = model.InsertEvent(ctx, tx, ne)
					return err
				})
			}
			if err != nil || len(res.Deliveries) != 1 || res.Deliveries[0].WebhookID != w.ID {
				t.Fatalf("InsertEvent = %+v, %v", res, err)
			}
			return res
		}
		at := time.Date(2026, 11, 25, 3, 4, 5, 123456789, time.FixedZone("UTC+1", 3600))
		outcome := func(deliveryID int64) model.AttemptOutcome {
			o := model.AttemptOutcome{NextAttemptAt: new(at.Add(time.Minute))}
			o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.LatencyMS = deliveryID, 1, w.URL, at, 12
			o.StatusCode, o.ErrorClass, o.Error = new(503), new("http_status"), new("receiver answered 503")
			return o
		}
		unprepared := publish(false)
		if err := db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
			_, err := model.RecordAttempt(ctx, tx, w, outcome(unprepared.Deliveries[0].ID))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if model.HasPreparedStatements(db) {
			t.Fatal("statements were prepared inside a transaction")
		}
		if _, err := model.LoadDeliveryTarget(ctx, db, unprepared.Deliveries[0].ID); err != nil {
			t.Fatal(err)
		}
		if !model.HasPreparedStatements(db) {
			t.Fatal("LoadDeliveryTarget did not prepare the hot statements")
		}
		prepared := publish(true)
		if _, err := model.RecordAttempt(ctx, db, w, outcome(prepared.Deliveries[0].ID)); err != nil {
			t.Fatal(err)
		}
		sameRows(t, db, "events", prepared.Event.ID, unprepared.Event.ID, "id", "occurred_at", "created_at")
		sameRows(t, db, "deliveries", prepared.Deliveries[0].ID, unprepared.Deliveries[0].ID, "id", "event_id", "created_at", "updated_at")
		var attempts []int64
		if err := db.NewSelect().Model((*model.Attempt)(nil)).Column("id").OrderExpr("id ASC").Scan(ctx, &attempts); err != nil || len(attempts) != 2 {
			t.Fatalf("attempts %v, %v", attempts, err)
		}
		sameRows(t, db, "delivery_attempts", attempts[1], attempts[0], "id", "delivery_id")
	})
}

// TestPreparedStatementsRefuseNUL: a string with a NUL byte fails, as it did when bun formatted it,
// rather than being stored cut (PostgreSQL's driver drops the byte) or whole (SQLite).
func TestPreparedStatementsRefuseNUL(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := context.Background()
		_, acc, err := model.CreateAPIKey(ctx, db, "nul@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		w := newWebhook(t, db, acc.ID, model.VariantB, "lead.captured")
		d := deliveryFor(t, db, acc.ID, w)
		if !model.HasPreparedStatements(db) {
			t.Fatal("InsertEvent did not prepare the hot statements")
		}
		o := model.AttemptOutcome{}
		o.DeliveryID, o.Attempt.Attempt, o.URL, o.StartedAt, o.ResponseBody = d, 1, w.URL, model.Now(), new("a\x00b")
		if _, err := model.RecordAttempt(ctx, db, w, o); err == nil {
			t.Fatal("an attempt with a NUL byte in its response body was recorded")
		}
	})
}

// TestDeliveryTargetColumnsAreTheModels: LoadDeliveryTarget's statement returns exactly the columns
// its row scans, and those are every column bun knows of a Webhook, and of an Event and a
// PreviousSecret under their prefixes, and the delivery's state and attempts: a field added to one of the models is loaded for an
// attempt, and a column the statement returns that the row lacks fails here, not in a delivery.
func TestDeliveryTargetColumnsAreTheModels(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		selected, scanned, err := model.DeliveryTargetColumns(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"d_state", "d_attempts", "d_lane_seq"}
		for _, m := range []struct {
			typ    reflect.Type
			prefix string
		}{{reflect.TypeFor[model.Webhook](), ""}, {reflect.TypeFor[model.Event](), "ev_"}, {reflect.TypeFor[model.PreviousSecret](), "prev_"}} {
			for _, f := range db.Table(m.typ).Fields {
				want = append(want, m.prefix+f.Name)
			}
		}
		slices.Sort(selected)
		slices.Sort(scanned)
		slices.Sort(want)
		if !slices.Equal(selected, want) || !slices.Equal(scanned, want) {
			t.Errorf("the statement returns %v\nits row scans %v\nthe models' columns are %v", selected, scanned, want)
		}
	})
}
