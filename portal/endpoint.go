package portal

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/destination"
	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
)

// registerEndpointRoutes adds one endpoint's page and its actions: the detail (chart, success rate,
// signature help), revealing and rotating the secret, and sending a test.
func registerEndpointRoutes(g *echo.Group, s *Server, read, write []echo.MiddlewareFunc) {
	h := &endpointHandlers{Server: s}
	g.GET("/webhooks/:id", h.detail, read...)
	g.POST("/webhooks/:id/secret", h.revealSecret, write...)
	g.POST("/webhooks/:id/rotate", h.rotateSecret, write...)
	g.POST("/webhooks/:id/test", h.sendTest, write...)
	g.POST("/webhooks/:id/filter", h.filter, write...)
	g.POST("/webhooks/:id/headers", h.headers, write...)
	g.POST("/webhooks/:id/auth", h.auth, write...)
	g.POST("/webhooks/:id/tls", h.tls, write...)
	g.POST("/webhooks/:id/version", h.version, write...)
	g.POST("/webhooks/:id/ordering", h.ordering, write...)
	g.POST("/webhooks/:id/destination", h.destination, write...)
	g.POST("/webhooks/:id/lanes/:laneId/retry", h.retryLane, write...)
	g.POST("/webhooks/:id/lanes/:laneId/skip", h.skipLane, write...)
}

// successRate is the share of an endpoint's attempts that were delivered, from the chart's counts
// summed (webhooks.Tally), so the bar and the chart cannot disagree.
type successRate struct {
	Delivered, Total int
}

// rateOf is the success rate of t.
func rateOf(t webhooks.Totals) successRate {
	return successRate{Delivered: t.Delivered, Total: t.Attempts()}
}

// Percent is the rate rounded down to a whole percent; 0 without attempts (see None).
func (r successRate) Percent() int {
	if r.Total == 0 {
		return 0
	}
	return r.Delivered * 100 / r.Total
}

// Bar draws the rate as a <meter> (coloured by the browser: low under 80 %, optimum 100 %) and
// its words, or says that there was no attempt. The markup is built from numbers only, and holds
// no style attribute, which the portal's CSP forbids.
func (r successRate) Bar() template.HTML {
	if r.Total == 0 {
		return `<span class="rate rate-none">no attempts in 24 h</span>`
	}
	p := r.Percent()
	return template.HTML(fmt.Sprintf(
		`<span class="rate"><meter min="0" max="100" low="80" high="99" optimum="100" value="%d" title="%d of %d attempts delivered in the last 24 hours">%d %%</meter> %d %% of %d</span>`,
		p, r.Delivered, r.Total, p, p, r.Total))
}

// detailView is what the endpoint page shows beyond the webhook: the secret only in the answer to
// a POST that revealed or rotated it.
type detailView struct {
	status            int
	chartRange        string
	secret            string
	previousExpires   *time.Time
	notice, formError string
	// filterText is the filter form's text: what the owner sent when it was tried or refused,
	// else the stored filter. trial is a try's answer, filterError a refusal's.
	filterText  *string
	trial       *webhooks.Trial
	filterError string
	// headersError is a refusal of the headers form; headersNotice what a save did.
	headersError, headersNotice string
	// authError is a refusal of the authentication form; authNotice what a save did.
	authError, authNotice string
	// tlsError is a refusal of the TLS form; tlsNotice what a save did.
	tlsError, tlsNotice string
	// versionError is a refusal of the version form; versionNotice what a change did.
	versionError, versionNotice string
	// orderingText is the ordering form's key as sent when it was refused (else the stored one),
	// orderingError the refusal, orderingNotice what a change did.
	orderingText                  *string
	orderingError, orderingNotice string
	// destinationSent is the destination form's members as sent when they were refused (else the
	// stored ones are shown), destinationError the refusal, destinationNotice what a save did.
	destinationSent                     *destination.Settings
	destinationError, destinationNotice string
	// laneError and laneNotice say what a blocked lane's retry or skip did.
	laneError, laneNotice string
}

func (h *endpointHandlers) detail(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	return h.renderDetail(c, w, detailView{status: http.StatusOK, chartRange: c.QueryParam("range")})
}

