package activities_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/webhookd/webhookd/activities"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/model/dbtest"
	"github.com/webhookd/webhookd/secretbox"
)

// TestDeliverPermanentErrors: a missing delivery row and a secret the current key cannot open end
// the delivery with a non-retryable error of an exported type, counted and (for a delivery that
// exists) recorded as exhausted with the reason; the database being away stays retryable.
func TestDeliverPermanentErrors(t *testing.T) {
	ctx := context.Background()
	db := dbtest.SQLite(t)
	_, acc, err := model.CreateAPIKey(ctx, db, "owner@example.com", "")
	if err != nil {
		t.Fatal(err)
	}
	other, err := secretbox.New(bytes.Repeat([]byte{1}, 32))
	if err != nil {
		t.Fatal(err)
	}
	_, sealed, err := other.NewSealedWebhookSecret() // sealed with a key the worker no longer has
	if err != nil {
		t.Fatal(err)
	}
	now := model.Now()
	w := &model.Webhook{AccountID: acc.ID, Variant: model.VariantA, URL: "https://r.example.com/hook", EventType: "campaign.created",
		Status: model.VariantA.InitialStatus(), Secret: sealed, CreatedAt: now, UpdatedAt: now}
	if err := model.CreateWebhook(ctx, db, w, 100); err != nil {
		t.Fatal(err)
	}
	res, err := model.InsertEvent(ctx, db, model.NewEvent{AccountID: acc.ID, Variant: model.VariantA, EventType: "campaign.created", Data: `{}`, OnlyWebhook: w.ID})
	if err != nil {
		t.Fatal(err)
	}
	d := res.Deliveries[0]

	current, err := secretbox.New(bytes.Repeat([]byte{2}, 32))
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := activities.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	a := &activities.Activities{DB: db, Secrets: current, Metrics: metrics}
	suite := &testsuite.WorkflowTestSuite{}
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)

	for _, tc := range []struct {
		name       string
		in         activities.DeliverInput
		wantType   string
		wantLogged bool
	}{
		{"missing delivery", activities.DeliverInput{DeliveryID: d.ID + 1000, EventID: d.EventID, WebhookID: w.ID, Attempt: 1}, activities.ErrTypeDeliveryMissing, false},
		{"unreadable secret", activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: w.ID, Attempt: 1}, activities.ErrTypeSecretUnreadable, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := env.ExecuteActivity(a.Deliver, tc.in)
			var appErr *temporal.ApplicationError
			if !errors.As(err, &appErr) || appErr.Type() != tc.wantType || !appErr.NonRetryable() {
				t.Fatalf("err = %v, want a non-retryable %s", err, tc.wantType)
			}
			if n := counterValue(t, metrics.InternalFailures.WithLabelValues(tc.wantType)); n != 1 {
				t.Errorf("webhookd_delivery_internal_failures_total{error_type=%q} = %v, want 1", tc.wantType, n)
			}
			if !tc.wantLogged {
				return
			}
			var got model.Delivery
			if err := db.NewSelect().Model(&got).Where("id = ?", d.ID).Scan(ctx); err != nil {
				t.Fatal(err)
			}
			if got.State != model.DeliveryExhausted || got.LastError == nil || !strings.Contains(*got.LastError, "WEBHOOKD_SECRET_KEY") {
				t.Errorf("delivery row: state %s, last error %v; want exhausted naming WEBHOOKD_SECRET_KEY", got.State, got.LastError)
			}
		})
	}

	t.Run("database away stays retryable", func(t *testing.T) {
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		_, err := env.ExecuteActivity(a.Deliver, activities.DeliverInput{DeliveryID: d.ID, EventID: d.EventID, WebhookID: w.ID, Attempt: 1})
		var appErr *temporal.ApplicationError
		if err == nil || (errors.As(err, &appErr) && appErr.NonRetryable()) {
			t.Fatalf("err = %v, want a retryable error", err)
		}
	})
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
