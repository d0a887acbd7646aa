package api

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/webhookd/webhookd/model"
	"github.com/webhookd/webhookd/webhooks"
	"github.com/webhookd/webhookd/wire"
)

// channelHandlers serve one variant's notification endpoints (channels: docs/notifications.md)
// and its notices. The use cases are package webhooks'; these bind and present.
type channelHandlers struct {
	*Server
	v *variant
}

// scope is the caller's notification endpoints: its account's, in the variant of the path.
func (h *channelHandlers) scope(c echo.Context) model.WebhookScope {
	return model.WebhookScope{AccountID: accountOf(c).ID, Variant: h.v.model, Channels: true}
}

// channelJSON is a notification endpoint as both variants present it (only the envelope
// differs): its secret only in the answer that created an operational webhook.
type channelJSON struct {
	ID        int64    `json:"id"`
	Kind      string   `json:"kind"`
	URL       string   `json:"url"`
	Types     []string `json:"types"`
	Status    string   `json:"status"`
	Disabled  bool     `json:"disabled"`
	CreatedAt isoTime  `json:"createdAt"`
	UpdatedAt isoTime  `json:"updatedAt"`
	Secret    string   `json:"secret,omitempty"`
}

func presentChannel(c *model.Webhook, secret string) channelJSON {
	return channelJSON{
		ID: c.ID, Kind: webhooks.ChannelKind(c), URL: c.URL, Types: webhooks.ChannelTypes(c), Status: c.Status,
		Disabled: c.Disabled(), CreatedAt: isoTime(c.CreatedAt), UpdatedAt: isoTime(c.UpdatedAt), Secret: secret,
	}
}

// nullableStrings is a list of strings that tells absent from null, as nullableInt does: absent
// (Set false) keeps the stored value, null (Set, Value nil) resets it to the default.
type nullableStrings struct {
	Set   bool
	Value []string
}

func (n *nullableStrings) UnmarshalJSON(b []byte) error {
	n.Set = true
	n.Value = nil
	if string(b) == "null" {
		return nil
	}
	var v []string
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	n.Value = append([]string{}, v...) // [] stays an empty list, which is refused, not a reset
	return nil
}

type createChannelRequest struct {
	Kind  string   `json:"kind"`
	URL   string   `json:"url"`
	Types []string `json:"types"`
}

// changeChannelRequest is the body of PUT and PATCH: url and types, each kept when left out.
// kind is read only to refuse it with a sentence rather than as an unknown field.
type changeChannelRequest struct {
	URL   *string         `json:"url"`
	Types nullableStrings `json:"types"`
	Kind  json.RawMessage `json:"kind"`
}

func channelID(c echo.Context) (int64, error) { return pathID(c, "notification endpoint") }

func notFoundAsChannel(err error) error { return notFoundAs(err, "notification endpoint") }

// create is POST <prefix>/notification-endpoints {kind, url, types?}.
func (h *channelHandlers) create(c echo.Context) error {
	var req createChannelRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	ch, secret, err := h.webhooks.CreateChannel(c.Request().Context(), h.scope(c),
		webhooks.ChannelRegistration{Kind: req.Kind, URL: req.URL, Types: req.Types})
	if err != nil {
		return err
	}
	if ch.Kind != model.KindNoticeWebhook {
		secret = "" // a chat's deliveries are signed, but nobody there checks them
	}
	return c.JSON(http.StatusCreated, h.v.success(presentChannel(ch, secret), "Notification endpoint created"))
}

// list is GET <prefix>/notification-endpoints: every one of the account's, the e-mail first made
// if the account never had it.
func (h *channelHandlers) list(c echo.Context) error {
	chs, err := h.webhooks.ListChannels(c.Request().Context(), h.scope(c))
	if err != nil {
		return err
	}
	data := make([]channelJSON, len(chs))
	for i := range chs {
		data[i] = presentChannel(&chs[i], "")
	}
	return c.JSON(http.StatusOK, h.v.success(data, "Notification endpoints retrieved"))
}