// renderDetail renders the endpoint page: the webhook, its chart and latency over 24 hours or 7
// days (range=7d), the last 24 hours' success rate, when auto-disable would disable it, the
// signature snippets, and what a POST adds. The figures are webhooks.Service.Health's, which the
// API's GET <collection>/<id>/health presents, so the page and the API cannot disagree.
func (h *endpointHandlers) renderDetail(c echo.Context, w *model.Webhook, v detailView) error {
	session := sessionOf(c)
	rangeName, chartTitle := webhooks.HealthDay, "Deliveries per hour, last 24 hours"
	if v.chartRange == webhooks.HealthWeek {
		rangeName, chartTitle = webhooks.HealthWeek, "Deliveries per hour, last 7 days"
	}
	health, err := h.webhooks.Health(c.Request().Context(), session.Scope(), w.ID, rangeName)
	if err != nil {
		return err
	}
	headers, err := h.webhooks.RedactedHeaders(w)
	if err != nil {
		return err
	}
	auth, err := h.webhooks.RedactedAuth(w)
	if err != nil {
		return err
	}
	tlsInfo, err := h.webhooks.RedactedTLS(w)
	if err != nil {
		return err
	}
	lanes, err := h.blocked(c, w)
	if err != nil {
		return err
	}
	dest, err := h.destinationOf(w, v.destinationSent)
	if err != nil {
		return err
	}
	orderingText := ""
	if v.orderingText != nil {
		orderingText = *v.orderingText
	} else if w.OrderingKey != nil {
		orderingText = *w.OrderingKey
	}
	filterText := ""
	if v.filterText != nil {
		filterText = *v.filterText
	} else if w.Filter != nil {
		filterText = *w.Filter
	}
	return h.render(c, v.status, "endpoint", map[string]any{
		"FilterText": filterText, "Trial": v.trial, "TrialStopped": trialStopped(v.trial), "FilterError": v.filterError,
		"Headers": sortedHeaders(headers), "HeadersError": v.headersError, "HeadersNotice": v.headersNotice,
		"Auth": auth, "AuthError": v.authError, "AuthNotice": v.authNotice,
		"TLS": tlsInfo, "TLSError": v.tlsError, "TLSNotice": v.tlsNotice,
		"OrderingText": orderingText, "OrderingError": v.orderingError, "OrderingNotice": v.orderingNotice,
		"Blocked": lanes, "LaneError": v.laneError, "LaneNotice": v.laneNotice,
		"Destination": dest, "DestinationError": v.destinationError, "DestinationNotice": v.destinationNotice,
		"Versions": sources.VersionsOf(w.EventType), "VersionError": v.versionError, "VersionNotice": v.versionNotice,
		"Title": fmt.Sprintf("Endpoint %d", w.ID), "Endpoint": w, "LastAttempt": health.LastAttempt,
		"Chart": ChartSVG(health.Hours, chartTitle), "Range": rangeName,
		"Rate":      rateOf(health.TotalsSince(health.To.Add(-webhooks.RateWindow))),
		"Latency":   health.Latency,
		"DisableAt": health.DisableAt,
		"Snippets":  SignatureSnippets(session.Variant),
		"Secret":    v.secret, "PreviousExpires": v.previousExpires, "Notice": v.notice, "FormError": v.formError,
	})
}

// change sends a change of the endpoint's settings through the use case, as PATCH does, and renders
// the endpoint page: over the stored endpoint with refused(the use case's reason) and 422 when it
// refuses the change, over the changed one with changed(it) and 200 when it is made.
func (h *endpointHandlers) change(c echo.Context, w *model.Webhook, s webhooks.Settings,
	refused func(reason string) detailView, changed func(saved *model.Webhook) detailView) error {
	saved, err := h.webhooks.SetSettings(c.Request().Context(), sessionOf(c).Scope(), w.ID, s)
	var invalid *webhooks.InvalidError
	if errors.As(err, &invalid) {
		v := refused(invalid.Error())
		v.status = http.StatusUnprocessableEntity
		return h.renderDetail(c, w, v)
	}
	if err != nil {
		return err
	}
	v := changed(saved)
	v.status = http.StatusOK
	return h.renderDetail(c, saved, v)
}

