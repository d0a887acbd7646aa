package model_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/webhookd/webhookd/model"
)

// TestLaneKeyOf: a string, number or boolean at the path names a lane by its JSON text; anything
// else, or nothing, is the keyless lane; an array is indexed by number; a long value is hashed.
func TestLaneKeyOf(t *testing.T) {
	body := map[string]any{"data": map[string]any{"id": "c-1", "n": json.Number("42"), "ok": true, "obj": map[string]any{}, "nil": nil,
		"items": []any{map[string]any{"sku": "x"}}, "long": string(make([]byte, 300))}}
	for path, want := range map[string]string{
		"data.id": `"c-1"`, "data.n": "42", "data.ok": "true", "data.obj": model.NoLaneKey, "data.nil": model.NoLaneKey,
		"data.missing": model.NoLaneKey, "data.id.deeper": model.NoLaneKey, "data.items.0.sku": `"x"`, "data.items.1.sku": model.NoLaneKey,
		"data.items.x": model.NoLaneKey,
	} {
		if got := model.LaneKeyOf(body, path); got != want {
			t.Errorf("LaneKeyOf(%s) = %q, want %q", path, got, want)
		}
	}
	if got := model.LaneKeyOf(body, "data.long"); len(got) != len("sha256:")+64 || got[:7] != "sha256:" {
		t.Errorf("a 300-byte key = %q, want its sha256", got)
	}
	for _, bad := range []string{"", ".a", "a.", "a..b", "a b", "data.$id", string(make([]byte, model.MaxOrderingKeyLength+1))} {
		if model.CheckOrderingKey(bad) == nil {
			t.Errorf("CheckOrderingKey(%q) = nil, want an error", bad)
		}
	}
	for _, good := range []string{"data.id", "data.websiteId", "data.items.0.sku", "a_b-c"} {
		if err := model.CheckOrderingKey(good); err != nil {
			t.Errorf("CheckOrderingKey(%q) = %v", good, err)
		}
	}
}

