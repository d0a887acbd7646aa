package portal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/sources"
	"github.com/webhookd/webhookd/webhooks"
)

// pageNames are the templates under templates/, each rendered inside layout.html.
var pageNames = []string{"error", "endpoints", "edit", "delete", "created", "endpoint", "notifications", "channelcreated", "audit"}

func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{"time": formatTime, "actor": auditActor}
	pages := map[string]*template.Template{}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("portal template %s: %w", name, err)
		}
		pages[name] = t
	}
	return pages, nil
}

func formatTime(t any) string {
	switch v := t.(type) {
	case time.Time:
		if v.IsZero() {
			return "never"
		}
		return v.UTC().Format("2006-01-02 15:04:05 UTC")
	case *time.Time:
		if v == nil {
			return "never"
		}
		return formatTime(*v)
	}
	return ""
}

// render writes page name with data (a map; the session's variant, read-only flag and CSRF token
// are added when there is a session).
func (s *Server) render(c echo.Context, status int, name string, data map[string]any) error {
	if session, ok := c.Get(contextSession).(*model.PortalSession); ok {
		data["Session"] = session
		data["CSRF"] = c.Get(contextCSRF)
	}
	var buf bytes.Buffer
	if err := s.pages[name].ExecuteTemplate(&buf, "layout.html", data); err != nil {
		return fmt.Errorf("render %s: %w", name, err)
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// endpointHandlers serve the endpoints page and its actions, for the session's account and
// variant only (model.PortalSession.Scope), as the REST API's handlers serve its caller's.
type endpointHandlers struct {
	*Server
}

// endpointRow is one webhook as the endpoints page shows it, its status in the variant's words.
type endpointRow struct {
	*model.Webhook
	LastAttempt time.Time
	Rate        successRate
}

// maxListed bounds the endpoints page; an account holds at most MaxWebhooks per variant anyway.
const maxListed = 1000

func (h *endpointHandlers) list(c echo.Context) error {
	return h.renderList(c, http.StatusOK, "", "", "")
}

// renderList renders the endpoints page, with a create form's values and its error when a create
// was refused.
func (h *endpointHandlers) renderList(c echo.Context, status int, formURL, formType, formError string) error {
	ctx := c.Request().Context()
	session := sessionOf(c)
	hooks, err := h.webhooks.List(ctx, session.Scope(), model.WebhookFilter{Limit: maxListed})
	if err != nil {
		return err
	}
	ids := make([]int64, len(hooks))
	for i := range hooks {
		ids[i] = hooks[i].ID
	}
	recent, err := h.webhooks.Recent(ctx, session.Scope(), ids)
	if err != nil {
		return err
	}
	rows := make([]endpointRow, len(hooks))
	for i := range hooks {
		r := recent[hooks[i].ID]
		rows[i] = endpointRow{Webhook: &hooks[i], LastAttempt: r.LastAttempt, Rate: rateOf(r.Day)}
	}
	return h.render(c, status, "endpoints", map[string]any{
		"Title": "Endpoints", "Endpoints": rows, "Catalog": sources.EventCatalog(session.Variant),
		"FormURL": formURL, "FormType": formType, "FormError": formError,
	})
}

// create registers a webhook as POST <collection> does: the same checks (event type, URL under the
// egress address policy, the account's limit), and in variant B its test event in the same
// transaction, started after the commit.
func (h *endpointHandlers) create(c echo.Context) error {
	rawURL, eventType := strings.TrimSpace(c.FormValue("url")), c.FormValue("eventType")
	w, secret, err := h.webhooks.Create(c.Request().Context(), sessionOf(c).Scope(), webhooks.Registration{URL: rawURL, EventType: eventType})
	if problem, ok := h.formProblem(err); ok {
		return h.renderList(c, http.StatusUnprocessableEntity, rawURL, eventType, problem)
	}
	if err != nil {
		return err
	}
	return h.render(c, http.StatusCreated, "created", map[string]any{"Title": "Endpoint created", "Endpoint": w, "Secret": secret})
}

// formProblem words a refusal of the use cases that a form's values caused, for the person who
// filled it in; ok is false for any other error.
func (s *Server) formProblem(err error) (problem string, ok bool) {
	var invalid *webhooks.InvalidError
	var limit *webhooks.LimitError
	switch {
	case errors.As(err, &limit):
		return fmt.Sprintf("This account already has %d endpoints; delete one first.", limit.Max), true
	case !errors.As(err, &invalid):
		return "", false
	case invalid.Field == "eventType":
		return "Pick an event type from the list.", true
	case invalid.Field == "url" && invalid.Missing:
		return "The URL is required.", true
	case invalid.Field == "url":
		return "The URL cannot be used: " + invalid.Error() + ".", true
	}
	return fmt.Sprintf("“%s” %s.", invalid.Field, invalid.Detail()), true
}

// load reads the :id webhook within the session's scope: another account's, another variant's,
// a deleted or a malformed id is 404, as in the REST API.
func (h *endpointHandlers) load(c echo.Context) (*model.Webhook, error) {
	id, ok := webhookID(c)
	if !ok {
		return nil, errNotFound
	}
	return h.webhooks.Get(c.Request().Context(), sessionOf(c).Scope(), id)
}

// webhookID reads :id as the API writes ids: decimal digits, no sign, no leading zero.
func webhookID(c echo.Context) (int64, bool) {
	raw := c.Param("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	return id, err == nil && id > 0 && strconv.FormatInt(id, 10) == raw
}

func (h *endpointHandlers) edit(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	return h.render(c, http.StatusOK, "edit", map[string]any{"Title": "Edit endpoint", "Endpoint": w, "FormURL": w.URL})
}

// updateURL is PUT <collection>/<id> {url}: the status starts again as a new webhook's, the
// limits stay.
func (h *endpointHandlers) updateURL(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	rawURL := strings.TrimSpace(c.FormValue("url"))
	_, err = h.webhooks.Update(c.Request().Context(), sessionOf(c).Scope(), w.ID, rawURL, webhooks.Settings{})
	if problem, ok := h.formProblem(err); ok {
		return h.render(c, http.StatusUnprocessableEntity, "edit", map[string]any{"Title": "Edit endpoint", "Endpoint": w, "FormURL": rawURL, "FormError": problem})
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, Prefix)
}

func (h *endpointHandlers) disable(c echo.Context) error {
	return h.toggle(c, h.webhooks.Disable)
}

func (h *endpointHandlers) enable(c echo.Context) error {
	return h.toggle(c, h.webhooks.Enable)
}

func (h *endpointHandlers) toggle(c echo.Context, change func(context.Context, model.WebhookScope, int64, string) (*model.Webhook, error)) error {
	id, ok := webhookID(c)
	if !ok {
		return errNotFound
	}
	if _, err := change(c.Request().Context(), sessionOf(c).Scope(), id, model.ActorPortal); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, Prefix)
}

func (h *endpointHandlers) confirmDelete(c echo.Context) error {
	w, err := h.load(c)
	if err != nil {
		return err
	}
	return h.render(c, http.StatusOK, "delete", map[string]any{"Title": "Delete endpoint", "Endpoint": w})
}

// delete is DELETE <collection>/<id>: the webhook goes, then its unfinished deliveries are
// canceled and their workflows with them (dispatch.EndWebhookDeliveries, as the API's delete).
func (h *endpointHandlers) delete(c echo.Context) error {
	id, ok := webhookID(c)
	if !ok {
		return errNotFound
	}
	if err := h.webhooks.Delete(c.Request().Context(), sessionOf(c).Scope(), id); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, Prefix)
}