// revealSecret is GET <collection>/<id>/secret of the API as a POST: the secret appears only in
// this answer (not cached: every page is no-store), never in a URL or a page a GET shows.
func (h *endpointHandlers) revealSecret(c echo.Context) error {
	id, ok := webhookID(c)
	if !ok {
		return errNotFound
	}
	w, plain, err := h.webhooks.Reveal(c.Request().Context(), sessionOf(c).Scope(), id)
	if err != nil {
		return err
	}
	return h.renderDetail(c, w, detailView{status: http.StatusOK, secret: plain,
		notice: "The signing secret, shown in this answer only: reloading the page hides it."})
}

// rotateSecret is POST <collection>/<id>/secret/rotate without a body: a new secret made here,
// the current one signing beside it for model.SecretOverlap, under the API's rotation limit.
func (h *endpointHandlers) rotateSecret(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	r, err := h.webhooks.RotateSecret(c.Request().Context(), sessionOf(c).Scope(), w.ID, nil)
	var limit *webhooks.RotationLimitError
	if errors.As(err, &limit) {
		return h.renderDetail(c, w, detailView{status: http.StatusConflict, formError: fmt.Sprintf(
			"The secret was rotated %d times within 24 hours and every previous secret still signs. Rotate again after %s, when the oldest expires.",
			webhooks.MaxPreviousSecrets, formatTime(limit.RetryAt))})
	}
	if err != nil {
		return err
	}
	return h.renderDetail(c, w, detailView{status: http.StatusOK, secret: r.Secret, previousExpires: &r.PreviousUntil,
		notice: "The secret was rotated. Store the new one now: it is shown in this answer only."})
}

// sendTest is POST <collection>/<id>/test: a webhook.test event to this endpoint alone, started
// after its commit, then that delivery's page.
func (h *endpointHandlers) sendTest(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	res, err := h.webhooks.SendTest(c.Request().Context(), w)
	if err != nil {
		return err // not found when deleted meanwhile, as the API answers
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"deliveries/"+strconv.FormatInt(res.Deliveries[0].ID, 10))
}

// filter is POST <collection>/<id>/filter: the form's filter tried on the endpoint's recent events
// (do=test, as POST <collection>/filter-test: nothing is saved), or saved (do=save, as PATCH
// {"filter"}; empty removes it). Either answer is the endpoint's page with the text as sent.
func (h *endpointHandlers) filter(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	text := strings.TrimSpace(c.FormValue("filter"))
	raw := json.RawMessage(text)
	view := detailView{status: http.StatusOK, filterText: &text}
	ctx, scope := c.Request().Context(), sessionOf(c).Scope()
	switch c.FormValue("do") {
	case "test":
		if text == "" {
			view.status, view.filterError = http.StatusUnprocessableEntity, "Write a filter to try."
			break
		}
		trial, err := h.webhooks.TryFilter(ctx, scope, raw, w.EventType, 0)
		var busy *webhooks.BusyError
		if problem, ok := filterProblem(err); ok {
			view.status, view.filterError = http.StatusUnprocessableEntity, problem
		} else if errors.As(err, &busy) {
			c.Response().Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(busy.RetryAfter.Seconds()))))
			view.status, view.filterError = http.StatusTooManyRequests, fmt.Sprintf(
				"This account is already trying %d filters; try again in a few seconds, when one of them has ended.", webhooks.MaxConcurrentTrials)
		} else if err != nil {
			return err
		} else {
			view.trial = &trial
		}
	case "save":
		saved, err := h.webhooks.SetSettings(ctx, scope, w.ID, webhooks.Settings{Filter: webhooks.FilterEdit{Set: true, JSON: raw}})
		if problem, ok := filterProblem(err); ok {
			view.status, view.filterError = http.StatusUnprocessableEntity, problem
			break
		} else if err != nil {
			return err
		}
		w, view.filterText = saved, nil
		view.notice = "The filter was saved: it applies to the events accepted from now on."
		if saved.Filter == nil {
			view.notice = "The filter was removed: every event of the endpoint's type is delivered from now on."
		}
	default:
		return &pageError{status: http.StatusBadRequest, title: "Form not valid", message: "Try the filter or save it with the form's buttons."}
	}
	return h.renderDetail(c, w, view)
}