// TestPublishPlacesOrderedDeliveriesInLanes: intake gives an ordered webhook's deliveries their
// lane by the body's key and consecutive numbers in id order; an unordered webhook's get none; an
// event without the key goes to the keyless lane; the test event is in no lane; an idempotent
// replay takes no number; and on PostgreSQL, concurrent publishes to one lane get numbers in the
// order of their event ids.
func TestPublishPlacesOrderedDeliveriesInLanes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		_, account, err := model.CreateAPIKey(ctx, db, "lanes@example.com", "")
		if err != nil {
			t.Fatal(err)
		}
		key := "data.campaignId"
		mk := func(ordering *string) *model.Webhook {
			t.Helper()
			w := &model.Webhook{AccountID: account.ID, Variant: model.VariantB, URL: "https://r.example.com/", EventType: "lead.captured",
				Status: model.StatusActive, Secret: "v1:x", CreatedAt: model.Now(), UpdatedAt: model.Now(), OrderingKey: ordering}
			if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
				t.Fatal(err)
			}
			return w
		}
		ordered, plain := mk(&key), mk(nil)
		publish := func(data, idem string) *model.PublishResult {
			t.Helper()
			res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: account.ID, Variant: model.VariantB, EventType: "lead.captured",
				Data: data, IdempotencyKey: idem, RequestHash: model.HashRequest(data)})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		place := func(res *model.PublishResult, w *model.Webhook) (lane, seq int64) {
			t.Helper()
			for _, d := range res.Deliveries {
				if d.WebhookID == w.ID {
					if d.LaneID == nil {
						return 0, 0
					}
					return *d.LaneID, *d.LaneSeq
				}
			}
			t.Fatalf("no delivery to webhook %d", w.ID)
			return 0, 0
		}
		a1 := publish(`{"campaignId":"A"}`, "")
		b1 := publish(`{"campaignId":"B"}`, "")
		a2 := publish(`{"campaignId":"A"}`, "k1")
		if again := publish(`{"campaignId":"A"}`, "k1"); !again.Replayed {
			t.Fatal("the second publish with one key was not a replay")
		}
		none := publish(`{"other":1}`, "")
		a3 := publish(`{"campaignId":"A"}`, "")
		laneA, s1 := place(a1, ordered)
		_, s2 := place(a2, ordered)
		lane3, s3 := place(a3, ordered)
		laneB, sb := place(b1, ordered)
		laneNone, sn := place(none, ordered)
		if laneA == 0 || lane3 != laneA || s1 != 1 || s2 != 2 || s3 != 3 {
			t.Fatalf("campaign A: lane %d/%d numbers %d %d %d, want one lane and 1 2 3 (the replay takes none)", laneA, lane3, s1, s2, s3)
		}
		queued := func(res *model.PublishResult) bool { return res.Refs()[0].LaneQueued }
		if queued(a1) || !queued(a2) || queued(b1) {
			t.Fatalf("queued: A#1 %v, A#2 %v, B#1 %v; want only A#2, whose lane had A#1 left to make", queued(a1), queued(a2), queued(b1))
		}
		if laneB == laneA || sb != 1 || laneNone == laneA || laneNone == laneB || sn != 1 {
			t.Fatalf("lanes A %d, B %d (#%d), keyless %d (#%d): want three lanes, each from 1", laneA, laneB, sb, laneNone, sn)
		}
		if l, _ := place(a1, plain); l != 0 {
			t.Fatalf("the unordered webhook's delivery is in lane %d", l)
		}
		test, err := model.InsertEvent(ctx, db, model.WebhookTestEvent(ordered))
		if err != nil {
			t.Fatal(err)
		}
		if l, _ := place(test, ordered); l != 0 {
			t.Fatalf("the test event is in lane %d, want none", l)
		}
		views, err := model.ListLanes(ctx, db, ordered.ID, model.LaneFilter{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{}
		for _, v := range views {
			keys = append(keys, fmt.Sprintf("%s:%d/%d", v.Key, v.Head.Seq, v.LastSeq))
		}
		if want := []string{`"A":1/3`, `"B":1/1`, ":1/1"}; !slices.Equal(keys, want) {
			t.Fatalf("lanes %v, want %v (key:head/last)", keys, want)
		}

		if !model.IsPostgres(db) {
			return // SQLite runs one writer at a time: nothing concurrent to order
		}
		var mu sync.Mutex
		var got []*model.PublishResult
		var wg sync.WaitGroup
		for range 20 {
			wg.Go(func() {
				res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: account.ID, Variant: model.VariantB, EventType: "lead.captured",
					Data: `{"campaignId":"C"}`})
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, res)
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.SortFunc(got, func(a, b *model.PublishResult) int { return int(a.Event.ID - b.Event.ID) })
		for i, res := range got {
			if _, seq := place(res, ordered); seq != int64(i+1) {
				t.Fatalf("event %d (the %d. by id) has number %d: the numbers do not follow the ids", res.Event.ID, i+1, seq)
			}
		}
		// Requests racing with one Idempotency-Key: the losers, whose insert found the winner's
		// key, give their numbers back, so the lane's next event follows the winner's.
		for range 10 {
			wg.Go(func() {
				if _, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: account.ID, Variant: model.VariantB, EventType: "lead.captured",
					Data: `{"campaignId":"C"}`, IdempotencyKey: "race", RequestHash: "h"}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if _, seq := place(publish(`{"campaignId":"C"}`, ""), ordered); seq != 22 {
			t.Fatalf("the event after 20 and one idempotent race has number %d, want 22", seq)
		}
	})
}

// TestStaleLanes: the head of a lane with work left whose row has not moved since the cutoff is
// returned once per period (its updated_at moves); a lane with nothing left, or one that moved
// since, is not.
func TestStaleLanes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		account, w := orderedHook(t, db, "stale@example.com")
		t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
		publish := func(campaign string, at time.Time) int64 {
			res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: account.ID, Variant: model.VariantB, EventType: "lead.captured",
				Data: fmt.Sprintf(`{"campaignId":%q}`, campaign), At: at})
			if err != nil {
				t.Fatal(err)
			}
			return *res.Deliveries[0].LaneID
		}
		waiting := publish("A", t0)
		done := publish("B", t0)
		fresh := publish("C", t0.Add(10*time.Minute))
		if head, err := model.AdvanceLane(ctx, db, done, 1); err != nil || head != nil { // B's one delivery finished
			t.Fatalf("B's lane after its one delivery: head %+v, %v; want none", head, err)
		}
		if _, err := db.NewUpdate().Model((*model.Lane)(nil)).Set("updated_at = ?", t0).Where("id = ?", done).Exec(ctx); err != nil {
			t.Fatal(err)
		}
		cutoff := t0.Add(5 * time.Minute)
		refs, err := model.StaleLanes(ctx, db, cutoff, t0.Add(11*time.Minute), 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(refs) != 1 || refs[0].LaneID != waiting || refs[0].LaneSeq != 1 || refs[0].WebhookID != w.ID || refs[0].AccountID != account.ID {
			t.Fatalf("stale lanes %+v, want lane %d alone (not the finished %d, nor the fresh %d)", refs, waiting, done, fresh)
		}
		if again, err := model.StaleLanes(ctx, db, cutoff, t0.Add(11*time.Minute), 10); err != nil || len(again) != 0 {
			t.Fatalf("the same cutoff again gave %+v, %v: want none, the lane was just woken", again, err)
		}
	})
}