func (h *channelHandlers) get(c echo.Context) error {
	id, err := channelID(c)
	if err != nil {
		return err
	}
	ch, err := h.webhooks.GetChannel(c.Request().Context(), h.scope(c), id)
	if err != nil {
		return notFoundAsChannel(err)
	}
	return c.JSON(http.StatusOK, h.v.success(presentChannel(ch, ""), "Notification endpoint retrieved"))
}

// change is PUT and PATCH <prefix>/notification-endpoints/<id> {url?, types?}: a field left out
// keeps its value, types null resets to the defaults; a new url starts the status afresh.
func (h *channelHandlers) change(c echo.Context) error {
	id, err := channelID(c)
	if err != nil {
		return err
	}
	var req changeChannelRequest
	if err := decodeJSON(c, &req); err != nil {
		return err
	}
	if req.Kind != nil {
		return validationFailed("kind", "kind cannot be changed; create a new notification endpoint of another kind")
	}
	ch, err := h.webhooks.UpdateChannel(c.Request().Context(), h.scope(c), id, webhooks.ChannelChange{
		URL: req.URL, Types: webhooks.TypesEdit{Set: req.Types.Set, Types: req.Types.Value}})
	if err != nil {
		return notFoundAsChannel(err)
	}
	return c.JSON(http.StatusOK, h.v.success(presentChannel(ch, ""), "Notification endpoint updated"))
}

// delete is DELETE <prefix>/notification-endpoints/<id>; the e-mail's turns the e-mail off.
func (h *channelHandlers) delete(c echo.Context) error {
	id, err := channelID(c)
	if err != nil {
		return err
	}
	if err := h.webhooks.DeleteChannel(c.Request().Context(), h.scope(c), id); err != nil {
		return notFoundAsChannel(err)
	}
	return c.JSON(http.StatusOK, h.v.success(nil, "Notification endpoint deleted"))
}

// test is POST <prefix>/notification-endpoints/<id>/test: a notice.test to this endpoint alone,
// answered with its delivery.
func (h *channelHandlers) test(c echo.Context) error {
	id, err := channelID(c)
	if err != nil {
		return err
	}
	if _, err := h.webhooks.GetChannel(c.Request().Context(), h.scope(c), id); err != nil {
		return notFoundAsChannel(err)
	}
	if err := decodeNoBody(c); err != nil {
		return err
	}
	res, err := h.webhooks.TestChannel(c.Request().Context(), h.scope(c), id)
	if err != nil {
		return notFoundAsChannel(err) // deleted meanwhile
	}
	if len(res.Deliveries) == 0 {
		return notFoundAsChannel(model.ErrNotFound)
	}
	body := map[string]any{"eventId": res.Event.ID, "type": model.NoticeTest, "deliveryId": res.Deliveries[0].ID,
		"messageId": wire.MessageID(res.Event.ID, id)}
	return c.JSON(http.StatusAccepted, h.v.success(body, "Test notice sent"))
}

// noticeJSON is one notice as GET <prefix>/notices lists it: data as the channels received it.
type noticeJSON struct {
	ID        int64           `json:"id"`
	Type      string          `json:"type"`
	WebhookID int64           `json:"webhookId"`
	CreatedAt isoTime         `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
}

// notices is GET <prefix>/notices?limit=: the account's notices, newest first.
func (h *channelHandlers) notices(c echo.Context) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	evs, err := h.webhooks.ListNotices(c.Request().Context(), h.scope(c), limit)
	if err != nil {
		return err
	}
	data := make([]noticeJSON, len(evs))
	for i, ev := range evs {
		data[i] = noticeJSON{ID: ev.ID, Type: ev.EventType, CreatedAt: isoTime(ev.CreatedAt), Data: json.RawMessage(ev.Data)}
		if ev.AboutWebhookID != nil {
			data[i].WebhookID = *ev.AboutWebhookID
		}
	}
	return c.JSON(http.StatusOK, h.v.success(data, fmt.Sprintf("%d notice(s) retrieved", len(data))))
}
