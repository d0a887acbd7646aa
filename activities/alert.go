package activities

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/webhookd/webhookd/model"
)

// MarkExhausted moves the webhook into its variant's failing status once a delivery's schedule has
// run out, disables it when a.Notices.Disable says it has failed long enough, and records the
// notices of these moves (docs/notifications.md), whose deliveries the workflow starts.
func (a *Activities) MarkExhausted(ctx context.Context, in ExhaustedInput) (ExhaustedResult, error) {
	ex := model.Exhaustion{DeliveryID: in.DeliveryID, WebhookID: in.WebhookID, EventID: in.EventID, LastAttemptAt: in.LastAttemptAt}
	if in.LastError != "" || in.LastErrorClass != "" {
		ex.LastError = &model.NoticeError{Class: in.LastErrorClass, Message: in.LastError, EventType: in.EventType}
		if in.LastStatusCode != 0 {
			code := in.LastStatusCode
			ex.LastError.StatusCode = &code
		}
	}
	res, err := model.MarkExhausted(ctx, a.DB, ex, a.Notices)
	if err != nil {
		return ExhaustedResult{}, err
	}
	if a.Metrics != nil {
		a.Metrics.Exhausted.Inc()
	}
	out := ExhaustedResult{Alert: res.Alert, Disabled: res.Disabled}
	for _, n := range res.Notices {
		out.Notices = append(out.Notices, n.Event.ID)
	}
	activity.GetLogger(ctx).Info("delivery exhausted", "delivery", in.DeliveryID, "webhook", in.WebhookID, "alert", res.Alert,
		"disabled", res.Disabled, "notices", len(out.Notices))
	return out, nil
}

// Links are the operator-facing addresses an alert points to.
type Links struct {
	APIBaseURL     string
	TemporalUIURL  string
	TemporalNSpace string
}

// collectionOf returns the webhook collection path and the credential header of a variant, as an
// e-mail shows them.
func collectionOf(v model.Variant) (collection, auth string) {
	spec := v.Spec()
	auth = spec.AuthHeader + ": <your API key>"
	if spec.AuthScheme != "" {
		auth = spec.AuthHeader + ": " + spec.AuthScheme + " <your API key>"
	}
	return spec.APIPrefix + "/webhooks", auth
}

func alertMail(l Links, to string, w *model.Webhook, eventType, lastError string) Mail {
	collection, auth := collectionOf(w.Variant)
	status := w.Variant.Spec().FailingStatus
	base := strings.TrimSuffix(l.APIBaseURL, "/")
	var b strings.Builder
	// "is failing" in both variants: variant A's status is "failed", which does not read as a sentence.
	fmt.Fprintf(&b, "Your webhook %d is failing (status %q): webhookd could not deliver an event to it.\n\n", w.ID, status)
	fmt.Fprintf(&b, "Webhook:     %d\nURL:         %s\nEvent type:  %s\nLast error:  %s\n\n", w.ID, w.URL, eventType, lastError)
	b.WriteString("Once the receiver is fixed, retry the failed deliveries:\n\n")
	fmt.Fprintf(&b, "  curl -X POST %s%s/%d/retry -H '%s'\n\n", base, collection, w.ID, auth)
	fmt.Fprintf(&b, "The delivery log is at GET %s%s/%d/deliveries.\n\n", base, collection, w.ID)
	if l.TemporalUIURL != "" {
		fmt.Fprintf(&b, "Operators: in the Temporal Web UI (%s/namespaces/%s/workflows) search\n", strings.TrimSuffix(l.TemporalUIURL, "/"), l.TemporalNSpace)
		fmt.Fprintf(&b, "  WebhookId=%d AND DeliveryState=\"exhausted\"\nand send the signal \"retry\" to a delivery.\n", w.ID)
	}
	return Mail{
		To:      to,
		Subject: fmt.Sprintf("[webhookd] webhook %d is failing (%s)", w.ID, eventType),
		Body:    b.String(),
	}
}

// disabledMail tells the owner that the service disabled the webhook: since when it failed, that
// nothing is attempted any more while events are kept, and the two calls that undo it.
func disabledMail(l Links, to string, w *model.Webhook, eventType, lastError string) Mail {
	collection, auth := collectionOf(w.Variant)
	base := strings.TrimSuffix(l.APIBaseURL, "/")
	var b strings.Builder
	fmt.Fprintf(&b, "Your webhook %d is now disabled: ", w.ID)
	if w.FailingSince != nil {
		fmt.Fprintf(&b, "it has failed without a single successful delivery since %s", w.FailingSince.UTC().Format(time.RFC3339))
	} else {
		b.WriteString("it has failed without a single successful delivery for too long")
	}
	fmt.Fprintf(&b, " (%d deliveries exhausted).\n\n", w.ExhaustedCount)
	fmt.Fprintf(&b, "Webhook:     %d\nURL:         %s\nEvent type:  %s\nLast error:  %s\n\n", w.ID, w.URL, eventType, lastError)
	b.WriteString("webhookd makes no further delivery attempts to it. New events for it are kept, undelivered,\n")
	b.WriteString("until you replay them.\n\n")
	b.WriteString("Once the receiver is fixed, re-enable the webhook (this resends nothing):\n\n")
	fmt.Fprintf(&b, "  curl -X POST %s%s/%d/enable -H '%s'\n\n", base, collection, w.ID, auth)
	b.WriteString("To replay what failed, including the events kept while it was disabled, retry its\n")
	b.WriteString("deliveries (this re-enables the webhook too):\n\n")
	fmt.Fprintf(&b, "  curl -X POST %s%s/%d/retry -H '%s'\n\n", base, collection, w.ID, auth)
	fmt.Fprintf(&b, "The delivery log is at GET %s/%d/deliveries.\n", collection, w.ID)
	return Mail{
		To:      to,
		Subject: fmt.Sprintf("[webhookd] webhook %d is disabled (%s)", w.ID, eventType),
		Body:    b.String(),
	}
}