// TestAdvanceLane: advancing a lane past a delivery returns the next one not done, passing over a
// canceled one (skipped, or its webhook deleted), and records how far it got; advancing to an
// earlier number changes nothing.
func TestAdvanceLane(t *testing.T) {
	forEachBackend(t, func(t *testing.T, db *model.DB) {
		ctx := t.Context()
		account, w := orderedHook(t, db, "advance@example.com")
		var ids []int64
		var lane int64
		for range 4 {
			res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: account.ID, Variant: model.VariantB, EventType: "lead.captured",
				Data: `{"campaignId":"A"}`})
			if err != nil {
				t.Fatal(err)
			}
			ids, lane = append(ids, res.Deliveries[0].ID), *res.Deliveries[0].LaneID
		}
		if _, err := model.SkipDelivery(ctx, db, ids[1], model.Now()); err != nil {
			t.Fatal(err)
		}
		head, err := model.AdvanceLane(ctx, db, lane, 1)
		if err != nil || head == nil || head.DeliveryID != ids[2] || head.LaneSeq != 3 || head.AccountID != account.ID || head.WebhookURL != w.URL {
			t.Fatalf("after number 1 (number 2 skipped): head %+v, %v; want delivery %d, number 3", head, err, ids[2])
		}
		if head, err = model.AdvanceLane(ctx, db, lane, 3); err != nil || head == nil || head.LaneSeq != 4 {
			t.Fatalf("after number 3: head %+v, %v; want number 4", head, err)
		}
		if head, err = model.AdvanceLane(ctx, db, lane, 1); err != nil || head == nil || head.LaneSeq != 4 {
			t.Fatalf("advanced back to 1: head %+v, %v; want number 4 still", head, err)
		}
		v, err := model.GetLane(ctx, db, w.ID, lane)
		if err != nil || v.DoneSeq != 3 || v.Head == nil || v.Head.Seq != 4 || v.Waiting != 0 {
			t.Fatalf("lane %+v (head %+v), %v; want done 3, head 4, none waiting", v, v.Head, err)
		}
	})
}

// orderedHook creates an account of owner and its lead.captured webhook ordered by
// data.campaignId.
func orderedHook(t *testing.T, db *model.DB, owner string) (*model.Account, *model.Webhook) {
	t.Helper()
	_, account, err := model.CreateAPIKey(t.Context(), db, owner, "")
	if err != nil {
		t.Fatal(err)
	}
	key := "data.campaignId"
	w := &model.Webhook{AccountID: account.ID, Variant: model.VariantB, URL: "https://r.example.com/", EventType: "lead.captured",
		Status: model.StatusActive, Secret: "v1:x", CreatedAt: model.Now(), UpdatedAt: model.Now(), OrderingKey: &key}
	if err := model.CreateWebhook(t.Context(), db, w, 100); err != nil {
		t.Fatal(err)
	}
	return account, w
}