// trialStopped words why a trial stopped before the recent events it was to read; empty when it
// did not (or there is no trial).
func trialStopped(t *webhooks.Trial) string {
	if t == nil {
		return ""
	}
	switch t.TruncatedBy {
	case webhooks.TrialStoppedByBytes:
		return fmt.Sprintf("It stopped there, after %d MiB of event data: older events were not tried.", webhooks.MaxTrialBytes>>20)
	case webhooks.TrialStoppedByTime:
		return fmt.Sprintf("It stopped there, after %v: older events were not tried.", webhooks.MaxTrialTime)
	}
	return ""
}

// filterProblem words a refused filter for the person who wrote it: where the fault is and what it
// is; ok is false for any other error.
func filterProblem(err error) (string, bool) {
	var invalid *webhooks.InvalidError
	if !errors.As(err, &invalid) {
		return "", false
	}
	return "The filter cannot be used: " + invalid.Error() + ".", true
}

// shownHeader is one custom header as the endpoint page lists it: its name and its redacted value.
type shownHeader struct{ Name, Redacted string }

func sortedHeaders(headers map[string]string) []shownHeader {
	shown := make([]shownHeader, 0, len(headers))
	for _, name := range slices.Sorted(maps.Keys(headers)) {
		shown = append(shown, shownHeader{Name: name, Redacted: headers[name]})
	}
	return shown
}

// headers is POST <collection>/<id>/headers: the form's "Name: value" lines replace all the
// endpoint's custom headers (do=save, as PATCH {"headers": {...}}; no lines remove them), or
// do=remove removes them (as PATCH {"headers": null}). The answer never shows a value: neither the
// stored ones nor the ones just sent, which a refusal asks to enter again.
func (h *endpointHandlers) headers(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	var edit webhooks.HeadersEdit
	switch c.FormValue("do") {
	case "save":
		raw, problem := headerLines(c.FormValue("headers"))
		if problem != "" {
			return h.renderDetail(c, w, detailView{status: http.StatusUnprocessableEntity, headersError: problem})
		}
		edit = webhooks.HeadersEdit{Set: true, JSON: raw}
	case "remove":
		edit = webhooks.HeadersEdit{Set: true}
	default:
		return &pageError{status: http.StatusBadRequest, title: "Form not valid", message: "Save or remove the headers with the form's buttons."}
	}
	return h.change(c, w, webhooks.Settings{Headers: edit},
		func(reason string) detailView {
			return detailView{headersError: "The headers cannot be used: " + reason + ". Nothing was saved; enter them again."}
		},
		func(saved *model.Webhook) detailView {
			if saved.Headers == nil {
				return detailView{headersNotice: "The headers were removed: attempts from now on send only webhookd's own."}
			}
			return detailView{headersNotice: "The headers were saved: every attempt from now on sends them."}
		})
}

// headerLines reads the headers form's text, one "Name: value" per line (blank lines skipped), as
// the JSON object the API takes; problem says what is wrong with it, naming the line, never a
// value.
func headerLines(text string) (json.RawMessage, string) {
	headers := map[string]string{}
	for i, line := range strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		name = strings.TrimSpace(name)
		if !ok || name == "" {
			return nil, fmt.Sprintf("Line %d is not a header: write one \"Name: value\" per line. Nothing was saved; enter the headers again.", i+1)
		}
		if _, twice := headers[name]; twice {
			return nil, fmt.Sprintf("Line %d names %s again. Nothing was saved; enter the headers again.", i+1, name)
		}
		headers[name] = strings.TrimSpace(value)
	}
	raw, err := json.Marshal(headers)
	if err != nil {
		return nil, "The headers cannot be read."
	}
	return raw, ""
}

