package portal

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/notices"
	"github.com/webhookd/webhookd/webhooks"
)

// noticesListed is how many of the newest notices the notifications page shows.
const noticesListed = 100

// registerNotificationRoutes adds the notifications page (the account's notices, newest first,
// and its channels) and the channels' actions: add, send a test, delete. The rules are the use
// cases' (webhooks.Service.CreateChannel and the rest), as the API's.
func registerNotificationRoutes(g *echo.Group, s *Server, read, write []echo.MiddlewareFunc) {
	h := &notificationHandlers{Server: s}
	g.GET("/notifications", h.page, read...)
	g.POST("/notifications/channels", h.create, write...)
	g.POST("/notifications/channels/:id/test", h.test, write...)
	g.POST("/notifications/channels/:id/delete", h.delete, write...)
}

// notificationHandlers serve the notifications page and its channels' forms, for the session's
// account and variant only.
type notificationHandlers struct {
	*Server
}

// noticeRow is one notice as the page lists it: its line is the one a chat channel receives.
type noticeRow struct {
	ID        int64
	Type      string
	WebhookID int64
	CreatedAt time.Time
	Line      string
	// Channel: the notice is about a channel (its test, its failure), which has no endpoint page.
	Channel bool
	// Summary is how many endpoints a summary of the account rule tells of; 0 for a notice about one.
	Summary int
}

// channelRow is one channel as the page lists it, its kind and types in the API's words.
type channelRow struct {
	*model.Webhook
	KindName string
	Types    []string
}

// channelForm is the add form's values: as sent after a refusal, else the defaults.
type channelForm struct {
	Kind, URL, Error string
	Types            []string
}

// typeOption is one notice type's checkbox of the add form.
type typeOption struct {
	Type    string
	Checked bool
}

// Options are the form's checkboxes, one per notice type.
func (f channelForm) Options() []typeOption {
	out := make([]typeOption, len(model.NoticeTypes))
	for i, t := range model.NoticeTypes {
		out[i] = typeOption{Type: t, Checked: slices.Contains(f.Types, t)}
	}
	return out
}

func (h *notificationHandlers) page(c echo.Context) error {
	return h.renderPage(c, http.StatusOK, channelForm{Kind: webhooks.ChannelWebhook, Types: model.DefaultNoticeTypes}, "")
}

// renderPage renders the notifications page with the add form's values and a line saying what
// an action did, if one did.
func (h *notificationHandlers) renderPage(c echo.Context, status int, form channelForm, notice string) error {
	ctx := c.Request().Context()
	scope := sessionOf(c).Scope()
	chs, err := h.webhooks.ListChannels(ctx, scope)
	if err != nil {
		return err
	}
	evs, err := h.webhooks.ListNotices(ctx, scope, noticesListed)
	if err != nil {
		return err
	}
	channels := make([]channelRow, len(chs))
	for i := range chs {
		channels[i] = channelRow{Webhook: &chs[i], KindName: webhooks.ChannelKind(&chs[i]), Types: webhooks.ChannelTypes(&chs[i])}
	}
	rows := make([]noticeRow, len(evs))
	for i := range evs {
		ev := &evs[i]
		d := model.DecodeNoticeData(ev)
		rows[i] = noticeRow{ID: ev.ID, Type: ev.EventType, CreatedAt: ev.CreatedAt, Line: notices.Line(ev), Channel: d.Channel != ""}
		if d.Summary != nil {
			rows[i].Summary = d.Summary.Webhooks
		}
		if ev.AboutWebhookID != nil {
			rows[i].WebhookID = *ev.AboutWebhookID
		}
	}
	return h.render(c, status, "notifications", map[string]any{
		"Title": "Notifications", "Notices": rows, "Channels": channels, "Form": form, "Notice": notice,
		"Kinds": []string{webhooks.ChannelWebhook, webhooks.ChannelChat},
	})
}

// create adds a channel as POST <prefix>/notification-endpoints does, then shows it, with an
// operational webhook's signing secret this once.
func (h *notificationHandlers) create(c echo.Context) error {
	form := channelForm{Kind: c.FormValue("kind"), URL: strings.TrimSpace(c.FormValue("url")), Types: c.Request().PostForm["types"]}
	if form.Types == nil {
		form.Types = []string{} // nothing ticked is a refusal, not the defaults
	}
	ch, secret, err := h.webhooks.CreateChannel(c.Request().Context(), sessionOf(c).Scope(),
		webhooks.ChannelRegistration{Kind: form.Kind, URL: form.URL, Types: form.Types})
	if problem, ok := channelProblem(err); ok {
		form.Error = problem
		return h.renderPage(c, http.StatusUnprocessableEntity, form, "")
	}
	if err != nil {
		return err
	}
	if ch.Kind != model.KindNoticeWebhook {
		secret = ""
	}
	return h.render(c, http.StatusCreated, "channelcreated", map[string]any{"Title": "Channel added",
		"Channel": channelRow{Webhook: ch, KindName: webhooks.ChannelKind(ch), Types: webhooks.ChannelTypes(ch)}, "Secret": secret})
}

// channelProblem words a refusal of a channel's form for the person who filled it in.
func channelProblem(err error) (string, bool) {
	var invalid *webhooks.InvalidError
	var limit *webhooks.LimitError
	switch {
	case errors.As(err, &limit):
		return fmt.Sprintf("This account already has %d notification channels, its e-mail included; delete one first.", limit.Max), true
	case !errors.As(err, &invalid):
		return "", false
	case invalid.Field == "kind":
		return "Pick a kind: webhook or chat.", true
	case invalid.Field == "types":
		return "Tick one or more notice types from the list.", true
	case invalid.Field == "url" && invalid.Missing:
		return "The URL is required.", true
	case invalid.Field == "url":
		return "The URL cannot be used: " + invalid.Error() + ".", true
	}
	return fmt.Sprintf("“%s” %s.", invalid.Field, invalid.Detail()), true
}

// test sends a notice.test to one channel, as POST <prefix>/notification-endpoints/<id>/test
// does, and shows the page again saying so.
func (h *notificationHandlers) test(c echo.Context) error {
	id, ok := webhookID(c)
	if !ok {
		return errNotFound
	}
	res, err := h.webhooks.TestChannel(c.Request().Context(), sessionOf(c).Scope(), id)
	if err != nil {
		return err
	}
	return h.renderPage(c, http.StatusOK, channelForm{Kind: webhooks.ChannelWebhook, Types: model.DefaultNoticeTypes},
		fmt.Sprintf("A test notice (%d) is on its way to channel %d.", res.Event.ID, id))
}

// delete deletes one channel, as DELETE <prefix>/notification-endpoints/<id> does; deleting the
// e-mail turns the e-mail off.
func (h *notificationHandlers) delete(c echo.Context) error {
	id, ok := webhookID(c)
	if !ok {
		return errNotFound
	}
	if err := h.webhooks.DeleteChannel(c.Request().Context(), sessionOf(c).Scope(), id); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, Prefix+"notifications")
}
