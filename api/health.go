package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/webhooks"
)

// healthJSON is a webhook's health as GET <collection>/<id>/health presents webhooks.Health.
type healthJSON struct {
	Range       string         `json:"range"`
	From        isoTime        `json:"from"`
	To          isoTime        `json:"to"`
	Hours       []hourJSON     `json:"hours"`
	Totals      totalsJSON     `json:"totals"`
	SuccessRate *float64       `json:"successRate"`
	Latency     *latencyJSON   `json:"latency"`
	LastError   *lastErrorJSON `json:"lastError"`
	LastAttempt *isoTime       `json:"lastAttemptAt"`
	Status      string         `json:"status"`
	Disabled    bool           `json:"disabled"`
	DisableAt   *isoTime       `json:"disableAt"`
}

// hourJSON is one UTC hour's attempts, as the portal's chart draws them.
type hourJSON struct {
	Hour      isoTime `json:"hour"`
	Delivered int     `json:"delivered"`
	Retried   int     `json:"retried"`
	Failed    int     `json:"failed"`
}

// totalsJSON is the range's hours summed.
type totalsJSON struct {
	Delivered int `json:"delivered"`
	Retried   int `json:"retried"`
	Failed    int `json:"failed"`
	Attempts  int `json:"attempts"`
}

// latencyJSON is model.Latency, its percentiles in milliseconds.
type latencyJSON struct {
	Attempts int   `json:"attempts"`
	P50MS    int64 `json:"p50Ms"`
	P95MS    int64 `json:"p95Ms"`
}

// lastErrorJSON names its fields as an attempt of the delivery log does.
type lastErrorJSON struct {
	StartedAt  isoTime `json:"startedAt"`
	ErrorClass string  `json:"errorClass"`
	StatusCode *int    `json:"statusCode"`
	Error      *string `json:"error"`
}

// health is GET <collection>/<id>/health?range=24h|7d: the webhook's attempts per hour over the
// range, their totals, success rate and latency, its last error, status and when the auto-disable
// rule would disable it (webhooks.Service.Health, which the portal's endpoint page draws too).
func (h *deliveryHandlers) health(c echo.Context) error {
	id, err := webhookID(c)
	if err != nil {
		return err
	}
	hl, err := h.webhooks.Health(c.Request().Context(), h.scope(c), id, c.QueryParam("range"))
	if err != nil {
		return notFoundAsWebhook(err)
	}
	return c.JSON(http.StatusOK, h.v.success(presentHealth(hl), "Webhook health retrieved"))
}

// presentHealth words a reading for the API: the totals and success rate summed from its hours,
// null for what it has none of.
func presentHealth(hl *webhooks.Health) healthJSON {
	t := hl.Totals()
	out := healthJSON{
		Range: hl.Range, From: isoTime(hl.From), To: isoTime(hl.To),
		Hours:       make([]hourJSON, len(hl.Hours)),
		Totals:      totalsJSON{Delivered: t.Delivered, Retried: t.Retried, Failed: t.Failed, Attempts: t.Attempts()},
		SuccessRate: t.SuccessRate(),
		Status:      hl.Webhook.Status, Disabled: hl.Webhook.Disabled(),
		DisableAt: optionalTime(hl.DisableAt),
	}
	for i, b := range hl.Hours {
		out.Hours[i] = hourJSON{Hour: isoTime(b.Hour), Delivered: b.Delivered, Retried: b.Retried, Failed: b.Failed}
	}
	if l := hl.Latency; l != nil {
		out.Latency = &latencyJSON{Attempts: l.Attempts, P50MS: l.P50, P95MS: l.P95}
	}
	if e := hl.LastError; e != nil {
		out.LastError = &lastErrorJSON{StartedAt: isoTime(e.StartedAt), ErrorClass: e.ErrorClass, StatusCode: e.StatusCode, Error: e.Error}
	}
	if !hl.LastAttempt.IsZero() {
		out.LastAttempt = optionalTime(&hl.LastAttempt)
	}
	return out
}