// auth is POST <collection>/<id>/auth: the endpoint's authentication to its receiver. do=basic
// sets Basic from username and password, do=oauth2 the client-credentials grant from tokenUrl,
// clientId, clientSecret, scopes (separated by spaces) and audience, each replacing the one stored
// (as PATCH {"auth": {...}}); do=remove removes it (as PATCH {"auth": null}). The answer never
// shows a secret: neither the stored one nor the one just sent, which a refusal asks to enter
// again.
func (h *endpointHandlers) auth(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	var fields map[string]any
	switch do := c.FormValue("do"); do {
	case model.AuthBasic:
		fields = map[string]any{"type": do, "username": c.FormValue("username"), "password": c.FormValue("password")}
	case model.AuthOAuth2:
		fields = map[string]any{"type": do, "tokenUrl": strings.TrimSpace(c.FormValue("tokenUrl")),
			"clientId": c.FormValue("clientId"), "clientSecret": c.FormValue("clientSecret")}
		if scopes := strings.Fields(c.FormValue("scopes")); len(scopes) > 0 {
			fields["scopes"] = scopes
		}
		if audience := strings.TrimSpace(c.FormValue("audience")); audience != "" {
			fields["audience"] = audience
		}
	case "remove":
	default:
		return &pageError{status: http.StatusBadRequest, title: "Form not valid", message: "Save or remove the authentication with the form's buttons."}
	}
	edit := webhooks.AuthEdit{Set: true}
	if fields != nil {
		if edit.JSON, err = json.Marshal(fields); err != nil {
			return err
		}
	}
	return h.change(c, w, webhooks.Settings{Auth: edit},
		func(reason string) detailView {
			return detailView{authError: "The authentication cannot be used: " + reason + ". Nothing was saved; enter it again."}
		},
		func(saved *model.Webhook) detailView {
			if saved.Auth == nil {
				return detailView{authNotice: "The authentication was removed: attempts from now on send no Authorization header."}
			}
			return detailView{authNotice: "The authentication was saved: every attempt from now on sends it."}
		})
}

// tls is POST <collection>/<id>/tls: the endpoint's TLS settings toward its receiver. do=save sets
// them from the pasted PEMs caCert, clientCert and clientKey (those left empty are not set),
// replacing the ones stored (as PATCH {"tls": {...}}); do=remove removes them (as PATCH {"tls":
// null}). The answer never shows a key: neither the stored one nor the one just sent, which a
// refusal asks to paste again.
func (h *endpointHandlers) tls(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	edit := webhooks.TLSEdit{Set: true}
	switch c.FormValue("do") {
	case "save":
		fields := map[string]string{}
		for _, name := range []string{"caCert", "clientCert", "clientKey"} {
			if v := strings.TrimSpace(c.FormValue(name)); v != "" {
				fields[name] = v
			}
		}
		if edit.JSON, err = json.Marshal(fields); err != nil {
			return err
		}
	case "remove":
	default:
		return &pageError{status: http.StatusBadRequest, title: "Form not valid", message: "Save or remove the TLS settings with the form's buttons."}
	}
	return h.change(c, w, webhooks.Settings{TLS: edit},
		func(reason string) detailView {
			return detailView{tlsError: "The TLS settings cannot be used: " + reason + ". Nothing was saved; paste them again."}
		},
		func(saved *model.Webhook) detailView {
			if saved.TLS == nil {
				return detailView{tlsNotice: "The TLS settings were removed: attempts from now on trust the usual roots and present no client certificate."}
			}
			return detailView{tlsNotice: "The TLS settings were saved: every attempt from now on uses them."}
		})
}

// version is POST <collection>/<id>/version: the payload version the endpoint receives
// (docs/events.md, "Versions"), as PATCH {"version": n}; the use case refuses one its event type
// does not have.
func (h *endpointHandlers) version(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(c.FormValue("version"))
	if err != nil {
		return &pageError{status: http.StatusBadRequest, title: "Form not valid", message: "Choose a version in the form's list."}
	}
	return h.change(c, w, webhooks.Settings{Version: &n},
		func(reason string) detailView {
			return detailView{versionError: "The version cannot be used: " + reason + ". Nothing was changed."}
		},
		func(saved *model.Webhook) detailView {
			return detailView{versionNotice: fmt.Sprintf("Attempts from now on carry version %d of the %s data.", saved.Version, saved.EventType)}
		})
}
